--- Options of the agentd plugin (`:help agentd-options`).
local M = {}

---@class agentd.Options
M.defaults = {
  --- The command that starts the daemon (string[]). nil keeps `cmd` of `lsp/agentd.lua`: { 'agentd' }.
  cmd = nil,
  --- initializationOptions sent to agentd (PROTOCOL.md §4.3), e.g. { provider = 'anthropic' }.
  init_options = nil,
  --- Data dir for sessions: sets AGENTD_DATA_DIR for the daemon. nil: agentd's default.
  data_dir = nil,
  --- Extra environment variables for the daemon.
  env = nil,
  --- Start the daemon with the first file buffer (vim.lsp.enable('agentd')). false: on the first command.
  autostart = false,
  --- When a workspace has no active session, the first prompt loads its newest unlocked session
  --- (PROTOCOL.md §6.1) instead of creating one. A session whose daemon died is always reloaded.
  auto_resume = true,
  --- Default key mappings (`:help agentd-keymaps`): false (default), true, or a table of lhs by action.
  keymaps = false,
  chat = {
    --- 'right', 'left', 'top', 'bottom' (a split at the edge of the editor) or 'float'.
    position = 'right',
    --- Fraction of the editor's width (left/right) or height (top/bottom).
    size = 0.4,
  },
  input = {
    --- Lines of the input area below the chat window (where you type prompts); 0: no input area.
    height = 4,
    --- Start Insert mode when :Agentd, :AgentdChat or `i` in the chat puts the cursor in the input area.
    start_insert = true,
  },
  approval = {
    --- 'diff': a window with the proposed change (or the command) and a key per option;
    --- 'select': vim.ui.select only (a scratch window shows the details first).
    ui = 'diff',
  },
  plan = {
    --- 'chat' (above the chat window), 'right', 'left', 'top', 'bottom' or 'float' (top-right corner).
    position = 'chat',
    --- Open the plan window when a plan arrives (not again after you closed it; :AgentdTodos reopens it).
    auto_open = true,
    --- Most lines the plan window grows to.
    max_height = 12,
  },
}

M.default_keymaps = {
  prompt = '<leader>aa',
  new = '<leader>an',
  sessions = '<leader>as',
  cancel = '<leader>ac',
  todos = '<leader>at',
  chat = '<leader>ao',
}

---@type agentd.Options
M.options = vim.deepcopy(M.defaults)

function M.set(opts)
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  return M.options
end

return M
