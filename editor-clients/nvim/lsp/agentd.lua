---@brief
---
--- agentd: an editor-integrated coding-agent daemon spoken to over LSP framing (see `:help agentd`).
---
--- ```lua
--- vim.lsp.enable('agentd')                      -- start with the first file buffer
--- vim.lsp.config('agentd', {                    -- optional overrides
---   cmd = { 'python3', '-m', 'agentd' },
---   init_options = { provider = 'anthropic', model = 'claude-sonnet-4-6' },
--- })
--- ```
---
--- `cmd`, `cmd_env` and `init_options` default to the options of `require('agentd').setup()`.
--- The handlers below route agentd's notifications and requests to the plugin (`lua/agentd/`).
--- If you replace `before_init`, `on_init` or `on_exit`, call `require('agentd.log').watch(config.cmd)`,
--- `require('agentd.client').on_init(client, result)` and `require('agentd.client').on_exit(code, signal,
--- client_id)` from yours.

local methods = require('agentd.protocol').methods

-- require('agentd').setup() options: cmd, init_options, data_dir, env (vim.lsp.config overrides win).
local opts = require('agentd.config').options
local env = vim.deepcopy(opts.env or {})
if opts.data_dir then
  env.AGENTD_DATA_DIR = vim.fs.normalize(opts.data_dir)
end

local function client()
  return require('agentd.client')
end

---@type vim.lsp.Config
return {
  cmd = opts.cmd or { 'agentd' },
  cmd_env = next(env) and env or nil,
  -- No filetypes: agentd works on the whole workspace, and tracks every open file buffer (PROTOCOL.md §8).
  root_markers = { '.agentd', '.git', '.hg', '.jj' },
  -- The nearest root marker above the file, else the current directory; no daemon for unnamed buffers.
  root_dir = function(bufnr, on_dir)
    if vim.api.nvim_buf_get_name(bufnr) ~= '' then
      on_dir(client().root_for(bufnr))
    end
  end,
  -- documentChanges: agentd sends each edit with the buffer version it was computed from, and the
  -- workspace/applyEdit handler refuses it if the user typed since (PROTOCOL.md §8.2).
  capabilities = {
    workspace = { workspaceEdit = { documentChanges = true } },
    experimental = {
      agentd = { protocolVersion = 1, requestPermission = true, saveAfterApply = true },
    },
  },
  -- Every change is sent at once, so the version agentd tracks is the buffer's (PROTOCOL.md §8.2).
  flags = { debounce_text_changes = 0 },
  init_options = opts.init_options or {},
  handlers = {
    [methods.session_update] = function(...)
      return client().on_update(...)
    end,
    [methods.session_request_permission] = function(...)
      return require('agentd.approval').handle(...)
    end,
    ['workspace/applyEdit'] = function(...)
      return client().on_apply_edit(...)
    end,
    ['$/progress'] = function(...)
      return client().on_progress(...)
    end,
  },
  -- agentd's stderr goes to lsp.log by level, not all as [ERROR] (lua/agentd/log.lua)
  before_init = function(_, config)
    require('agentd.log').watch(config.cmd)
  end,
  on_init = function(c, result)
    client().on_init(c, result)
  end,
  on_exit = function(code, signal, client_id)
    client().on_exit(code, signal, client_id)
  end,
}
