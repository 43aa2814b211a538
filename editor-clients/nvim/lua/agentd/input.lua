--- The input area (`:help agentd-input`): a small buffer below the chat window where prompts are typed, as
--- in CodeCompanion and avante. `<CR>` in Normal mode or `<C-s>` sends it to the workspace's session;
--- `<C-c>` cancels the running turn. A visual range given to `:Agentd` (or `<leader>aa` in Visual mode)
--- without a prompt is attached to the next prompt sent from here, and the winbar says what is attached.
--- One input buffer per workspace, so a draft survives session switches.
local config = require('agentd.config')
local util = require('agentd.util')

local M = {}

local api = vim.api

---@type table<string, integer> root -> input buffer
M.bufs = {}
---@type table<string, table> root -> the selection to attach ({ bufnr, line1, line2 })
M.attached = {}

--- The input buffer of a workspace (created on first use).
function M.buf(root)
  local b = M.bufs[root]
  if b and api.nvim_buf_is_valid(b) then
    return b
  end
  b = api.nvim_create_buf(false, true)
  M.bufs[root] = b
  pcall(api.nvim_buf_set_name, b, 'agentd://input/' .. root)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].swapfile = false
  vim.bo[b].filetype = 'agentd_input'
  vim.b[b].agentd_input = root
  vim.b[b].agentd_root = root
  local function map(modes, lhs, fn, desc)
    vim.keymap.set(modes, lhs, fn, { buffer = b, silent = true, desc = 'agentd: ' .. desc })
  end
  map('n', '<CR>', function()
    M.send(root)
  end, 'send the prompt')
  map({ 'n', 'i' }, '<C-s>', function()
    M.send(root)
  end, 'send the prompt')
  map('n', '<C-c>', function()
    require('agentd.client').cancel()
  end, 'cancel the turn')
  return b
end

--- The label of an attached selection: `src/app.py:10-20`.
function M.label(sel, root)
  local name = api.nvim_buf_is_valid(sel.bufnr) and api.nvim_buf_get_name(sel.bufnr) or ''
  local path = name ~= '' and util.relpath(name, root) or '[No Name]'
  if sel.line1 == sel.line2 then
    return ('%s:%d'):format(path, sel.line1)
  end
  return ('%s:%d-%d'):format(path, sel.line1, sel.line2)
end

--- The input window's winbar, fitted to `width` cells: what is attached, then the keys (left out first).
function M.winbar(root, width)
  width = width or math.huge
  local sel = M.attached[root]
  local head = sel and ('@ ' .. M.label(sel, root)) or nil
  local keys = {
    'prompt: <CR> or <C-s> sends · <C-c> cancels',
    '<CR> or <C-s> sends · <C-c> cancels',
    '<CR> sends · <C-c> cancels',
    '<CR> sends',
  }
  local text = head and util.fit(head, width) or ''
  for _, k in ipairs(keys) do
    local c = head and (head .. ' · ' .. k:gsub('^prompt: ', '')) or k
    if util.width(c) <= width then
      text = c
      break
    end
  end
  return (text:gsub('%%', '%%%%'))
end

--- The input window's 'winbar': evaluated at each redraw, for the window's width then.
M.WINBAR = "%!v:lua.require'agentd.input'.window_winbar()"

--- The winbar of the input window being drawn (`g:statusline_winid`).
function M.window_winbar()
  local w = vim.g.statusline_winid
  local root = w and api.nvim_win_is_valid(w) and vim.w[w].agentd_input_root
  return root and M.winbar(root, api.nvim_win_get_width(w)) or ''
end

--- The input window of a workspace in a tab (default: the current one).
function M.win(root, tab)
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    if vim.w[w].agentd_input_root == root and vim.b[api.nvim_win_get_buf(w)].agentd_input then
      return w
    end
  end
end

--- Redraws the winbar of the workspace's input windows.
function M.render(root)
  for _, w in ipairs(api.nvim_list_wins()) do
    if vim.w[w].agentd_input_root == root then
      pcall(api.nvim__redraw, { win = w, winbar = true })
    end
  end
end

--- Opens the input area below the chat window `chat_win` (a split in the chat's column, or a float under
--- a floating chat), without moving the cursor. Returns the window, or nil when `input.height` is 0.
function M.open(root, chat_win)
  local height = (config.options.input or {}).height or 4
  if height <= 0 or not api.nvim_win_is_valid(chat_win) then
    return nil
  end
  local w = M.win(root)
  if w then
    return w
  end
  local b = M.buf(root)
  local cfg = api.nvim_win_get_config(chat_win)
  if cfg.relative ~= '' then
    local ch = api.nvim_win_get_height(chat_win)
    local shrink = math.min(height + 2, math.max(0, ch - 3))
    api.nvim_win_set_config(chat_win, { height = ch - shrink })
    local pos = api.nvim_win_get_position(chat_win)
    w = api.nvim_open_win(b, false, {
      relative = 'editor',
      row = pos[1] + ch - shrink + 1,
      col = pos[2] - 1,
      width = api.nvim_win_get_width(chat_win),
      height = height,
      border = 'rounded',
    })
  else
    api.nvim_win_call(chat_win, function()
      vim.cmd('belowright ' .. height .. 'split')
      w = api.nvim_get_current_win()
    end)
    api.nvim_win_set_buf(w, b)
    api.nvim_win_set_height(w, height)
  end
  vim.w[w].agentd_input_root = root
  local wo = vim.wo[w]
  wo.winfixheight = true
  wo.wrap = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = 'no'
  wo.foldcolumn = '0'
  wo.statusline = ' agentd prompt'
  wo.winbar = M.WINBAR
  return w
end

--- Puts the cursor in the workspace's input area (in Insert mode when `insert`).
function M.focus(root, insert)
  local w = M.win(root)
  if not w then
    return false
  end
  api.nvim_set_current_win(w)
  if insert then
    vim.cmd('startinsert!')
  end
  return true
end

--- Attaches a selection to the next prompt sent from the input area.
function M.attach(root, sel)
  M.attached[root] = sel
  M.render(root)
end

--- Sends the input area's text as a prompt (with the attached selection). The text is cleared once the
--- prompt went out; while a turn runs it stays, and the plugin says to wait or cancel.
function M.send(root)
  local b = M.buf(root)
  local lines = api.nvim_buf_get_lines(b, 0, -1, false)
  local text = vim.trim(table.concat(lines, '\n'))
  if text == '' then
    return
  end
  local sel = M.attached[root]
  require('agentd.client').prompt(text, sel, function()
    if api.nvim_buf_is_valid(b) and vim.deep_equal(api.nvim_buf_get_lines(b, 0, -1, false), lines) then
      api.nvim_buf_set_lines(b, 0, -1, false, {})
    end
    if M.attached[root] == sel then
      M.attached[root] = nil
    end
    M.render(root)
  end, root)
  if api.nvim_get_mode().mode:sub(1, 1) == 'i' then
    vim.cmd('stopinsert')
  end
end

return M
