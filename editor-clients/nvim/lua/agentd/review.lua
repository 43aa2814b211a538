--- The approval window (`:help agentd-approvals`): the proposed change of a write or edit as a coloured
--- unified diff (every hunk, scrollable: it is a normal window), or the command line of `run_command`, in
--- a float that takes the cursor, with one key per option of the request (PROTOCOL.md §6.10).
---
--- Keys come from the options the server sends, never from a fixed list: the first option of each kind gets
--- its letter (`a` allow_once, `A` allow_always, `r` reject_once, `R` reject_always) and every option its
--- number (`1`-`9`), so an option added later (the command-prefix "always") needs no change here. `s` asks
--- with `vim.ui.select` instead, `q`/`<Esc>` reject once (as dismissing the select does). Closing the
--- window any other way falls back to `vim.ui.select`. Every line has its bidi controls and invisible
--- characters escaped (`agentd.visible`, H20), so a command cannot look like another.
local diff = require('agentd.diff')
local util = require('agentd.util')
local visible = require('agentd.visible').visible

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('agentd.review')

M.kind_keys = { allow_once = 'a', allow_always = 'A', reject_once = 'r', reject_always = 'R' }

--- The keys of each option, in order: `{ { option = o, keys = { 'a', '1' } }, ... }`.
---@param options table[] the request's options
function M.keymap(options)
  local taken, out = {}, {}
  for i, o in ipairs(options or {}) do
    local keys = {}
    local letter = M.kind_keys[o.kind]
    if letter and not taken[letter] then
      taken[letter] = true
      keys[#keys + 1] = letter
    end
    if i <= 9 then
      keys[#keys + 1] = tostring(i)
    end
    out[#out + 1] = { option = o, keys = keys }
  end
  return out
end

local function meta_of(params)
  return type(params._meta) == 'table' and type(params._meta.agentd) == 'table' and params._meta.agentd or {}
end

--- The buffer's lines and their highlight groups: title, description, the keys, then the diff (or the
--- command, or the raw input).
---@param params table requestPermission params
---@param root string? workspace root (diff headers are relative to it)
---@return string[] lines, (string|false)[] groups
function M.render(params, root)
  local tc = params.toolCall or {}
  local meta = meta_of(params)
  local lines, groups = {}, {}
  local function add(l, g)
    for _, piece in ipairs(vim.split(l, '\n', { plain = true })) do
      lines[#lines + 1] = piece
      groups[#groups + 1] = g or false
    end
  end
  local title = meta.title or tc.title or tc.toolCallId or '?'
  local stat = diff.stat(tc.content)
  add(title .. (stat and (' (' .. stat .. ')') or ''), 'Title')
  if meta.description then
    add(meta.description, 'Comment')
  end
  add('')
  for _, k in ipairs(M.keymap(params.options)) do
    add(('  [%s] %s'):format(k.keys[1] or ' ', k.option.name or k.option.optionId), 'AgentdApprovalKey')
  end
  add('  [s] choose from a list · [q] reject · scroll as in any window', 'Comment')
  add('')
  local shown = false
  for _, c in ipairs(tc.content or {}) do
    if c.type == 'diff' and type(c.path) == 'string' then
      local dl, dg = diff.unified(c, root)
      vim.list_extend(lines, dl)
      vim.list_extend(groups, dg)
      shown = true
    elseif c.type == 'content' and type(c.content) == 'table' and c.content.type == 'text' then
      add(c.content.text or '')
      shown = true
    end
  end
  if not shown and tc.rawInput ~= nil then
    add(vim.inspect(tc.rawInput))
  end
  for i, l in ipairs(lines) do
    lines[i] = visible(l, true)
  end
  return lines, groups
end

api.nvim_set_hl(0, 'AgentdApprovalKey', { link = 'Special', default = true })

local SHORT = { allow_once = 'allow', allow_always = 'always', reject_once = 'reject', reject_always = 'never' }

--- The window's footer: the letter keys of the options, then `s` and `q`.
function M.footer(options)
  local parts = {}
  for _, k in ipairs(M.keymap(options)) do
    local key = k.keys[1]
    if key and not key:match('%d') then
      parts[#parts + 1] = key .. ' ' .. (SHORT[k.option.kind] or k.option.kind)
    end
  end
  parts[#parts + 1] = 's list'
  parts[#parts + 1] = 'q reject'
  return ' ' .. table.concat(parts, ' · ') .. ' '
end

local function size(lines)
  local width = 40
  for _, l in ipairs(lines) do
    width = math.max(width, util.width(l))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 6))
  local height = math.max(3, math.min(#lines, vim.o.lines - vim.o.cmdheight - 6))
  return width, height
end

--- Opens the approval window for `item` (`item.params`: the request) and takes the cursor. `on_pick(option
--- or nil)` answers (nil: reject once); `on_select()` switches to vim.ui.select. Returns the window.
---@param item table
---@param root string?
---@param on_pick fun(option: table?)
---@param on_select fun()
function M.open(item, root, on_pick, on_select)
  local params = item.params
  local lines, groups = M.render(params, root)
  local b = api.nvim_create_buf(false, true)
  local id = params.toolCall and params.toolCall.toolCallId or tostring(b)
  pcall(api.nvim_buf_set_name, b, 'agentd://approval/' .. id)
  api.nvim_buf_set_lines(b, 0, -1, false, lines)
  for i, g in ipairs(groups) do
    if g then
      local opts = { line_hl_group = g, priority = 150 }
      if g == 'Title' or g == 'Comment' or g == 'AgentdApprovalKey' then
        opts = { end_row = i - 1, end_col = #lines[i], hl_group = g }
      end
      api.nvim_buf_set_extmark(b, ns, i - 1, 0, opts)
    end
  end
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'wipe'
  vim.bo[b].swapfile = false
  vim.bo[b].modifiable = false
  vim.bo[b].filetype = 'agentd_approval'
  local width, height = size(lines)
  local prev = api.nvim_get_current_win()
  local title = (' agentd approval · %s '):format(util.fit(visible(meta_of(params).title or '?', true), width - 24))
  local w = api.nvim_open_win(b, true, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 2),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    border = 'rounded',
    title = title,
    footer = M.footer(params.options),
    footer_pos = 'right',
    zindex = 60,
  })
  vim.wo[w].wrap = false
  vim.wo[w].cursorline = true
  vim.wo[w].number = false
  vim.wo[w].signcolumn = 'no'
  item.review = { win = w, buf = b, prev = prev }
  local function map(key, fn, desc)
    vim.keymap.set('n', key, fn, { buffer = b, nowait = true, silent = true, desc = 'agentd: ' .. desc })
  end
  for _, k in ipairs(M.keymap(params.options)) do
    for _, key in ipairs(k.keys) do
      map(key, function()
        on_pick(k.option)
      end, k.option.name or k.option.optionId)
    end
  end
  map('s', on_select, 'choose from a list')
  map('q', function()
    on_pick(nil)
  end, 'reject once')
  map('<Esc>', function()
    on_pick(nil)
  end, 'reject once')
  api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(w),
    once = true,
    callback = function()
      if item.review and item.review.win == w and not item.done then
        item.review = nil
        vim.schedule(on_select)
      end
    end,
  })
  return w
end

--- Closes the approval window of `item` (if open) and gives the cursor back.
function M.close(item)
  local r = item.review
  item.review = nil
  if not r then
    return
  end
  if api.nvim_win_is_valid(r.win) then
    api.nvim_win_close(r.win, true)
  end
  if api.nvim_buf_is_valid(r.buf) then
    pcall(api.nvim_buf_delete, r.buf, { force = true })
  end
  if r.prev and api.nvim_win_is_valid(r.prev) then
    api.nvim_set_current_win(r.prev)
  end
end

return M
