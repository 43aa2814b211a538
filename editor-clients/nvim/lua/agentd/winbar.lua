--- The chat window's winbar (`:help agentd-chat`): the turn state, mode, context use, cost and session
--- title, fitted to the window's width each time it is drawn (an expression winbar), so nothing runs off
--- its end at any width. Reads the session; no state of its own.
local util = require('agentd.util')

local M = {}

local api = vim.api

--- Token counts for people: `950`, `1.2k`, `200k`.
local function short(n)
  if type(n) ~= 'number' then
    return '?'
  end
  if n >= 1000 then
    return (('%.1fk'):format(n / 1000):gsub('%.0k$', 'k'))
  end
  return tostring(n)
end

--- The winbar's turn state: the stop reason when idle, else the progress message (`Thinking`,
--- `Running: Read a.py`, `Waiting for approval: Edit b.py`, `retrying in 4 s`); `closed` when detached.
function M.state(s)
  if s.detached then
    return s.status or 'closed'
  elseif s.state == 'idle' then
    return s.stop_reason or 'idle'
  elseif s.retry then
    return ('retrying in %s s'):format(util.seconds(s.retry.delayS))
  end
  return s.status or s.state
end

local SHORT_STATE = { ['^Waiting for approval: '] = 'approval: ', ['^Running: '] = 'run: ' }

--- The winbar text, fitted to `width` cells (default: unlimited): the turn state, mode, context use and
--- cost, then the session title. When it does not fit: the title is shortened with `…`, then left out; the
--- state and figures take their short forms (`approval: Edit a.py`, `ctx 3%`, `$0.01`); the mode, the cost
--- and the context use are left out; the state is shortened. Statusline syntax: `%` is escaped.
function M.text(s, width)
  width = width or math.huge
  local state = M.state(s)
  local brief_state = state
  for pat, rep in pairs(SHORT_STATE) do
    brief_state = brief_state:gsub(pat, rep)
  end
  local long, brief = {}, {}
  if s.mode and s.mode ~= 'default' then
    long[#long + 1], brief[#brief + 1] = 'mode ' .. s.mode, s.mode
  end
  local usage = type(s.usage) == 'table' and s.usage or {}
  if usage.used then
    long[#long + 1] = ('ctx %s/%s'):format(short(usage.used), short(usage.size))
    local pct = type(usage.size) == 'number' and usage.size > 0 and math.floor(usage.used * 100 / usage.size + 0.5)
    brief[#brief + 1] = pct and ('ctx %d%%'):format(pct) or long[#long]
    if type(usage.cost) == 'table' and usage.cost.amount then
      long[#long + 1] = ('$%.4f'):format(usage.cost.amount)
      brief[#brief + 1] = ('$%.2f'):format(usage.cost.amount)
    end
  end
  local title = (s.title or 'new session'):gsub('%s+', ' ')
  local sep = ' · '
  local function line(first, list)
    return table.concat(vim.list_extend({ first }, list), sep)
  end
  local function fits(str)
    return util.width(str) <= width
  end
  local base = line(state, long)
  local room = width - util.width(base .. sep)
  local candidates = { base .. sep .. title }
  if room >= 12 then
    candidates[#candidates + 1] = base .. sep .. util.fit(title, room)
  end
  candidates[#candidates + 1] = base
  local keep = vim.list_slice(brief)
  candidates[#candidates + 1] = line(brief_state, keep)
  if s.mode and s.mode ~= 'default' and #keep > 0 then
    table.remove(keep, 1)
    candidates[#candidates + 1] = line(brief_state, keep)
  end
  while #keep > 0 do
    table.remove(keep)
    candidates[#candidates + 1] = line(brief_state, keep)
  end
  local text = util.fit(brief_state, width)
  for _, c in ipairs(candidates) do
    if fits(c) then
      text = c
      break
    end
  end
  return (text:gsub('%%', '%%%%'))
end

--- The chat window's 'winbar': evaluated at each redraw, so it fits the window's width as it is then.
M.EXPR = "%!v:lua.require'agentd.winbar'.window()"

--- The winbar of the chat window being drawn (`g:statusline_winid`).
function M.window()
  local w = vim.g.statusline_winid
  if not w or not api.nvim_win_is_valid(w) then
    return ''
  end
  local id = vim.b[api.nvim_win_get_buf(w)].agentd_chat
  local s = id and require('agentd.client').sessions[id]
  return s and M.text(s, api.nvim_win_get_width(w)) or ''
end

return M
