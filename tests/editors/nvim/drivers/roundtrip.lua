-- The round trip with the plugin: vim.lsp.enable('agentd') starts the daemon for the opened file,
-- `:Agentd {prompt}` runs a turn, plans land in the plan window, the approval is answered through
-- vim.ui.select (recorder), the open file changes in its buffer. Env: AGENTD_PROMPT, AGENTD_FILE.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  vim.cmd('filetype on')
  vim.lsp.enable('agentd')
  local ws = assert(os.getenv('AGENTD_WS'))
  local file = assert(os.getenv('AGENTD_FILE'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/' .. file))
  local b = vim.api.nvim_get_current_buf()
  L.wait(20000, function()
    local c = L.client()
    return c ~= nil and c.initialized == true
  end, 'agentd initialized')
  out.started_by_enable = true
  out.attached = #vim.lsp.get_clients({ bufnr = b, name = 'agentd' }) == 1
  local seq_before = vim.fn.undotree(b).seq_last

  vim.cmd('Agentd ' .. assert(os.getenv('AGENTD_PROMPT')))
  out.turn = L.wait_turn(1)

  out.chat = L.window_state('agentd://chat/')
  out.plan = L.window_state('agentd://plan/')
  out.layout = L.layout()
  out.buffer = L.lines_of(b)
  out.modified = vim.bo[b].modified
  out.disk = vim.fn.readfile(ws .. '/' .. file)
  out.undo_entries = vim.fn.undotree(b).seq_last - seq_before
  vim.api.nvim_buf_call(b, function()
    vim.cmd('silent undo')
  end)
  out.after_undo = L.lines_of(b)
  vim.api.nvim_buf_call(b, function()
    vim.cmd('silent redo')
  end)
  out.after_redo = L.lines_of(b)
  local s = require('agentd.client').active_session()
  out.session = s.id
  out.tools = {}
  for _, blk in ipairs(s.chat.blocks) do
    if blk.kind == 'tool' then
      local meta = blk.meta or {}
      table.insert(out.tools, {
        id = blk.id,
        status = blk.status,
        rawOutput = blk.rawOutput or vim.NIL,
        decision = meta.decision or vim.NIL,
        decidedBy = meta.decidedBy or vim.NIL,
        optionId = meta.optionId or vim.NIL,
      })
    end
  end
  out.statusline = require('agentd').statusline()
  L.stop_all()
end)
