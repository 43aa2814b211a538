--- The lines of one chat block (`:help agentd-chat`): a prompt (`> `) with its attachments (`  @ path:lines`),
--- streamed text, a thought (`│ `), a tool line (`  ✓ Title (notes)`) and, when expanded, what the tool
--- produced, a note (`[…]`), the end of a turn (`── … ──`). Pure functions of the block; no buffers.
local diff = require('agentd.diff')
local util = require('agentd.util')

local M = {}

M.icons = { pending = '·', in_progress = '▸', completed = '✓', failed = '✗' }

local tool_line

function M.text_of(content)
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

--- A prompt attachment for display: `@ src/app.py:10-20` (a `#L10-L20` fragment names the lines).
local function attachment_line(uri, root)
  local path, frag = uri:match('^file://([^#]*)#?(.*)$')
  if not path then
    return '  @ ' .. uri
  end
  local label = util.relpath(vim.uri_to_fname('file://' .. path), root)
  local a, b = frag:match('^L(%d+)%-L?(%d+)$')
  if a then
    label = ('%s:%s-%s'):format(label, a, b)
  elseif frag:match('^L%d+$') then
    label = label .. ':' .. frag:sub(2)
  end
  return '  @ ' .. label
end
M.attachment_line = attachment_line

--- The lines shown under an expanded tool line: its text output, its diff, or its raw output.
---@return string[] lines, (string|false)[] groups
local function details(b, root)
  local lines, groups = {}, {}
  for _, c in ipairs(type(b.content) == 'table' and b.content or {}) do
    if c.type == 'diff' and type(c.path) == 'string' then
      local dl, dg = diff.unified(c, root)
      vim.list_extend(lines, dl)
      vim.list_extend(groups, dg)
    elseif c.type == 'content' and type(c.content) == 'table' and c.content.type == 'text' then
      for _, l in ipairs(vim.split(c.content.text or '', '\n', { plain = true })) do
        lines[#lines + 1] = l
        groups[#groups + 1] = false
      end
    end
  end
  if #lines == 0 then
    local raw = b.rawOutput ~= nil and b.rawOutput ~= vim.NIL and vim.json.encode(b.rawOutput) or nil
    lines[1] = raw or (b.status == 'completed' and '(no output)' or '(no output yet)')
    groups[1] = false
  end
  for i, l in ipairs(lines) do
    lines[i] = '    │ ' .. l
  end
  return lines, groups
end

--- The text of a block (streamed text is kept as pieces, joined on demand: no copy per chunk).
local function block_text(b)
  if b.parts then
    b.text = (b.text or '') .. table.concat(b.parts)
    b.parts = nil
  end
  return b.text or ''
end
M.text = block_text

--- The rendered lines of a block; `prev` is the last line before it (nil at the top). Sets `b.hl`: the
--- highlight group of each line (diff colours), or nil.
function M.build(b, prev, root)
  local out = {}
  b.hl = nil
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
    for _, uri in ipairs(b.attachments or {}) do
      out[#out + 1] = attachment_line(uri, root)
    end
    out[#out + 1] = ''
  elseif b.kind == 'agent' then
    add_text(block_text(b), '')
  elseif b.kind == 'thought' then
    add_text(block_text(b), '│ ')
  elseif b.kind == 'tool' then
    out[#out + 1] = tool_line(b)
    if b.expanded then
      local lines, groups = details(b, root)
      vim.list_extend(out, lines)
      b.hl = { false }
      vim.list_extend(b.hl, groups)
    end
  elseif b.kind == 'note' then
    out[#out + 1] = '[' .. b.text:gsub('\n', ' ') .. ']'
  elseif b.kind == 'end' then
    out[#out + 1] = '── ' .. b.text .. ' ──'
  end
  return out
end

local function tool_line_of(t)
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
    local stat = diff.stat(t.content)
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

tool_line = tool_line_of
M.tool_line = tool_line_of

return M
