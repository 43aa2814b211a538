--- The chat buffer of a session: your prompts, the streamed answer, one line per tool call, and the turn's
--- progress in the window's winbar (PROTOCOL.md §7, §10.1).
local config = require('agentd.config')

local M = {}

local api = vim.api

M.icons = { pending = '·', in_progress = '▸', completed = '✓', failed = '✗' }

--- A new, empty chat model.
function M.new_model()
  return { blocks = {}, tools = {} }
end

--- Forgets what the chat shows (before a load replays the session).
function M.reset(s)
  s.chat = M.new_model()
end

local function text_of(content)
  if type(content) ~= 'table' then
    return ''
  end
  if content.type == 'text' then
    return content.text or ''
  elseif content.type == 'resource_link' then
    return ('[%s]'):format(content.name or content.uri or 'link')
  elseif content.type == 'resource' then
    return ('[%s]'):format(content.resource and content.resource.uri or 'resource')
  end
  return ('[%s]'):format(tostring(content.type))
end

local function last(s)
  return s.chat.blocks[#s.chat.blocks]
end

local function push(s, block)
  table.insert(s.chat.blocks, block)
  return block
end

local KIND = { agent_message_chunk = 'agent', agent_thought_chunk = 'thought', user_message_chunk = 'user' }

--- agent_message_chunk, agent_thought_chunk, user_message_chunk (chunks of one messageId are appended;
--- `_meta.agentd.retracts` drops a message that a retried request replaced, PROTOCOL.md §7.2).
function M.chunk(s, u)
  local meta = u._meta and u._meta.agentd
  if meta and meta.retracts then
    for i = #s.chat.blocks, 1, -1 do
      local b = s.chat.blocks[i]
      if b.id == meta.retracts and (b.kind == 'agent' or b.kind == 'thought') then
        table.remove(s.chat.blocks, i)
      end
    end
  end
  local kind = KIND[u.sessionUpdate]
  local b = last(s)
  if b and b.kind == kind and b.id == u.messageId then
    b.text = b.text .. text_of(u.content)
  else
    push(s, { kind = kind, id = u.messageId, text = text_of(u.content) })
  end
end

--- A prompt typed in this editor (agentd echoes user messages only in a replay).
function M.add_user(s, text)
  push(s, { kind = 'user', text = text })
  M.render(s)
end

--- A line of the plugin's own (errors, exits).
function M.note(s, text)
  push(s, { kind = 'note', text = text })
end

--- The end of a turn: the stop reason, or agentd's progress summary that starts with it.
function M.end_turn(s)
  local text = s.stop_reason or 'ended'
  if s.last_end and vim.startswith(s.last_end, text) then
    text = s.last_end
  end
  s.last_end = nil
  push(s, { kind = 'end', text = text })
  M.render(s)
end

--- tool_call and tool_call_update: only `toolCallId` is required; other fields replace the shown ones.
function M.tool(s, u)
  local t = s.chat.tools[u.toolCallId]
  if not t then
    t = push(s, { kind = 'tool', id = u.toolCallId, title = u.toolCallId, status = 'pending' })
    s.chat.tools[u.toolCallId] = t
  end
  for _, k in ipairs({ 'title', 'status', 'content', 'rawInput', 'rawOutput', 'locations' }) do
    if u[k] ~= nil then
      t[k] = u[k]
    end
  end
  if u.kind ~= nil then
    t.tool_kind = u.kind
  end
  if u._meta and u._meta.agentd then
    t.meta = vim.tbl_extend('force', t.meta or {}, u._meta.agentd)
  end
end

--- Marks a tool call as waiting for the user's answer.
function M.awaiting(s, tool_call_id, waiting)
  local t = s.chat.tools[tool_call_id]
  if t then
    t.awaiting = waiting or nil
  end
end

local function diffstat(content)
  local add, del, any = 0, 0, false
  local diff = (vim.text and vim.text.diff) or vim.diff
  for _, c in ipairs(type(content) == 'table' and content or {}) do
    if c.type == 'diff' then
      any = true
      local old = type(c.oldText) == 'string' and c.oldText or ''
      local new = type(c.newText) == 'string' and c.newText or ''
      for _, h in ipairs(diff(old, new, { result_type = 'indices' }) or {}) do
        del, add = del + h[2], add + h[4]
      end
    end
  end
  return any and ('+%d -%d'):format(add, del) or nil
end

local function tool_line(t)
  local meta = t.meta or {}
  local notes = {}
  if t.status == 'failed' then
    if meta.cancelled then
      notes[#notes + 1] = 'cancelled'
    elseif meta.interrupted then
      notes[#notes + 1] = 'interrupted'
    elseif meta.decision == 'deny' then
      notes[#notes + 1] = 'denied'
    else
      notes[#notes + 1] = 'failed'
    end
  elseif t.awaiting then
    notes[#notes + 1] = 'awaiting approval'
  elseif t.status == 'in_progress' then
    notes[#notes + 1] = 'running'
  end
  if t.status == 'completed' then
    local stat = diffstat(t.content)
    if stat then
      notes[#notes + 1] = stat
    end
    if type(t.rawOutput) == 'table' and t.rawOutput.exitCode ~= nil then
      notes[#notes + 1] = 'exit ' .. tostring(t.rawOutput.exitCode)
    end
  end
  local line = ('  %s %s'):format(M.icons[t.status] or '?', (t.title or ''):gsub('\n', ' '))
  if #notes > 0 then
    line = line .. ' (' .. table.concat(notes, ', ') .. ')'
  end
  return line
end

--- The chat buffer's lines for a session.
function M.lines(s)
  local out = {}
  local function add_text(text, prefix)
    for _, l in ipairs(vim.split(text, '\n', { plain = true })) do
      out[#out + 1] = prefix .. l
    end
  end
  for _, b in ipairs(s.chat.blocks) do
    if b.kind == 'user' then
      if #out > 0 and out[#out] ~= '' then
        out[#out + 1] = ''
      end
      add_text(b.text, '> ')
      out[#out + 1] = ''
    elseif b.kind == 'agent' then
      add_text(b.text, '')
    elseif b.kind == 'thought' then
      add_text(b.text, '│ ')
    elseif b.kind == 'tool' then
      out[#out + 1] = tool_line(b)
    elseif b.kind == 'note' then
      out[#out + 1] = '[' .. b.text:gsub('\n', ' ') .. ']'
    elseif b.kind == 'end' then
      out[#out + 1] = '── ' .. b.text .. ' ──'
    end
  end
  return out
end

local function short(n)
  if type(n) ~= 'number' then
    return '?'
  end
  if n >= 1000 then
    return ('%.1fk'):format(n / 1000)
  end
  return tostring(n)
end

--- The winbar text: turn state or progress, mode, context use, cost, then the session title, which is
--- what gets cut (`%<`) in a narrow window. Statusline syntax; `%` in the texts is escaped.
function M.winbar(s)
  local state
  if s.detached then
    state = s.status or 'closed'
  elseif s.state == 'idle' then
    state = s.stop_reason or 'idle'
  else
    state = s.status or s.state
  end
  local parts = { 'agentd', state }
  if s.mode and s.mode ~= 'default' then
    parts[#parts + 1] = 'mode ' .. s.mode
  end
  if type(s.usage) == 'table' and s.usage.used then
    parts[#parts + 1] = ('ctx %s/%s'):format(short(s.usage.used), short(s.usage.size))
    if type(s.usage.cost) == 'table' and s.usage.cost.amount then
      parts[#parts + 1] = ('$%.4f'):format(s.usage.cost.amount)
    end
  end
  parts[#parts + 1] = s.title or 'new session'
  for i, p in ipairs(parts) do
    parts[i] = p:gsub('%%', '%%%%')
  end
  parts[#parts] = '%<' .. parts[#parts]
  return table.concat(parts, ' · ')
end

--- The chat buffer of a session (created on first use).
function M.buf(s)
  local name = 'agentd://chat/' .. s.id
  local b = s.chat_buf
  if b and api.nvim_buf_is_valid(b) then
    return b
  end
  b = api.nvim_create_buf(false, true)
  s.chat_buf = b
  api.nvim_buf_set_name(b, name)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].swapfile = false
  vim.b[b].agentd_chat = s.id
  vim.b[b].agentd_root = s.root
  vim.bo[b].filetype = 'markdown'
  vim.bo[b].modifiable = false
  return b
end

--- The window showing a chat buffer in the current tab, if any.
function M.win(s)
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    local wb = api.nvim_win_get_buf(w)
    if s == nil and vim.b[wb].agentd_chat or s and vim.b[wb].agentd_chat == s.id then
      return w
    end
  end
end

local SPLIT = {
  right = 'botright vsplit',
  left = 'topleft vsplit',
  top = 'topleft split',
  bottom = 'botright split',
}

--- Opens a window for buffer `b` at `position` ('right', 'left', 'top', 'bottom', 'float') without
--- moving the cursor. Returns the window.
function M.open_win(b, position, size)
  local cur = api.nvim_get_current_win()
  local w
  if position == 'float' then
    local width = math.max(20, math.floor(vim.o.columns * size))
    local height = math.max(5, vim.o.lines - 6)
    w = api.nvim_open_win(b, false, {
      relative = 'editor',
      row = 1,
      col = vim.o.columns - width - 2,
      width = width,
      height = height,
      border = 'rounded',
    })
  else
    vim.cmd(SPLIT[position] or SPLIT.right)
    w = api.nvim_get_current_win()
    api.nvim_win_set_buf(w, b)
    if position == 'top' or position == 'bottom' then
      api.nvim_win_set_height(w, math.max(3, math.floor(vim.o.lines * size)))
    else
      api.nvim_win_set_width(w, math.max(20, math.floor(vim.o.columns * size)))
    end
    if api.nvim_win_is_valid(cur) then
      api.nvim_set_current_win(cur)
    end
  end
  return w
end

--- Shows the chat of a session (reusing a chat window of the tab), keeping the cursor where it is.
function M.open(s)
  local b = M.buf(s)
  local w = M.win(s) or M.win(nil)
  if w then
    api.nvim_win_set_buf(w, b)
  else
    local opts = config.options.chat or {}
    w = M.open_win(b, opts.position or 'right', opts.size or 0.4)
  end
  local wo = vim.wo[w]
  wo.wrap = true
  wo.linebreak = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = 'no'
  wo.foldcolumn = '0'
  wo.spell = false
  wo.statusline = ' agentd chat%=%l/%L '
  M.render(s)
  return w
end

--- Redraws the buffer and winbar of a session's chat (if the buffer exists).
function M.render(s)
  local b = s.chat_buf
  if not b or not api.nvim_buf_is_valid(b) then
    return
  end
  local wins = vim.fn.win_findbuf(b)
  local follow = {}
  for _, w in ipairs(wins) do
    local line = api.nvim_win_get_cursor(w)[1]
    follow[w] = w ~= api.nvim_get_current_win() or line >= api.nvim_buf_line_count(b)
  end
  local lines = M.lines(s)
  vim.bo[b].modifiable = true
  api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  vim.bo[b].modified = false
  local bar = M.winbar(s)
  for _, w in ipairs(wins) do
    vim.wo[w].winbar = bar
    if follow[w] then
      api.nvim_win_set_cursor(w, { math.max(1, #lines), 0 })
    end
  end
end

return M
