--- agentd for Neovim (>= 0.11): a chat buffer, a live plan window and approvals for the agentd
--- coding-agent daemon, which Neovim runs as an LSP server. See `:help agentd`.
---
--- ```lua
--- require('agentd').setup({
---   cmd = { 'agentd' },                 -- how to start the daemon
---   init_options = { provider = 'anthropic', model = 'claude-sonnet-4-6' },
---   data_dir = nil,                     -- AGENTD_DATA_DIR for the daemon
---   autostart = false,                  -- true: vim.lsp.enable('agentd')
---   auto_resume = true,                 -- first prompt loads the workspace's newest session
---   keymaps = false,                    -- true: <leader>aa, <leader>an, ... (:help agentd-keymaps)
---   chat = { position = 'right', size = 0.4 },
---   plan = { position = 'chat', auto_open = true, max_height = 12 },
--- })
--- ```
local config = require('agentd.config')

local M = {}

--- Applies options. The daemon's command, environment and initializationOptions become the defaults
--- of `lsp/agentd.lua` (so `vim.lsp.enable('agentd')` uses them too); `vim.lsp.config('agentd', {...})`
--- still overrides them.
---@param opts agentd.Options?
function M.setup(opts)
  local o = config.set(opts)
  -- lsp/agentd.lua reads these options when the config is resolved; this drops a resolved copy.
  vim.lsp.config('agentd', {})
  require('agentd.commands').create()
  M.keymaps(o.keymaps)
  if o.autostart then
    vim.lsp.enable('agentd')
  end
  return o
end

--- Default mappings (only when `keymaps` is true or a table).
function M.keymaps(spec)
  if not spec then
    return
  end
  local lhs = vim.tbl_extend('force', config.default_keymaps, type(spec) == 'table' and spec or {})
  local map = function(mode, key, rhs, desc)
    if key then
      vim.keymap.set(mode, key, rhs, { desc = desc, silent = true })
    end
  end
  map('n', lhs.prompt, function()
    M.ask()
  end, 'agentd: prompt')
  map('x', lhs.prompt, function()
    local l1, l2 = vim.fn.line('v'), vim.fn.line('.')
    if l1 > l2 then
      l1, l2 = l2, l1
    end
    vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'nx', false)
    M.ask({ bufnr = vim.api.nvim_get_current_buf(), line1 = l1, line2 = l2 })
  end, 'agentd: prompt about the selection')
  map('n', lhs.new, M.new, 'agentd: new session')
  map('n', lhs.sessions, M.sessions, 'agentd: resume a session')
  map('n', lhs.cancel, M.cancel, 'agentd: cancel the turn')
  map('n', lhs.todos, M.todos, 'agentd: show the plan')
  map('n', lhs.chat, M.toggle_chat, 'agentd: toggle the chat window')
end

--- Sends a prompt to the workspace's active session. `sel` = { bufnr, line1, line2 } adds those lines.
function M.prompt(text, sel)
  require('agentd.client').prompt(text, sel)
end

--- Asks for a prompt with vim.ui.input, then sends it.
function M.ask(sel)
  vim.ui.input({ prompt = 'agentd> ' }, function(text)
    if text and vim.trim(text) ~= '' then
      M.prompt(text, sel)
    end
  end)
end

function M.new()
  require('agentd.client').new_session()
end

function M.sessions()
  require('agentd.client').pick_session()
end

function M.cancel()
  require('agentd.client').cancel()
end

function M.todos()
  require('agentd.client').todos()
end

function M.status()
  require('agentd.client').status()
end

function M.set_mode(mode)
  require('agentd.client').set_mode(mode)
end

--- Opens the chat of the active session, or closes its window.
function M.toggle_chat()
  local client = require('agentd.client')
  local chat = require('agentd.chat')
  local w = chat.win(nil)
  if w then
    return vim.api.nvim_win_close(w, false)
  end
  local s = client.active_session()
  if s then
    chat.open(s)
  else
    client.notify('no session in this workspace yet; :Agentd {prompt} starts one')
  end
end

--- A short status for a statusline: `agentd: Running: Read README.md` (empty without a session).
function M.statusline()
  local s = require('agentd.client').active_session()
  if not s then
    return ''
  end
  if s.state == 'idle' then
    return 'agentd: ' .. (s.stop_reason or 'idle')
  end
  return 'agentd: ' .. (s.status or s.state)
end

return M
