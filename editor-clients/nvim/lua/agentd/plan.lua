--- The plan window: the session's TODO list, replaced on every `plan` update (PROTOCOL.md §7.4).
--- One line per item: `[x]` completed, `[~]` in progress, `[ ]` pending.
local config = require('agentd.config')

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('agentd.plan')

M.marks = { completed = '[x]', done = '[x]', in_progress = '[~]', pending = '[ ]' }
local HL = { completed = 'Comment', done = 'Comment', in_progress = 'DiagnosticInfo' }

--- Sessions whose plan window the user closed (not reopened automatically; :AgentdTodos reopens it).
local closed_by_user = {}
--- Windows closed together with the chat (`:AgentdChat`): not the user closing the plan. Workspaces whose
--- plan went away with the chat: it comes back with it.
local with_chat = {}
M.hidden_with_chat = {}

--- The plan window `w` of `s` is about to close with the chat window.
function M.hide_with_chat(s, w)
  with_chat[w] = true
  M.hidden_with_chat[s.root] = true
end

--- The plan window's lines for a session.
function M.lines(s)
  local entries = s.plan and s.plan.entries or {}
  if #entries == 0 then
    return { '(no todos)' }
  end
  local out = {}
  for _, e in ipairs(entries) do
    local content = (e.content or ''):gsub('\r?\n', ' ')
    out[#out + 1] = ('%s %s'):format(M.marks[e.status] or '[?]', content)
  end
  return out
end

local function counts(s)
  local done, total = 0, 0
  for _, e in ipairs(s.plan and s.plan.entries or {}) do
    total = total + 1
    if e.status == 'completed' or e.status == 'done' then
      done = done + 1
    end
  end
  return done, total
end

--- The plan buffer of a session (created on first use).
function M.buf(s)
  local name = 'agentd://plan/' .. s.id
  local b = s.plan_buf
  if b and api.nvim_buf_is_valid(b) then
    return b
  end
  b = api.nvim_create_buf(false, true)
  s.plan_buf = b
  api.nvim_buf_set_name(b, name)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].swapfile = false
  vim.b[b].agentd_plan = s.id
  vim.b[b].agentd_root = s.root
  vim.bo[b].filetype = 'agentd_plan'
  vim.bo[b].modifiable = false
  return b
end

--- Whether window `w` is a plan window of workspace `root` (tagged `w:agentd_plan_root`).
local function is_plan_win(w, root)
  return vim.w[w].agentd_plan_root == root and vim.b[api.nvim_win_get_buf(w)].agentd_plan ~= nil
end

--- The plan window of a session's workspace in a tab (default: the current one), if any. Windows belong
--- to their workspace: a session never takes over another workspace's plan window.
function M.win(s, tab)
  local root = s and s.root or require('agentd.client').root_for(0)
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    if is_plan_win(w, root) then
      return w
    end
  end
end

--- The plan windows of a session's workspace in every tab.
local function wins(s)
  local found = {}
  for _, w in ipairs(api.nvim_list_wins()) do
    if is_plan_win(w, s.root) then
      found[#found + 1] = w
    end
  end
  return found
end

--- The plan window's height: its lines plus the winbar (floats have a border title instead).
local function height_for(s, float)
  local max = (config.options.plan or {}).max_height or 12
  return math.max(1, math.min(max, #M.lines(s))) + (float and 0 or 1)
end

local function open_win(s, b)
  local opts = config.options.plan or {}
  local position = opts.position or 'chat'
  local cur = api.nvim_get_current_win()
  local w
  if position == 'chat' then
    local chat_win = require('agentd.chat').win(s)
    if chat_win then
      api.nvim_win_call(chat_win, function()
        vim.cmd('aboveleft split')
        w = api.nvim_get_current_win()
      end)
      api.nvim_win_set_buf(w, b)
      api.nvim_win_set_height(w, height_for(s))
    else
      position = 'right'
    end
  end
  if not w and position == 'float' then
    local width = math.min(60, math.max(30, math.floor(vim.o.columns * 0.35)))
    w = api.nvim_open_win(b, false, {
      relative = 'editor',
      anchor = 'NE',
      row = 1,
      col = vim.o.columns,
      width = width,
      height = height_for(s, true),
      border = 'rounded',
      title = ' agentd plan ',
    })
  elseif not w then
    w = require('agentd.chat').open_win(b, position, 0.3)
    if position == 'top' or position == 'bottom' then
      api.nvim_win_set_height(w, height_for(s))
    end
  end
  if api.nvim_win_is_valid(cur) then
    api.nvim_set_current_win(cur)
  end
  vim.w[w].agentd_plan_root = s.root
  local wo = vim.wo[w]
  wo.wrap = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = 'no'
  wo.foldcolumn = '0'
  wo.winfixheight = true
  vim.api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(w),
    once = true,
    callback = function()
      if with_chat[w] then
        with_chat[w] = nil
      else
        closed_by_user[s.id] = true
      end
    end,
  })
  return w
end

local function is_active(s)
  local client = require('agentd.client')
  return client.active[s.root] == s.id or client.active[s.root] == nil
end

--- Redraws a session's plan buffer; the plan windows of its workspace (in any tab) show the active
--- session's plan.
function M.render(s)
  local b = M.buf(s)
  local lines = M.lines(s)
  vim.bo[b].modifiable = true
  api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  api.nvim_buf_clear_namespace(b, ns, 0, -1)
  for i, e in ipairs(s.plan and s.plan.entries or {}) do
    local group = HL[e.status]
    if group then
      vim.hl.range(b, ns, group, { i - 1, 0 }, { i - 1, -1 })
    end
  end
  if not is_active(s) then
    return
  end
  for _, w in ipairs(wins(s)) do
    if api.nvim_win_get_buf(w) ~= b then
      api.nvim_win_set_buf(w, b)
    end
    local done, total = counts(s)
    -- set on every render: a window switched to another session's buffer keeps no stale title
    vim.wo[w].winbar = ('agentd plan · %d/%d done'):format(done, total)
    vim.wo[w].statusline = ' agentd plan'
    if api.nvim_win_get_config(w).relative ~= '' then
      api.nvim_win_set_config(w, { title = ' agentd plan ' })
    end
    if api.nvim_win_get_config(w).relative ~= '' then
      api.nvim_win_set_config(w, { height = height_for(s, true) })
    elseif (config.options.plan or {}).position ~= 'left' and (config.options.plan or {}).position ~= 'right' then
      api.nvim_win_set_height(w, height_for(s))
    end
  end
end

--- Shows the plan of a session: opens the window (if `auto_open`, or `opts.force`) and redraws it. The
--- window opens only in a tab that shows the session's workspace; otherwise when such a tab is entered.
function M.show(s, opts)
  opts = opts or {}
  if opts.force then
    closed_by_user[s.id] = nil
  end
  local b = M.buf(s)
  if not M.win(s) and is_active(s) then
    local auto = (config.options.plan or {}).auto_open ~= false
    if opts.force or (auto and not closed_by_user[s.id]) then
      local chat = require('agentd.chat')
      if chat.tab_shows(s.root) then
        open_win(s, b)
      elseif #wins(s) == 0 or opts.force then
        chat.defer(s, 'plan', opts)
      end
    end
  end
  M.render(s)
end

return M
