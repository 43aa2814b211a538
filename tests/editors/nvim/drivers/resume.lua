-- A new Neovim resumes a session: `:AgentdSessions` (the recorder picks one) starts the daemon with the
-- plugin's own start, agentd/session/load replays the history into the chat and the last plan into the
-- plan window; `:AgentdTodos` then fetches the same plan on demand. Env: AGENTD_FILE.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  local ws = assert(os.getenv('AGENTD_WS'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. assert(os.getenv('AGENTD_FILE'))))

  vim.cmd('AgentdSessions')
  L.wait(20000, function()
    return #L.events('AgentdSession') >= 1
  end, 'session loaded')
  out.chat = L.window_state('agentd://chat/')
  out.plan = L.window_state('agentd://plan/')
  out.layout = L.layout()
  out.session = require('agentd.client').active_session().id

  local fetched = false
  require('agentd.client').todos(function()
    fetched = true
  end)
  L.wait(10000, function()
    return fetched
  end, 'todos')
  out.plan_after_todos = L.window_state('agentd://plan/')
  L.stop_all()
end)
