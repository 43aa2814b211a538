-- Two workspaces in two tabs. `:Agentd` in tab 1 (ws1), then at once `:tabnew` a file of ws2: the chat
-- and plan of ws1 must not open in tab 2; a prompt in tab 2 gets ws2's own windows; going back to tab 1
-- opens ws1's windows there. Env: AGENTD_WS1, AGENTD_WS2 (each with a file a.txt), AGENTD_PROMPTS.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

local function tab_state(tab)
  local names, plan, chat = {}, vim.NIL, vim.NIL
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(tab)) do
    local b = vim.api.nvim_win_get_buf(w)
    local name = vim.api.nvim_buf_get_name(b)
    local short = name:gsub('^agentd://(%a+)/.*$', 'agentd://%1')
    names[#names + 1] = short
    if short == 'agentd://plan' then
      plan = L.lines_of(b)
    elseif short == 'agentd://chat' then
      chat = L.lines_of(b)
    end
  end
  return { layout = names, plan = plan, chat = chat }
end

L.run(function()
  L.load_plugin()
  L.record_events()
  local ws1, ws2 = assert(os.getenv('AGENTD_WS1')), assert(os.getenv('AGENTD_WS2'))
  local prompts = L.env_json('AGENTD_PROMPTS')
  vim.cmd.edit(vim.fn.fnameescape(ws1 .. '/a.txt'))
  local tab1 = vim.api.nvim_get_current_tabpage()
  vim.cmd('Agentd ' .. prompts[1])
  vim.cmd('tabnew ' .. vim.fn.fnameescape(ws2 .. '/a.txt'))
  local tab2 = vim.api.nvim_get_current_tabpage()
  L.wait_turn(1)
  out.after_turn1 = { tab1 = tab_state(tab1), tab2 = tab_state(tab2) }
  vim.cmd('Agentd ' .. prompts[2])
  L.wait_turn(2)
  out.after_turn2 = { tab1 = tab_state(tab1), tab2 = tab_state(tab2) }
  vim.api.nvim_set_current_tabpage(tab1)
  L.wait(5000, function()
    return #L.windows('agentd://plan/') == 1 and #L.windows('agentd://chat/') == 1
  end, 'ws1 windows opened in tab 1')
  out.back_in_tab1 = { tab1 = tab_state(tab1), tab2 = tab_state(tab2) }
  L.stop_all()
end)
