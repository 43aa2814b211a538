--- The chat buffer of a session: your prompts, the streamed answer, one line per tool call, and the turn's
--- progress in the window's winbar (PROTOCOL.md §7, §10.1).
local config = require('agentd.config')

local M = {}

local api = vim.api

M.icons = { pending = '·', in_progress = '▸', completed = '✓', failed = '✗' }

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

local tool_line

--- The text of a block (streamed text is kept as pieces, joined on demand: no copy per chunk).
local function block_text(b)
  if b.parts then
    b.text = (b.text or '') .. table.concat(b.parts)
    b.parts = nil
  end
  return b.text or ''
end
M.text = block_text

--- The rendered lines of a block; `prev` is the last line before it (nil at the top).
local function build(b, prev)
  local out = {}
  local function add_text(text, prefix)
    for _, l in ipairs(vim.split(text, '\n', { plain = true })) do
      out[#out + 1] = prefix .. l
    end
  end
  if b.kind == 'user' then
    if prev ~= nil and prev ~= '' then
      out[#out + 1] = ''
    end
    add_text(block_text(b), '> ')
    out[#out + 1] = ''
  elseif b.kind == 'agent' then
    add_text(block_text(b), '')
  elseif b.kind == 'thought' then
    add_text(block_text(b), '│ ')
  elseif b.kind == 'tool' then
    out[#out + 1] = tool_line(b)
  elseif b.kind == 'note' then
    out[#out + 1] = '[' .. b.text:gsub('\n', ' ') .. ']'
  elseif b.kind == 'end' then
    out[#out + 1] = '── ' .. b.text .. ' ──'
  end
  return out
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
    b.out = build(b, prev)
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
  block.out = build(block, prev_line(s, i))
  mark(s, i, 1)
  return block
end

--- Re-renders one block in place (a tool call's line changed).
local function refresh(s, b)
  local i = b.idx
  if not i or s.chat.blocks[i] ~= b then
    return rebuild_all(s)
  end
  b.out = build(b, prev_line(s, i))
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
  if b and b.kind == kind and b.id == u.messageId and kind ~= 'user' then
    append(s, b, text_of(u.content))
  elseif b and b.kind == kind and b.id == u.messageId then
    b.text = block_text(b) .. text_of(u.content)
    refresh(s, b)
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

function tool_line(t)
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
  for _, b in ipairs(s.chat.blocks) do
    vim.list_extend(out, b.out or build(b, out[#out]))
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

--- The chat window of a workspace in a tab (default: the current one): the window tagged for the root
--- of `s` (default: the current buffer's workspace) that shows a chat buffer. Windows belong to their
--- workspace (`w:agentd_chat_root`): a session never takes over another workspace's window.
function M.win(s, tab)
  local root = s and s.root or require('agentd.client').root_for(0)
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    if vim.w[w].agentd_chat_root == root and vim.b[api.nvim_win_get_buf(w)].agentd_chat then
      return w
    end
  end
end

--- Whether a tab (default: the current one) shows the workspace `root`: one of its windows shows an
--- agentd buffer of that root or a file in it. A tab with no file or agentd window counts by its
--- windows' working directory.
function M.tab_shows(root, tab)
  local client = require('agentd.client')
  local fallback = false
  local any = false
  for _, w in ipairs(api.nvim_tabpage_list_wins(tab or 0)) do
    local b = api.nvim_win_get_buf(w)
    local own = vim.b[b].agentd_root
    if own then
      any = true
      if own == root then
        return true
      end
    elseif vim.bo[b].buftype == '' and api.nvim_buf_get_name(b) ~= '' then
      any = true
      if client.root_for(b) == root then
        return true
      end
    elseif api.nvim_win_get_config(w).relative == '' then
      local tw = vim.fn.win_id2tabwin(w)
      local ok, cwd = pcall(vim.fn.getcwd, tw[2], tw[1])
      if ok and vim.fs.normalize(cwd) == root then
        fallback = true
      end
    end
  end
  return not any and fallback
end

--- Windows waiting for their workspace's tab: { [root] = { chat = session?, plan = session? } }.
M.pending = {}

local function flush_pending()
  for root, p in pairs(M.pending) do
    if M.tab_shows(root) then
      M.pending[root] = nil
      local client = require('agentd.client')
      local active = client.active[root]
      if p.chat and active == p.chat.id then
        M.open(p.chat)
      end
      if p.plan and active == p.plan.id then
        require('agentd.plan').show(p.plan, p.plan_opts)
      end
    end
  end
end

--- Opens a window of `kind` ('chat' or 'plan') for session `s` later, when a tab showing its workspace
--- becomes current (windows open only in a tab that shows their workspace).
function M.defer(s, kind, opts)
  local p = M.pending[s.root] or {}
  M.pending[s.root] = p
  p[kind] = s
  if kind == 'plan' then
    p.plan_opts = opts
  end
  vim.api.nvim_create_autocmd({ 'TabEnter', 'BufWinEnter', 'WinEnter' }, {
    group = vim.api.nvim_create_augroup('agentd.pending', { clear = true }),
    callback = function()
      vim.schedule(flush_pending)
      if next(M.pending) == nil then
        return true
      end
    end,
  })
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

--- Shows the chat of a session, keeping the cursor where it is: in the chat window of its workspace in
--- this tab, else a new one if this tab shows the workspace; otherwise when such a tab becomes current.
function M.open(s)
  local b = M.buf(s)
  local w = M.win(s)
  if w then
    if api.nvim_win_get_buf(w) ~= b then
      api.nvim_win_set_buf(w, b)
    end
  elseif M.tab_shows(s.root) then
    local opts = config.options.chat or {}
    w = M.open_win(b, opts.position or 'right', opts.size or 0.4)
    vim.w[w].agentd_chat_root = s.root
  else
    M.defer(s, 'chat')
    M.render(s)
    return nil
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
      blk.out = blk.out or build(blk, lines[#lines])
      view.starts[i] = #lines
      view.counts[i] = #blk.out
      vim.list_extend(lines, blk.out)
    end
    view.total = #lines
    api.nvim_buf_set_lines(b, 0, -1, false, lines)
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
      api.nvim_buf_set_lines(b, start + from - 1, start + old, false, new)
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
  local bar = M.winbar(s)
  local last_line = api.nvim_buf_line_count(b)
  for _, w in ipairs(wins) do
    vim.wo[w].winbar = bar
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
