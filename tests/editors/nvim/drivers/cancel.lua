-- :AgentdCancel twice: while an approval is on screen (the recorder holds it), and while an approved
-- command runs; then a third prompt in the same session. Env: AGENTD_FILE, AGENTD_PROMPTS (JSON list of
-- three prompts), AGENTD_RUNNING_TOOL (the toolCallId of the command of turn 2).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

local function now_ms()
  return vim.uv.hrtime() / 1e6
end

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  local ws = assert(os.getenv('AGENTD_WS'))
  local prompts = L.env_json('AGENTD_PROMPTS')
  local running = assert(os.getenv('AGENTD_RUNNING_TOOL'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. assert(os.getenv('AGENTD_FILE'))))
  local client = require('agentd.client')

  -- 1. cancel while the approval is on screen
  vim.cmd('Agentd ' .. prompts[1])
  L.wait(20000, function()
    return #out.selects == 1
  end, 'approval shown')
  out.approval_windows_before = #L.windows('agentd://approval/')
  out.state_before = client.active_session().state
  local t0 = now_ms()
  vim.cmd('AgentdCancel')
  out.turn1 = L.wait_turn(1)
  out.cancel1_ms = math.floor(now_ms() - t0)
  out.approval_windows_after = #L.windows('agentd://approval/')
  out.state_after = client.active_session().state

  -- 2. cancel while the approved command runs
  vim.cmd('Agentd ' .. prompts[2])
  L.wait(20000, function()
    local s = client.active_session()
    local t = s and s.chat.tools[running]
    return t ~= nil and t.status == 'in_progress'
  end, 'command running')
  t0 = now_ms()
  vim.cmd('AgentdCancel')
  out.turn2 = L.wait_turn(2)
  out.cancel2_ms = math.floor(now_ms() - t0)

  -- 3. the session carries on
  vim.cmd('Agentd ' .. prompts[3])
  out.turn3 = L.wait_turn(3)
  out.chat = L.window_state('agentd://chat/')
  L.stop_all()
end)
