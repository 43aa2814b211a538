-- Runs the steps of AGENTD_STEPS (a JSON list) against the plugin and the real daemon, and reports a
-- snapshot of the screen's agentd windows at each `snap`. One step is one object:
--   {"edit": "file"}            cd to AGENTD_WS and edit that file
--   {"cmd": "Agentd hi"}        an Ex command                {"keys": "ihello<Esc>"}  typed keys
--   {"wait": "turn", "n": 2}    until N turns ended          {"wait": "approval"}     an approval window
--   {"wait": "session", "n": 1} until N AgentdSession events {"wait": "idle"}         no request pending
--   {"wait": "exit", "n": 1}    until N AgentdExit events    {"wait": "select"}       a vim.ui.select
--   {"wait": "update", "kind": "retry"}  until an update of that kind arrived
--   {"wait": "input"}           the cursor is in the input area
--   {"wait": "lua", "expr": "return …"}  until the chunk returns true
--   {"snap": "name"}            record the snapshot as out.snaps[name]
--   {"lua": "return …", "as": "name"}  out.values[name] = the chunk's result
--   {"size": [columns, lines]}  resize the screen
-- Env: AGENTD_WS, AGENTD_STEPS, AGENTD_PICKS (the vim.ui.select recorder), AGENTD_OPTS, AGENTD_APPROVAL_UI.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out
out.snaps, out.values, out.updates = {}, {}, {}

local api = vim.api

local function short_name(b)
  return (api.nvim_buf_get_name(b):gsub('^agentd://(%a+)/.*$', 'agentd://%1'))
end

--- Highlight groups on each line of a buffer (extmarks of any namespace), as `{ [line] = group }`.
local function line_groups(b)
  local groups = {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(b, -1, 0, -1, { details = true })) do
    local d = m[4]
    local g = d.line_hl_group or d.hl_group
    if g then
      groups[tostring(m[2] + 1)] = g
    end
  end
  return groups
end

local function window(w)
  local b = api.nvim_win_get_buf(w)
  local cfg = api.nvim_win_get_config(w)
  local pos = api.nvim_win_get_position(w)
  local view = api.nvim_win_call(w, function()
    return { vim.fn.line('w0'), vim.fn.line('w$') }
  end)
  local title = vim.NIL
  if cfg.title then
    local parts = {}
    for _, chunk in ipairs(type(cfg.title) == 'table' and cfg.title or { { cfg.title } }) do
      parts[#parts + 1] = chunk[1]
    end
    title = table.concat(parts)
  end
  return {
    name = short_name(b),
    lines = L.lines_of(b),
    winbar = L.winbar(w),
    statusline = vim.wo[w].statusline,
    float = cfg.relative ~= '',
    title = title,
    col = pos[2],
    width = api.nvim_win_get_width(w),
    height = api.nvim_win_get_height(w),
    topline = view[1],
    botline = view[2],
    cursor = api.nvim_win_get_cursor(w)[1],
    groups = line_groups(b),
  }
end

local function snapshot()
  local wins = {}
  local columns = {}
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    local s = window(w)
    wins[#wins + 1] = s
    if not s.float then
      columns[tostring(s.col)] = true
    end
  end
  local by_name = {}
  for _, s in ipairs(wins) do
    by_name[s.name] = s
  end
  local cur = api.nvim_get_current_win()
  return {
    layout = vim.tbl_map(function(s)
      return s.name
    end, wins),
    columns = vim.tbl_count(columns),
    chat = by_name['agentd://chat'] or vim.NIL,
    plan = by_name['agentd://plan'] or vim.NIL,
    input = by_name['agentd://input'] or vim.NIL,
    approval = by_name['agentd://approval'] or vim.NIL,
    current = short_name(api.nvim_win_get_buf(cur)),
    mode = api.nvim_get_mode().mode,
  }
end

local function count(name)
  return function(n)
    return function()
      return #L.events(name) >= n
    end
  end
end

local WAITS = {
  turn = count('AgentdTurnEnd'),
  session = count('AgentdSession'),
  exit = count('AgentdExit'),
  approval = function()
    return function()
      return #L.windows('agentd://approval/') == 1
    end
  end,
  input = function()
    return function()
      local w = L.windows('agentd://input/')
      return #w == 1 and w[1].win == api.nvim_get_current_win()
    end
  end,
  select = function(n)
    return function()
      return #out.selects >= n
    end
  end,
  idle = function()
    return function()
      local c = L.client()
      return next(require('agentd.client').resolving) == nil and (c == nil or next(c.requests) == nil)
    end
  end,
}

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  out.messages = {}
  local notify = vim.notify
  vim.notify = function(msg, level, o)
    table.insert(out.messages, msg)
    return notify(msg, level, o)
  end
  api.nvim_create_autocmd('User', {
    pattern = 'AgentdUpdate',
    callback = function(a)
      table.insert(out.updates, a.data.update.sessionUpdate)
    end,
  })
  local ws = os.getenv('AGENTD_WS')
  for i, step in ipairs(L.env_json('AGENTD_STEPS')) do
    local what = ('step %d %s'):format(i, vim.json.encode(step))
    if step.edit then
      vim.cmd.cd(vim.fn.fnameescape(ws))
      vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. step.edit))
    elseif step.cmd then
      vim.cmd(step.cmd)
    elseif step.keys then
      api.nvim_feedkeys(vim.keycode(step.keys), 'mx', false)
    elseif step.wait == 'update' then
      L.wait(30000, function()
        return vim.tbl_contains(out.updates, step.kind)
      end, what)
    elseif step.wait == 'lua' then
      local pred = assert(loadstring(step.expr))
      L.wait(step.ms or 10000, pred, what)
    elseif step.wait then
      L.wait(step.ms or 30000, WAITS[step.wait](step.n or 1), what)
    elseif step.snap then
      out.snaps[step.snap] = snapshot()
    elseif step.lua then
      local v = assert(loadstring(step.lua))()
      out.values[step.as or tostring(i)] = v == nil and vim.NIL or v
    elseif step.size then
      vim.o.columns, vim.o.lines = step.size[1], step.size[2]
    else
      error('unknown step ' .. what)
    end
  end
  if L.client() then
    L.stop_all()
  end
end)
