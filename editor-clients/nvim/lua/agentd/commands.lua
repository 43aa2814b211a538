--- The user commands (`:help agentd-commands`) and the buffer-attach autocmd. Created by
--- plugin/agentd.lua and by setup() (so adding the plugin to 'runtimepath' late, then setup(), works).
local M = {}

local function agentd()
  return require('agentd')
end

function M.create()
  -- File buffers opened after the daemon started are attached to it, so agentd sees unsaved text and
  -- edits open files through workspace/applyEdit (also when a command started it, not vim.lsp.enable).
  vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
    group = vim.api.nvim_create_augroup('agentd.attach', { clear = true }),
    callback = function(args)
      if package.loaded['agentd.client'] then
        require('agentd.client').on_buf(args.buf)
      end
    end,
  })
  local cmd = vim.api.nvim_create_user_command
  cmd('Agentd', function(a)
    local sel = nil
    if a.range > 0 then
      sel = { bufnr = vim.api.nvim_get_current_buf(), line1 = a.line1, line2 = a.line2 }
    end
    if vim.trim(a.args) == '' then
      return agentd().ask(sel) -- the input area, with the range attached
    end
    agentd().prompt(a.args, sel)
  end, { nargs = '*', range = true, desc = 'agentd: send a prompt (with a range: the selected lines too)' })
  cmd('AgentdNew', function()
    agentd().new()
  end, { nargs = 0, desc = 'agentd: start a new session in this workspace' })
  cmd('AgentdSessions', function()
    agentd().sessions()
  end, { nargs = 0, desc = "agentd: pick one of this workspace's sessions and resume it" })
  cmd('AgentdCancel', function()
    agentd().cancel()
  end, { nargs = 0, desc = 'agentd: cancel the running turn' })
  cmd('AgentdTodos', function()
    agentd().todos()
  end, { nargs = 0, desc = 'agentd: show the current plan' })
  cmd('AgentdChat', function()
    agentd().toggle_chat()
  end, { nargs = 0, desc = 'agentd: open or close the chat window' })
  cmd('AgentdRestart', function()
    agentd().restart()
  end, { nargs = 0, desc = 'agentd: restart the daemon and reload the session' })
  cmd('AgentdStatus', function()
    agentd().status()
  end, { nargs = 0, desc = 'agentd: token use, cost and state of the session' })
  cmd('AgentdRewind', function(a)
    require('agentd.checkpoints').rewind(a.args)
  end, {
    nargs = '*',
    desc = 'agentd: files and/or conversation back to before a prompt (a picker without arguments)',
    complete = function(_, line)
      return select(2, line:gsub('%S+', '')) >= 2 and { 'both', 'files', 'conversation' } or {}
    end,
  })
  cmd('AgentdFork', function(a)
    require('agentd.checkpoints').fork(a.args)
  end, { nargs = '?', desc = 'agentd: a new session with the history before prompt N (default: all of it)' })
  cmd('AgentdMode', function(a)
    agentd().set_mode(a.args)
  end, {
    nargs = 1,
    desc = 'agentd: set the permission mode (default, acceptEdits, readOnly, auto)',
    complete = function()
      return { 'default', 'acceptEdits', 'readOnly', 'auto' }
    end,
  })
end

return M
