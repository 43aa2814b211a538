-- Shared helpers of the Neovim drivers (TESTING.md §1.5). Drivers only report: everything they observe
-- goes into `out`, written as JSON to $AGENTD_OUT; pytest asserts on it.
--
-- Environment: AGENTD_OUT (report file), AGENTD_PLUGIN (editor-clients/nvim), AGENTD_CMD (JSON argv of
-- the daemon), AGENTD_WS (workspace), AGENTD_PICKS (JSON: label to pick per vim.ui.select `kind`, `^text`
-- for the first label starting with text; a list is consumed in order; "hold" never answers),
-- AGENTD_DATA_DIR.
local L = {}

L.out = { selects = {}, events = {}, plans = {} }
local out = L.out

function L.finish(code, err)
  out.error = err
  local f = assert(io.open(assert(os.getenv('AGENTD_OUT')), 'w'))
  f:write(vim.json.encode(out))
  f:close()
  os.exit(code)
end

function L.wait(ms, pred, what)
  if not vim.wait(ms, pred, 10) then
    L.finish(1, 'timeout: ' .. what)
  end
end

function L.env_json(name, default)
  local v = os.getenv(name)
  if v == nil or v == '' then
    return default
  end
  return vim.json.decode(v)
end

--- The plugin on the runtimepath, its plugin/ script sourced (as `-u NONE` skips plugins), setup().
--- Approvals go through vim.ui.select (the recorder) unless AGENTD_APPROVAL_UI says 'diff'; AGENTD_OPTS
--- (JSON) adds setup() options.
function L.load_plugin(opts)
  vim.opt.rtp:prepend(assert(os.getenv('AGENTD_PLUGIN')))
  vim.cmd.runtime('plugin/agentd.lua')
  vim.lsp.set_log_level('info')
  local base = { cmd = L.env_json('AGENTD_CMD'), approval = { ui = os.getenv('AGENTD_APPROVAL_UI') or 'select' } }
  opts = vim.tbl_deep_extend('force', base, opts or {}, L.env_json('AGENTD_OPTS', {}))
  require('agentd').setup(opts)
end

local function lines_of(b)
  return vim.api.nvim_buf_get_lines(b, 0, -1, false)
end
L.lines_of = lines_of

--- Windows of the current tab whose buffer name starts with `prefix`.
function L.windows(prefix)
  local found = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    local name = vim.api.nvim_buf_get_name(b)
    if vim.startswith(name, prefix) then
      found[#found + 1] = { win = w, buf = b, name = name }
    end
  end
  return found
end

--- The winbar of window `w` as drawn (an expression is evaluated at the window's width).
function L.winbar(w)
  local wb = vim.wo[w].winbar
  if wb == '' then
    return ''
  end
  return vim.api.nvim_eval_statusline(wb, { winid = w, use_winbar = true }).str
end

--- { lines, winbar } of the one window whose buffer name starts with `prefix`, or vim.NIL.
function L.window_state(prefix)
  local ws = L.windows(prefix)
  if #ws ~= 1 then
    return vim.NIL
  end
  return { lines = lines_of(ws[1].buf), winbar = L.winbar(ws[1].win) }
end

--- The workspace-relative names of the file windows of the tab, and the agentd windows, in layout order.
function L.layout()
  local names = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local name = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w))
    names[#names + 1] = (name:gsub('^agentd://(%a+)/.*$', 'agentd://%1'))
  end
  return names
end

--- Replaces vim.ui.select with a recorder. It records the kind, prompt, the items as displayed and
--- what the approval window showed, then picks the label AGENTD_PICKS names for that kind.
function L.record_select()
  local picks = L.env_json('AGENTD_PICKS', {})
  L.held = {}
  vim.ui.select = function(items, opts, on_choice)
    local fmt = opts.format_item or tostring
    local shown = {}
    for _, it in ipairs(items) do
      shown[#shown + 1] = fmt(it)
    end
    local details = vim.NIL
    local approval = L.windows('agentd://approval/')
    if #approval == 1 then
      details = lines_of(approval[1].buf)
    end
    local chat = L.window_state('agentd://chat/')
    local rec = {
      kind = opts.kind or vim.NIL,
      prompt = opts.prompt or vim.NIL,
      items = shown,
      details = details,
      chat_winbar = chat ~= vim.NIL and chat.winbar or vim.NIL,
      picked = vim.NIL,
    }
    table.insert(out.selects, rec)
    local want = picks[opts.kind or '']
    if type(want) == 'table' then
      want = table.remove(want, 1)
    end
    if want == 'hold' then
      table.insert(L.held, on_choice)
      return
    end
    for i, label in ipairs(shown) do
      local prefix = type(want) == 'string' and want:sub(1, 1) == '^' and vim.startswith(label, want:sub(2))
      if label == want or prefix or (want == '#1' and i == 1) then
        rec.picked = label
        return on_choice(items[i], i)
      end
    end
    on_choice(nil, nil)
  end
end

--- Records the plugin's User events; after each `plan` update, the plan window's lines.
function L.record_events()
  vim.api.nvim_create_autocmd('User', {
    pattern = { 'AgentdSession', 'AgentdTurnStart', 'AgentdTurnEnd', 'AgentdApproval', 'AgentdExit' },
    callback = function(a)
      local d = vim.deepcopy(a.data or {})
      d.event = a.match
      table.insert(out.events, d)
    end,
  })
  vim.api.nvim_create_autocmd('User', {
    pattern = 'AgentdUpdate',
    callback = function(a)
      if a.data.update.sessionUpdate == 'plan' then
        table.insert(out.plans, {
          replay = a.data.replay,
          window = L.window_state('agentd://plan/'),
        })
      end
    end,
  })
end

--- Events recorded so far with this name.
function L.events(name)
  return vim.tbl_filter(function(e)
    return e.event == name
  end, out.events)
end

function L.client()
  return vim.lsp.get_clients({ name = 'agentd' })[1]
end

--- Waits for the end of the n-th turn; returns its AgentdTurnEnd data.
function L.wait_turn(n, ms)
  L.wait(ms or 30000, function()
    return #L.events('AgentdTurnEnd') >= n
  end, 'end of turn ' .. n)
  return L.events('AgentdTurnEnd')[n]
end

--- Stops every agentd client and waits until they are gone.
function L.stop_all()
  for _, c in ipairs(vim.lsp.get_clients({ name = 'agentd' })) do
    c:stop()
  end
  L.wait(10000, function()
    return #vim.lsp.get_clients({ name = 'agentd' }) == 0
  end, 'agentd clients stopped')
end

--- Runs `body` and reports; any Lua error is reported with its traceback and exit status 1.
function L.run(body)
  local ok, err = xpcall(body, debug.traceback)
  L.finish(ok and 0 or 1, (not ok) and err or nil)
end

return L
