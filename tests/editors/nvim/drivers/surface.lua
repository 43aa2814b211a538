-- The plugin's surface without a daemon: user commands, `:help` tags, keymaps, the resolved
-- vim.lsp.config('agentd') and setup() options reaching it. Env: AGENTD_DOC (a writable copy of doc/).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  local doc = assert(os.getenv('AGENTD_DOC'))
  vim.opt.rtp:prepend(vim.fs.dirname(doc))
  vim.opt.rtp:prepend(assert(os.getenv('AGENTD_PLUGIN')))
  vim.cmd.runtime('plugin/agentd.lua')
  vim.cmd('helptags ' .. vim.fn.fnameescape(doc))

  local cmds = {}
  for name, c in pairs(vim.api.nvim_get_commands({})) do
    if vim.startswith(name, 'Agentd') then
      cmds[name] = { nargs = c.nargs, range = c.range ~= nil and c.range ~= '' }
    end
  end
  out.commands = cmds

  out.help = {}
  for _, tag in ipairs(L.env_json('AGENTD_TAGS')) do
    local ok = pcall(vim.cmd.help, tag)
    out.help[tag] = ok and vim.bo.buftype == 'help' and vim.fn.expand('%:t') == 'agentd.txt'
    if ok then
      vim.cmd('helpclose')
    end
  end

  local cfg = vim.lsp.config.agentd
  out.default_config = {
    cmd = cfg.cmd,
    root_markers = cfg.root_markers,
    capabilities = cfg.capabilities,
    init_options = vim.tbl_isempty(cfg.init_options) and vim.NIL or cfg.init_options,
    handlers = vim.tbl_keys(cfg.handlers),
  }
  table.sort(out.default_config.handlers)

  require('agentd').setup({
    cmd = { 'my-agentd', '--stdio' },
    init_options = { provider = 'openai', model = 'qwen2.5-coder' },
    data_dir = '/tmp/agentd-data',
    keymaps = { todos = '<leader>T', chat = false },
  })
  cfg = vim.lsp.config.agentd
  out.configured = { cmd = cfg.cmd, init_options = cfg.init_options, cmd_env = cfg.cmd_env }
  vim.lsp.config('agentd', { cmd = { 'override' } })
  out.override_wins = vim.lsp.config.agentd.cmd

  out.keymaps = {}
  for _, lhs in ipairs({ '<leader>aa', '<leader>an', '<leader>as', '<leader>ac', '<leader>T', '<leader>ao' }) do
    local m = vim.fn.maparg(lhs, 'n', false, true)
    out.keymaps[lhs] = m.desc or vim.NIL
  end
  out.visual_prompt = vim.fn.maparg('<leader>aa', 'x', false, true).desc or vim.NIL
end)
