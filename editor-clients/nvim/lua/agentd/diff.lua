--- Diffs of tool calls (PROTOCOL.md §7.3: `{type = 'diff', path, oldText, newText}` holds the whole file
--- before and after): the unified diff with workspace-relative headers, its `+N -M` size, and the
--- highlights that colour it in any buffer (extmarks, so it needs no syntax or treesitter).
local util = require('agentd.util')

local M = {}

local api = vim.api
M.ns = api.nvim_create_namespace('agentd.diff')

-- Highlight groups (`:help agentd-highlights`); each links to a standard group unless the user set it.
M.groups = {
  AgentdDiffAdd = 'DiffAdd',
  AgentdDiffDelete = 'DiffDelete',
  AgentdDiffHunk = 'DiffText',
  AgentdDiffFile = 'Title',
}
for name, link in pairs(M.groups) do
  api.nvim_set_hl(0, name, { link = link, default = true })
end

local function text_diff()
  return (vim.text and vim.text.diff) or vim.diff
end

--- The diff items of a tool call's content.
function M.items(content)
  local found = {}
  for _, c in ipairs(type(content) == 'table' and content or {}) do
    if type(c) == 'table' and c.type == 'diff' and type(c.path) == 'string' then
      found[#found + 1] = c
    end
  end
  return found
end

--- Lines added and removed by the diff items of `content`; nil when it has none.
---@return integer? added, integer? removed
function M.count(content)
  local items = M.items(content)
  if #items == 0 then
    return nil
  end
  local add, del = 0, 0
  for _, c in ipairs(items) do
    local old = type(c.oldText) == 'string' and c.oldText or ''
    local new = type(c.newText) == 'string' and c.newText or ''
    for _, h in ipairs(text_diff()(old, new, { result_type = 'indices' }) or {}) do
      del, add = del + h[2], add + h[4]
    end
  end
  return add, del
end

--- `+3 -0` for the diff items of `content`, or nil.
function M.stat(content)
  local add, del = M.count(content)
  return add and ('+%d -%d'):format(add, del) or nil
end

--- The unified diff of one diff item, every hunk (3 lines of context), headers relative to `root`
--- (`--- a/src/app.py`, `+++ b/src/app.py`; a new file is `--- /dev/null`; a path outside the workspace
--- is shown whole), and each line's highlight group (false: none).
---@param c table a diff item
---@param root string? workspace root
---@return string[] lines, (string|false)[] groups
function M.unified(c, root)
  local old = type(c.oldText) == 'string' and c.oldText or ''
  local new = type(c.newText) == 'string' and c.newText or ''
  local rel = util.relpath(c.path, root)
  local body = text_diff()(old, new, { result_type = 'unified', ctxlen = 3 }) or ''
  -- git's `a/` and `b/` only for a path in the workspace; one outside it stays as it is (`/etc/x`, `~/x`)
  local inside = rel:sub(1, 1) ~= '/' and rel:sub(1, 1) ~= '~'
  local lines = {
    type(c.oldText) ~= 'string' and '--- /dev/null' or '--- ' .. (inside and 'a/' or '') .. rel,
    '+++ ' .. (inside and 'b/' or '') .. rel,
  }
  local groups = { 'AgentdDiffFile', 'AgentdDiffFile' }
  for _, l in ipairs(vim.split(body, '\n', { plain = true, trimempty = true })) do
    lines[#lines + 1] = l
    local c1 = l:sub(1, 1)
    groups[#groups + 1] = (c1 == '+' and 'AgentdDiffAdd')
      or (c1 == '-' and 'AgentdDiffDelete')
      or (l:sub(1, 2) == '@@' and 'AgentdDiffHunk')
      or false
  end
  if #lines == 2 then
    lines[#lines + 1] = '(no change)'
    groups[#groups + 1] = false
  end
  return lines, groups
end

--- Colours lines of buffer `buf` from 0-based line `first` on: `groups[i]` for line `first + i - 1`.
function M.highlight(buf, first, groups)
  for i, group in ipairs(groups) do
    if group then
      api.nvim_buf_set_extmark(buf, M.ns, first + i - 1, 0, { line_hl_group = group, priority = 150 })
    end
  end
end

return M
