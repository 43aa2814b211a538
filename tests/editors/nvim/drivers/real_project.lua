-- The whole job on a real project, then a crash: one turn (plan, read, an approved edit of the open
-- source file, the package's tests run by an approved command, plan done); `kill -9` of the daemon (pid
-- from the session's lock file); the next `:Agentd` restarts it, reloads the session and continues.
-- Env: AGENTD_FILE (the source file to open), AGENTD_PROMPTS (two prompts).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  local ws = assert(os.getenv('AGENTD_WS'))
  local file = assert(os.getenv('AGENTD_FILE'))
  local prompts = L.env_json('AGENTD_PROMPTS')
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. file))
  local b = vim.api.nvim_get_current_buf()
  local client = require('agentd.client')

  vim.cmd('Agentd ' .. prompts[1])
  out.turn1 = L.wait_turn(1, 50000)
  out.plan1 = L.window_state('agentd://plan/')
  out.chat1 = L.window_state('agentd://chat/')
  out.buffer_matches_disk = table.concat(L.lines_of(b), '\n') .. '\n'
    == table.concat(vim.fn.readfile(ws .. '/' .. file), '\n') .. '\n'
  out.modified = vim.bo[b].modified
  local s = client.active_session()
  out.session = s.id

  -- kill -9 the daemon that holds the session
  local lock = vim.json.decode(
    table.concat(vim.fn.readfile(os.getenv('AGENTD_DATA_DIR') .. '/sessions/' .. s.id .. '/lock'), '\n')
  )
  local old_client = L.client()
  out.lock_pid_is_daemon = vim.fn.getpid() ~= lock.pid and type(lock.pid) == 'number'
  vim.uv.kill(lock.pid, 'sigkill')
  L.wait(10000, function()
    return #L.events('AgentdExit') >= 1
  end, 'daemon exit seen')
  out.old_client_stopped = old_client:is_stopped()
  out.chat_after_kill = L.window_state('agentd://chat/')
  local plans_before = #out.plans

  -- the next prompt restarts the daemon, reloads the session (replay) and continues
  vim.cmd('Agentd ' .. prompts[2])
  out.turn2 = L.wait_turn(2, 50000)
  out.replayed_plans = #out.plans - plans_before
  out.plan2 = L.window_state('agentd://plan/')
  out.chat2 = L.window_state('agentd://chat/')
  out.session2 = client.active_session().id
  out.new_client = L.client() ~= nil and L.client().id ~= old_client.id
  L.stop_all()
end)
