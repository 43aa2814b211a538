-- Commands issued back to back, before the session is resolved (no waiting between them); then the end
-- of AGENTD_TURNS turns and of every request. Reports events, the plugin's messages, the sessions the
-- plugin holds, and the chat and plan windows. Env: AGENTD_FILE, AGENTD_CMDS (JSON list of Ex commands),
-- AGENTD_TURNS, AGENTD_AUTO_RESUME (JSON bool, default true), AGENTD_AFTER (JSON list of Ex commands run
-- after that, each waiting for one vim.ui.select), AGENTD_THEN (JSON list of Ex commands run last, each
-- waiting for one message).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin({ auto_resume = L.env_json('AGENTD_AUTO_RESUME', true) })
  L.record_select()
  L.record_events()
  out.messages = {}
  vim.notify = function(msg)
    table.insert(out.messages, msg)
  end
  local ws = assert(os.getenv('AGENTD_WS'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. assert(os.getenv('AGENTD_FILE'))))
  for _, cmd in ipairs(L.env_json('AGENTD_CMDS')) do
    vim.cmd(cmd)
  end
  local client = require('agentd.client')
  local turns = tonumber(os.getenv('AGENTD_TURNS') or '0')
  L.wait(30000, function()
    local c = L.client()
    return #L.events('AgentdTurnEnd') >= turns
      and next(client.resolving) == nil
      and (c == nil or next(c.requests) == nil)
  end, 'turns and requests done')
  for _, cmd in ipairs(L.env_json('AGENTD_AFTER', {})) do
    local n = #out.selects
    vim.cmd(cmd)
    L.wait(10000, function()
      return #out.selects > n
    end, 'a selection after ' .. cmd)
  end
  for _, cmd in ipairs(L.env_json('AGENTD_THEN', {})) do
    local n = #out.messages
    vim.cmd(cmd)
    L.wait(10000, function()
      return #out.messages > n
    end, 'a message after ' .. cmd)
  end
  out.sessions = vim.tbl_count(client.sessions)
  out.started = L.client() ~= nil
  out.chat = L.window_state('agentd://chat/')
  out.plan = L.window_state('agentd://plan/')
  out.data_sessions = #vim.fn.glob(assert(os.getenv('AGENTD_DATA_DIR')) .. '/**/sess_*', true, true) > 0
  if L.client() then
    L.stop_all()
  end
end)
