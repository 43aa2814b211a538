-- The user types while agentd's edit of the open file is in flight: the keystroke lands after agentd
-- computed the edit and before the workspace/applyEdit handler runs. The handler must refuse the edit
-- (version mismatch, PROTOCOL.md §8.2), keep the typed text, and the tool call must fail.
-- Env: AGENTD_FILE, AGENTD_PROMPT, AGENTD_TOOL (the toolCallId of the edit).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  local ws = assert(os.getenv('AGENTD_WS'))
  local file = assert(os.getenv('AGENTD_FILE'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. file))
  local b = vim.api.nvim_get_current_buf()
  local client = require('agentd.client')
  local orig = client.on_apply_edit
  out.apply_results = {}
  client.on_apply_edit = function(err, params, ctx)
    out.edit_versioned = params.edit.documentChanges ~= nil
    -- a keystroke that landed while the request was in flight
    vim.api.nvim_buf_set_lines(b, 0, 0, false, { 'typed by the user' })
    local res = orig(err, params, ctx)
    table.insert(out.apply_results, { applied = res.applied, failureReason = res.failureReason or vim.NIL })
    return res
  end
  vim.cmd('Agentd ' .. assert(os.getenv('AGENTD_PROMPT')))
  out.turn = L.wait_turn(1)
  local c = L.client()
  out.documentChanges = vim.tbl_get(c.capabilities, 'workspace', 'workspaceEdit', 'documentChanges') or vim.NIL
  out.debounce = c.flags.debounce_text_changes or vim.NIL
  local t = client.active_session().chat.tools[assert(os.getenv('AGENTD_TOOL'))]
  out.tool_status = t and t.status or vim.NIL
  out.buffer = L.lines_of(b)
  out.disk = vim.fn.readfile(ws .. '/' .. file)
  L.stop_all()
end)
