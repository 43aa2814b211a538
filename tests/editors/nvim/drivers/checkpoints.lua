-- :AgentdRewind and :AgentdFork end to end: two turns change files through run_command, the user changes
-- a file, the rewind (picker: prompt 2, files and conversation, keep my changes) restores the rest and
-- reloads the chat; the fork at the end is loaded and takes a prompt of its own. Env: AGENTD_WS.
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

local function disk(ws)
  local function read(name)
    local p = ws .. '/' .. name
    return vim.fn.filereadable(p) == 1 and table.concat(vim.fn.readfile(p, 'b'), '\n') or vim.NIL
  end
  return { a = read('a.txt'), made = read('made.txt'), keep = read('keep.txt') }
end

local function chat_lines()
  local st = L.window_state('agentd://chat/')
  return st ~= vim.NIL and st.lines or vim.NIL
end

L.run(function()
  L.load_plugin()
  L.record_select()
  L.record_events()
  vim.cmd('filetype on')
  vim.lsp.enable('agentd')
  local ws = assert(os.getenv('AGENTD_WS'))
  vim.cmd.cd(ws)
  vim.cmd.edit(vim.fn.fnameescape(ws .. '/a.txt'))
  L.wait(20000, function()
    local c = L.client()
    return c ~= nil and c.initialized == true
  end, 'agentd initialized')
  out.commands = {
    rewind = vim.fn.exists(':AgentdRewind') == 2,
    fork = vim.fn.exists(':AgentdFork') == 2,
  }

  vim.cmd('Agentd first')
  L.wait_turn(1)
  vim.cmd('Agentd second')
  L.wait_turn(2)
  local s = require('agentd.client').active_session()
  out.session = s.id
  out.before_rewind = disk(ws)
  vim.fn.writefile({ 'the user was here' }, ws .. '/keep.txt') -- between turns: the user's change

  local rewound
  require('agentd.checkpoints').rewind('', function(res)
    rewound = res
  end)
  L.wait(20000, function()
    return rewound ~= nil
  end, 'rewind')
  out.rewind = rewound
  out.after_rewind = disk(ws)
  out.chat_after_rewind = chat_lines()

  local forked
  require('agentd.checkpoints').fork('', function(fs, res)
    forked = { session = fs.id, result = res }
  end)
  L.wait(20000, function()
    return forked ~= nil
  end, 'fork')
  out.fork = forked
  out.active_after_fork = require('agentd.client').active_session().id
  vim.cmd('Agentd third')
  L.wait_turn(3)
  out.chat_fork = chat_lines()
  L.stop_all()
end)
