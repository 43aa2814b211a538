-- `:checkhealth agentd` in several setups. Env: AGENTD_HEALTH_CASES, a JSON list of
-- { name, setup = {...} (options for require('agentd').setup), env = { VAR = value|false },
--   old_nvim = bool (pretend to be Neovim 0.10) }; reports the health buffer's lines per case.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  vim.opt.rtp:prepend(assert(os.getenv('AGENTD_PLUGIN')))
  vim.cmd.runtime('plugin/agentd.lua')
  out.cases = {}
  local real_has = vim.fn.has
  for _, case in ipairs(L.env_json('AGENTD_HEALTH_CASES')) do
    require('agentd').setup(case.setup or {})
    for k, v in pairs(case.env or {}) do
      vim.env[k] = v ~= false and v or nil
    end
    if case.old_nvim then
      vim.fn.has = function(what)
        if what == 'nvim-0.11' then
          return 0
        end
        return real_has(what)
      end
    end
    vim.cmd('checkhealth agentd')
    vim.fn.has = real_has
    local b = vim.api.nvim_get_current_buf()
    out.cases[case.name] = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    if #vim.api.nvim_list_tabpages() > 1 then
      vim.cmd('tabclose')
    else
      vim.cmd('enew')
    end
    pcall(vim.api.nvim_buf_delete, b, { force = true })
  end
end)
