-- A long streamed answer rendered into the chat buffer (no daemon): after every chunk a render. Reports
-- how many lines the renders wrote in total (linear: only the changed tail), whether the buffer equals a
-- from-scratch rendering of the same updates, and how many redraws render_soon coalesces a burst into.
-- Env: AGENTD_CHUNKS (number of chunks).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

L.run(function()
  L.load_plugin()
  local client = require('agentd.client')
  local chat = require('agentd.chat')
  local n = tonumber(assert(os.getenv('AGENTD_CHUNKS')))
  local root = vim.fs.normalize(vim.fn.getcwd())
  local updates = {
    { sessionUpdate = 'user_message_chunk', messageId = 'u1', content = { type = 'text', text = 'go' } },
    { sessionUpdate = 'agent_thought_chunk', messageId = 't1', content = { type = 'text', text = 'hm' } },
    { sessionUpdate = 'agent_thought_chunk', messageId = 't1', content = { type = 'text', text = 'm\nok' } },
    { sessionUpdate = 'tool_call', toolCallId = 'c1', title = 'Read a', status = 'pending' },
  }
  for i = 1, n do
    -- a chunk may end mid-line or carry several lines
    local text = i % 3 == 0 and ('word %d\nline %d\n'):format(i, i) or ('word %d '):format(i)
    updates[#updates + 1] =
      { sessionUpdate = 'agent_message_chunk', messageId = 'm1', content = { type = 'text', text = text } }
    if i == math.floor(n / 2) then
      updates[#updates + 1] = { sessionUpdate = 'tool_call_update', toolCallId = 'c1', status = 'completed' }
    end
  end
  updates[#updates + 1] =
    { sessionUpdate = 'user_message_chunk', messageId = 'u2', content = { type = 'text', text = 'next' } }
  updates[#updates + 1] =
    { sessionUpdate = 'agent_message_chunk', messageId = 'm2', content = { type = 'text', text = 'dropped' } }
  updates[#updates + 1] = {
    sessionUpdate = 'agent_message_chunk',
    messageId = 'm3',
    content = { type = 'text', text = 'retried' },
    _meta = { agentd = { retracts = 'm2' } },
  }

  local function feed(s, u)
    if u.sessionUpdate == 'tool_call' or u.sessionUpdate == 'tool_call_update' then
      chat.tool(s, u)
    else
      chat.chunk(s, u)
    end
  end

  local s = client.session('sess_stream', nil, root)
  chat.open(s)
  local b = s.chat_buf
  local written, calls = 0, 0
  local set_lines = vim.api.nvim_buf_set_lines
  vim.api.nvim_buf_set_lines = function(buf, a, z, strict, lines)
    if buf == b then
      written = written + #lines
      calls = calls + 1
    end
    return set_lines(buf, a, z, strict, lines)
  end
  for _, u in ipairs(updates) do
    feed(s, u)
    chat.render(s)
  end
  out.written = written
  out.buffer_lines = vim.api.nvim_buf_line_count(b)

  local fresh = { chat = chat.new_model() }
  for _, u in ipairs(updates) do
    feed(fresh, u)
  end
  local want = chat.lines(fresh)
  out.matches = vim.deep_equal(L.lines_of(b), want)
  out.tail = vim.list_slice(L.lines_of(b), #want - 3)

  -- a burst of chunks: one redraw
  calls = 0
  for i = 1, 50 do
    feed(s, { sessionUpdate = 'agent_message_chunk', messageId = 'm3', content = { type = 'text', text = ' ' .. i } })
    chat.render_soon(s)
  end
  L.wait(5000, function()
    return not s.chat.render_pending
  end, 'coalesced redraw')
  out.burst_redraws = calls
  out.burst_matches = vim.deep_equal(L.lines_of(b), chat.lines(s))
  vim.api.nvim_buf_set_lines = set_lines
end)
