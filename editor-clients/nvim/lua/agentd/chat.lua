--- The chat buffer of a session: your prompts (with what they attached), the streamed answer, one line per
--- tool call (`<CR>` expands it: a command's output, an edit's diff), retries, and the turn's progress in
--- the window's winbar, fitted to its width (PROTOCOL.md §7, §10.1). The input area below the chat is
--- `agentd.input`.
local blocks = require('agentd.blocks')
local diff = require('agentd.diff')
local layout = require('agentd.layout')
local util = require('agentd.util')
local winbar = require('agentd.winbar')

local M = {}

local api = vim.api

M.icons = blocks.icons
M.text = blocks.text
M.attachment_line = blocks.attachment_line
M.winbar = winbar.text
M.state_text = winbar.state
M.win, M.tab_shows, M.defer, M.pending = layout.win, layout.tab_shows, layout.defer, layout.pending
M.open_win, M.open, M.close = layout.open_win, layout.open, layout.close

local build, block_text, text_of = blocks.build, blocks.text, blocks.text_of

--- A new, empty chat model. Each block keeps its rendered lines (`out`); `dirty` records what changed
--- since the last render ({ [block index] = first changed line of the block }, or true: everything), so
--- a render patches only the changed tail lines of the buffer (PROTOCOL.md §7: long streamed answers).
function M.new_model()
  return { blocks = {}, tools = {}, dirty = true }
end

--- Forgets what the chat shows (before a load replays the session).
function M.reset(s)
  s.chat = M.new_model()
end

local function last(s)
  return s.chat.blocks[#s.chat.blocks]
end

--- The last rendered line before block index i.
local function prev_line(s, i)
  for j = i - 1, 1, -1 do
    local out = s.chat.blocks[j].out
    if out and #out > 0 then
      return out[#out]
    end
  end
end

--- Marks lines of block i changed from line `from` (1-based, within the block) on.
local function mark(s, i, from)
  local d = s.chat.dirty
  if d == true then
    return
  end
  if type(d) ~= 'table' then
    d = {}
    s.chat.dirty = d
  end
  d[i] = math.min(d[i] or from, from)
end

local function rebuild_all(s)
  local prev = nil
  for i, b in ipairs(s.chat.blocks) do
    b.idx = i
    b.out = build(b, prev, s.cwd or s.root)
    if #b.out > 0 then
      prev = b.out[#b.out]
    end
  end
  s.chat.dirty = true
end

local function push(s, block)
  table.insert(s.chat.blocks, block)
  local i = #s.chat.blocks
  block.idx = i
  block.out = build(block, prev_line(s, i), s.cwd or s.root)
  mark(s, i, 1)
  return block
end

--- Re-renders one block in place (a tool call's line changed).
local function refresh(s, b)
  local i = b.idx
  if not i or s.chat.blocks[i] ~= b then
    return rebuild_all(s)
  end
  b.out = build(b, prev_line(s, i), s.cwd or s.root)
  mark(s, i, 1)
end

--- Appends streamed text to a text block, patching only its last line and adding the new ones.
local function append(s, b, chunk)
  if chunk == '' then
    return
  end
  b.parts = b.parts or {}
  b.parts[#b.parts + 1] = chunk
  local prefix = b.kind == 'thought' and '│ ' or ''
  local out = b.out
  local pieces = vim.split(chunk, '\n', { plain = true })
  local from = #out
  out[#out] = out[#out] .. pieces[1]
  for k = 2, #pieces do
    out[#out + 1] = prefix .. pieces[k]
  end
  mark(s, b.idx, math.max(1, from))
end

local KIND = { agent_message_chunk = 'agent', agent_thought_chunk = 'thought', user_message_chunk = 'user' }

--- agent_message_chunk, agent_thought_chunk, user_message_chunk (chunks of one messageId are appended;
--- `_meta.agentd.retracts` drops a message that a retried request replaced, PROTOCOL.md §7.2).
function M.chunk(s, u)
  local meta = u._meta and u._meta.agentd
  if meta and meta.retracts then
    local removed = false
    for i = #s.chat.blocks, 1, -1 do
      local b = s.chat.blocks[i]
      if b.id == meta.retracts and (b.kind == 'agent' or b.kind == 'thought') then
        table.remove(s.chat.blocks, i)
        removed = true
      end
    end
    if removed then
      rebuild_all(s)
    end
  end
  local kind = KIND[u.sessionUpdate]
  local b = last(s)
  if kind == 'user' then
    return M.user_chunk(s, u, b)
  end
  if b and b.kind == kind and b.id == u.messageId then
    append(s, b, text_of(u.content))
  else
    push(s, { kind = kind, id = u.messageId, text = text_of(u.content) })
  end
end

--- The URI of a replayed prompt block that was an attachment: a `resource`/`resource_link` block, or the
--- text agentd stores for an attached `resource` (its URI, then the text in a fence).
local function attached_uri(content)
  if type(content) ~= 'table' then
    return nil
  end
  if content.type == 'resource' and type(content.resource) == 'table' then
    return content.resource.uri
  elseif content.type == 'resource_link' then
    return content.uri
  elseif content.type == 'text' and type(content.text) == 'string' then
    return content.text:match('^(file://%S+)\n```')
  end
end

--- One replayed prompt block: text joins the prompt's text (one block per line break), an attachment
--- becomes an `@ path:lines` line.
function M.user_chunk(s, u, b)
  local uri = attached_uri(u.content)
  if not (b and b.kind == 'user' and b.id ~= nil and b.id == u.messageId) then
    b = push(s, { kind = 'user', id = u.messageId, text = '', attachments = {} })
  end
  if uri then
    b.attachments = b.attachments or {}
    b.attachments[#b.attachments + 1] = uri
  else
    local piece = text_of(u.content)
    local cur = block_text(b)
    b.text = cur == '' and piece or (cur .. '\n' .. piece)
  end
  refresh(s, b)
end

--- A prompt typed in this editor (agentd echoes user messages only in a replay); `attachments`: the URIs
--- of what went along (a visual range: `file:///…#L10-L20`).
function M.add_user(s, text, attachments)
  push(s, { kind = 'user', text = text, attachments = attachments })
  M.render(s)
end

--- A retried model request (the `retry` update, PROTOCOL.md §7.2): one line in the chat.
function M.retry(s, u)
  push(s, {
    kind = 'note',
    text = ('retrying in %s s (attempt %s failed: %s)'):format(
      util.seconds(u.delayS),
      tostring(u.attempt or '?'),
      tostring(u.message or 'provider error')
    ),
  })
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
  refresh(s, t)
end

--- Marks a tool call as waiting for the user's answer.
function M.awaiting(s, tool_call_id, waiting)
  local t = s.chat.tools[tool_call_id]
  if t then
    t.awaiting = waiting or nil
    refresh(s, t)
  end
end

--- The chat buffer's lines for a session.
function M.lines(s)
  local out = {}
  for _, b in ipairs(s.chat.blocks) do
    vim.list_extend(out, b.out or build(b, out[#out], s.cwd or s.root))
  end
  return out
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
  -- Vim's markdown syntax marks every `_` inside a word as an error (red): `cache_read=…` is not one.
  local function calm()
    if api.nvim_buf_is_valid(b) then
      api.nvim_buf_call(b, function()
        pcall(vim.cmd, 'silent! syntax clear markdownError')
      end)
    end
  end
  calm()
  api.nvim_create_autocmd('Syntax', {
    buffer = b,
    callback = function()
      vim.schedule(calm)
    end,
  })
  local map = function(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = b, silent = true, desc = 'agentd: ' .. desc })
  end
  map('<CR>', function()
    if not M.toggle_details(s, api.nvim_win_get_cursor(0)[1]) then
      vim.cmd('normal! j')
    end
  end, 'show or hide the output of the tool call under the cursor')
  map('i', function()
    M.open(s, { focus = true })
  end, 'type a prompt in the input area')
  return b
end

--- The chat block shown on line `lnum` (1-based) of the chat buffer, or nil.
function M.block_at(s, lnum)
  local view = s.chat.view
  if not view then
    return nil
  end
  for i, b in ipairs(s.chat.blocks) do
    local start, count = view.starts[i], view.counts[i]
    if start and count and lnum > start and lnum <= start + count then
      return b
    end
  end
end

--- `<CR>` on a tool line: shows or hides what it produced (a command's output, an edit's diff).
function M.toggle_details(s, lnum)
  local b = M.block_at(s, lnum)
  if not b or b.kind ~= 'tool' then
    return false
  end
  b.expanded = not b.expanded
  refresh(s, b)
  M.render(s)
  local w = M.win(s)
  if w and s.chat.view then
    local line = s.chat.view.starts[b.idx] + 1
    api.nvim_win_set_cursor(w, { math.min(line, api.nvim_buf_line_count(s.chat_buf)), 0 })
  end
  return true
end

--- Writes what changed since the last render into the chat buffer: everything after a reset, else only
--- the changed lines of the changed blocks (a streamed chunk rewrites the last line and adds new ones).
local function patch(s, b)
  local chat = s.chat
  local dirty = chat.dirty
  chat.dirty = nil
  local view = chat.view
  if dirty == true or not view or view.buf ~= b or view.total == 0 then
    view = { buf = b, starts = {}, counts = {}, total = 0 }
    chat.view = view
    local lines = {}
    for i, blk in ipairs(chat.blocks) do
      blk.out = blk.out or build(blk, lines[#lines], s.cwd or s.root)
      view.starts[i] = #lines
      view.counts[i] = #blk.out
      vim.list_extend(lines, blk.out)
    end
    view.total = #lines
    api.nvim_buf_clear_namespace(b, diff.ns, 0, -1)
    api.nvim_buf_set_lines(b, 0, -1, false, lines)
    for i, blk in ipairs(chat.blocks) do
      if blk.hl then
        diff.highlight(b, view.starts[i], blk.hl)
      end
    end
    return
  end
  if type(dirty) ~= 'table' then
    return
  end
  local idx = vim.tbl_keys(dirty)
  table.sort(idx)
  for _, i in ipairs(idx) do
    local blk = chat.blocks[i]
    if blk then
      local start = view.starts[i]
      if start == nil then
        start = i > 1 and (view.starts[i - 1] or 0) + (view.counts[i - 1] or 0) or 0
        view.starts[i] = start
      end
      local old = view.counts[i] or 0
      local from = math.min(dirty[i], old + 1)
      local new = vim.list_slice(blk.out, from)
      api.nvim_buf_clear_namespace(b, diff.ns, start + from - 1, start + old)
      api.nvim_buf_set_lines(b, start + from - 1, start + old, false, new)
      if blk.hl then
        diff.highlight(b, start + from - 1, vim.list_slice(blk.hl, from))
      end
      local delta = #blk.out - old
      view.counts[i] = #blk.out
      view.total = view.total + delta
      if delta ~= 0 then
        for j = i + 1, #chat.blocks do
          if view.starts[j] then
            view.starts[j] = view.starts[j] + delta
          end
        end
      end
    end
  end
end

--- Redraws the buffer and winbar of a session's chat (if the buffer exists).
function M.render(s)
  s.chat.render_pending = nil
  local b = s.chat_buf
  if not b or not api.nvim_buf_is_valid(b) then
    return
  end
  local wins = vim.fn.win_findbuf(b)
  local follow = {}
  local count = api.nvim_buf_line_count(b)
  for _, w in ipairs(wins) do
    local line = api.nvim_win_get_cursor(w)[1]
    follow[w] = w ~= api.nvim_get_current_win() or line >= count
  end
  if s.chat.dirty then
    vim.bo[b].modifiable = true
    patch(s, b)
    vim.bo[b].modifiable = false
    vim.bo[b].modified = false
  end
  local last_line = api.nvim_buf_line_count(b)
  for _, w in ipairs(wins) do
    if vim.wo[w].winbar ~= winbar.EXPR then
      vim.wo[w].winbar = winbar.EXPR
    end
    pcall(api.nvim__redraw, { win = w, winbar = true })
    if follow[w] then
      api.nvim_win_set_cursor(w, { last_line, 0 })
    end
  end
end

--- Redraws a session's chat once the current batch of updates is handled (streamed chunks arrive many
--- at a time: they are coalesced into one redraw).
function M.render_soon(s)
  if s.chat.render_pending then
    return
  end
  s.chat.render_pending = true
  local model = s.chat
  vim.schedule(function()
    if s.chat == model and model.render_pending then
      M.render(s)
    end
  end)
end

return M
