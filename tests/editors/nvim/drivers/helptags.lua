-- `:help` with the plugin directory as is on 'runtimepath' (its shipped doc/tags), and `:helptags` run
-- on a copy of doc/ (AGENTD_DOC) to compare with the shipped file. Env: AGENTD_TAGS (JSON list).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  vim.opt.rtp:prepend(assert(os.getenv('AGENTD_PLUGIN')))
  out.help = {}
  for _, tag in ipairs(L.env_json('AGENTD_TAGS')) do
    local ok = pcall(vim.cmd.help, tag)
    out.help[tag] = ok and vim.bo.buftype == 'help' and vim.fn.expand('%:t') == 'agentd.txt'
    if ok then
      vim.cmd('helpclose')
    end
  end
  local doc = assert(os.getenv('AGENTD_DOC'))
  vim.cmd('helptags ' .. vim.fn.fnameescape(doc))
  out.generated = vim.fn.readfile(doc .. '/tags')
end)
