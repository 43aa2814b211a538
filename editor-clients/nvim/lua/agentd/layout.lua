--- Where the agentd windows go (`:help agentd-layout`): the chat window of a workspace and its column
--- (the plan window above it when `plan.position = 'chat'`, the input area below it), opened only in a tab
--- that shows the workspace (else when such a tab becomes current), closed together, and reopened without
--- adding a column.
local config = require('agentd.config')

local M = {}

local api = vim.api

local function chat()
  return require('agentd.chat')
end

--- The chat window of a workspace in a tab (default: the current one): the window tagged for the root
--- of `s` (default: the current buffer's workspace) that shows a chat buffer. Windows belong to their
--- workspace (`w:agentd_chat_root`): a session never takes over another workspace's window.
function M.win(s, tab)
  local root = s and s.root or require('agentd.client').root_for(0)
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    if vim.w[w].agentd_chat_root == root and vim.b[api.nvim_win_get_buf(w)].agentd_chat then
      return w
    end
  end
end

--- Whether a tab (default: the current one) shows the workspace `root`: one of its windows shows an
--- agentd buffer of that root or a file in it. A tab with no file or agentd window counts by its
--- windows' working directory.
function M.tab_shows(root, tab)
  local client = require('agentd.client')
  local fallback = false
  local any = false
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    local b = api.nvim_win_get_buf(w)
    local own = vim.b[b].agentd_root
    if own then
      any = true
      if own == root then
        return true
      end
    elseif vim.bo[b].buftype == '' and api.nvim_buf_get_name(b) ~= '' then
      any = true
      if client.root_for(b) == root then
        return true
      end
    elseif api.nvim_win_get_config(w).relative == '' then
      local tw = vim.fn.win_id2tabwin(w)
      local ok, cwd = pcall(vim.fn.getcwd, tw[2], tw[1])
      if ok and vim.fs.normalize(cwd) == root then
        fallback = true
      end
    end
  end
  return not any and fallback
end

--- Windows waiting for their workspace's tab: { [root] = { chat = session?, plan = session? } }.
M.pending = {}

local function flush_pending()
  for root, p in pairs(M.pending) do
    if M.tab_shows(root) then
      M.pending[root] = nil
      local client = require('agentd.client')
      local active = client.active[root]
      if p.chat and active == p.chat.id then
        M.open(p.chat)
      end
      if p.plan and active == p.plan.id then
        require('agentd.plan').show(p.plan, p.plan_opts)
      end
    end
  end
end

--- Opens a window of `kind` ('chat' or 'plan') for session `s` later, when a tab showing its workspace
--- becomes current (windows open only in a tab that shows their workspace).
function M.defer(s, kind, opts)
  local p = M.pending[s.root] or {}
  M.pending[s.root] = p
  p[kind] = s
  if kind == 'plan' then
    p.plan_opts = opts
  end
  vim.api.nvim_create_autocmd({ 'TabEnter', 'BufWinEnter', 'WinEnter' }, {
    group = vim.api.nvim_create_augroup('agentd.pending', { clear = true }),
    callback = function()
      vim.schedule(flush_pending)
      if next(M.pending) == nil then
        return true
      end
    end,
  })
end

local SPLIT = {
  right = 'botright vsplit',
  left = 'topleft vsplit',
  top = 'topleft split',
  bottom = 'botright split',
}

--- Opens a window for buffer `b` at `position` ('right', 'left', 'top', 'bottom', 'float') without
--- moving the cursor. Returns the window.
function M.open_win(b, position, size)
  local cur = api.nvim_get_current_win()
  local w
  if position == 'float' then
    local width = math.max(20, math.floor(vim.o.columns * size))
    local height = math.max(5, vim.o.lines - 6)
    w = api.nvim_open_win(b, false, {
      relative = 'editor',
      row = 1,
      col = vim.o.columns - width - 2,
      width = width,
      height = height,
      border = 'rounded',
    })
  else
    vim.cmd(SPLIT[position] or SPLIT.right)
    w = api.nvim_get_current_win()
    api.nvim_win_set_buf(w, b)
    if position == 'top' or position == 'bottom' then
      api.nvim_win_set_height(w, math.max(3, math.floor(vim.o.lines * size)))
    else
      api.nvim_win_set_width(w, math.max(20, math.floor(vim.o.columns * size)))
    end
    if api.nvim_win_is_valid(cur) then
      api.nvim_set_current_win(cur)
    end
  end
  return w
end

--- The plan window of the workspace of `s` in this tab when it sits in the chat's column (`plan.position =
--- 'chat'`), else nil.
local function column_plan_win(s)
  if ((config.options.plan or {}).position or 'chat') ~= 'chat' then
    return nil
  end
  local w = require('agentd.plan').win(s)
  if w and api.nvim_win_get_config(w).relative == '' then
    return w
  end
end

--- A new chat window for `s`: below the plan window when the plan already holds the chat's column (so
--- reopening the chat never adds a column), else at `chat.position`.
local function new_chat_win(s, b)
  local opts = config.options.chat or {}
  local plan_win = opts.position ~= 'float' and column_plan_win(s) or nil
  if not plan_win then
    return M.open_win(b, opts.position or 'right', opts.size or 0.4)
  end
  local w
  api.nvim_win_call(plan_win, function()
    vim.cmd('belowright split')
    w = api.nvim_get_current_win()
  end)
  api.nvim_win_set_buf(w, b)
  require('agentd.plan').render(s)
  return w
end

--- Shows the chat of a session, keeping the cursor where it is: in the chat window of its workspace in
--- this tab, else a new one (with the input area below it) if this tab shows the workspace; otherwise when
--- such a tab becomes current. `opts.focus`: put the cursor in the input area (Insert mode).
function M.open(s, opts)
  opts = opts or {}
  local b = chat().buf(s)
  local w = M.win(s)
  local input = require('agentd.input')
  if w then
    if api.nvim_win_get_buf(w) ~= b then
      api.nvim_win_set_buf(w, b)
    end
    if opts.focus then
      input.open(s.root, w)
    end
  elseif M.tab_shows(s.root) then
    w = new_chat_win(s, b)
    vim.w[w].agentd_chat_root = s.root
    input.open(s.root, w)
    local root = s.root
    api.nvim_create_autocmd('WinClosed', {
      pattern = tostring(w),
      once = true,
      callback = function()
        vim.schedule(function()
          local iw = input.win(root)
          if iw and not M.win({ root = root }) and #api.nvim_tabpage_list_wins(0) > 1 then
            api.nvim_win_close(iw, false)
          end
        end)
      end,
    })
  else
    M.defer(s, 'chat')
    chat().render(s)
    return nil
  end
  local wo = vim.wo[w]
  wo.wrap = true
  wo.linebreak = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = 'no'
  wo.foldcolumn = '0'
  wo.spell = false
  wo.statusline = ' agentd chat%=%l/%L '
  chat().render(s)
  if opts.focus then
    input.focus(s.root, (config.options.input or {}).start_insert ~= false)
  end
  return w
end

--- Closes the chat's column of the workspace of `s` in this tab: the chat window, its input area, and the
--- plan window when it sits in that column (it comes back with the chat). Returns false if no chat was open.
function M.close(s)
  local w = M.win(s)
  if not w then
    return false
  end
  local input = require('agentd.input')
  local plan = require('agentd.plan')
  local wins = { input.win(s.root), w }
  local pw = column_plan_win(s)
  if pw then
    plan.hide_with_chat(s, pw)
    wins[#wins + 1] = pw
  end
  for _, x in ipairs(wins) do
    if x and api.nvim_win_is_valid(x) and #api.nvim_tabpage_list_wins(0) > 1 then
      api.nvim_win_close(x, false)
    end
  end
  return true
end

return M
