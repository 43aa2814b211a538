-- A daemon started as `agentd --resume ID` announces the session in its initialize result
-- (experimental.agentd.resume); the plugin loads it right away, with no command. Env: AGENTD_FILE.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  L.record_events()
  vim.cmd('filetype on')
  vim.lsp.enable('agentd')
  local ws = assert(os.getenv('AGENTD_WS'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. assert(os.getenv('AGENTD_FILE'))))
  L.wait(20000, function()
    return #L.events('AgentdSession') >= 1
  end, 'announced session loaded')
  out.announced = L.client().server_capabilities.experimental.agentd.resume
  out.session = require('agentd.client').active_session().id
  out.plan = L.window_state('agentd://plan/')
  out.chat_lines = #L.window_state('agentd://chat/').lines
  L.stop_all()
end)
