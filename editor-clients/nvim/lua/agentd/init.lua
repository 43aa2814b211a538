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
---   input = { height = 4 },             -- the input area below the chat (0: none)
---   approval = { ui = 'diff' },         -- 'diff' window with keys, or 'select' (vim.ui.select)
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

--- Opens the chat with the cursor in its input area; `sel` = { bufnr, line1, line2 } is attached to the
--- next prompt sent from there. Without an input area (`input.height = 0`), asks with vim.ui.input.
function M.ask(sel)
  local client = require('agentd.client')
  local input = require('agentd.input')
  local root = client.root_for(0)
  if sel then
    input.attach(root, sel)
  end
  if ((require('agentd.config').options.input or {}).height or 4) <= 0 then
    return vim.ui.input({ prompt = 'agentd> ' }, function(text)
      if text and vim.trim(text) ~= '' then
        M.prompt(text, sel)
      end
    end)
  end
  local s = client.active_session(root)
  if s then
    return M.open_chat(s)
  end
  client.with_session(function(s2)
    M.open_chat(s2)
  end)
end

--- Shows the chat of `s` with the cursor in the input area; a plan that went away with the chat comes
--- back with it.
function M.open_chat(s)
  local chat = require('agentd.chat')
  local plan = require('agentd.plan')
  chat.open(s, { focus = true })
  if plan.hidden_with_chat[s.root] then
    plan.hidden_with_chat[s.root] = nil
    if s.plan then
      plan.show(s, { force = true })
    end
  end
end

function M.restart()
  require('agentd.client').restart()
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

--- Opens the chat of the active session (the cursor in its input area), or closes the chat's column (the
--- chat, its input area and a plan window above it).
function M.toggle_chat()
  local client = require('agentd.client')
  local chat = require('agentd.chat')
  local root = client.root_for(0)
  local s = client.active_session(root)
  if chat.close(s or { root = root }) then
    return
  end
  if s then
    M.open_chat(s)
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
