-- agentd for Neovim: user commands and buffer tracking. Options: require('agentd').setup({...}).
if vim.g.loaded_agentd then
  return
end
vim.g.loaded_agentd = true

if vim.fn.has('nvim-0.11') == 0 then
  vim.api.nvim_echo({ { 'agentd needs Neovim >= 0.11 (see :checkhealth agentd)', 'WarningMsg' } }, true, {})
  return
end

require('agentd.commands').create()
