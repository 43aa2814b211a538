--- Approval texts shown as what will run (issue 9 H20): bidi controls, invisible characters, control
--- characters and look-alike spaces become escapes (`\u202e`, `\u200b`, `\x1b`, `\xa0`), with the table
--- of agentd.protocol.display (generated into protocol.lua), so a command cannot look like another.
--- The same escapes as the daemon's `agentd.text.visible`: `\xNN` below U+0100, `\uNNNN` below U+10000,
--- else `\UNNNNNNNN`; CR is `\r`; tab stays; newline stays unless `one_line` (then `\n`). Bytes that are
--- not UTF-8 are shown as `\xNN`.
local ranges = require('agentd.protocol').escaped_ranges

local M = {}

local function escaped(cp)
  local lo, hi = 1, #ranges
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local r = ranges[mid]
    if cp < r[1] then
      hi = mid - 1
    elseif cp > r[2] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

--- The code point of one UTF-8 sequence, or nil when it is not one.
local function decode(ch)
  local n, b = #ch, ch:byte(1)
  if n == 1 then
    return b < 0x80 and b or nil
  end
  local need = (b >= 0xF0 and 4) or (b >= 0xE0 and 3) or (b >= 0xC0 and 2) or 0
  if need ~= n then
    return nil
  end
  local cp = b % (2 ^ (7 - n))
  for i = 2, n do
    cp = cp * 64 + ch:byte(i) % 64
  end
  return cp
end

local function escape(cp)
  if cp == 13 then
    return '\\r'
  elseif cp < 0x100 then
    return ('\\x%02x'):format(cp)
  elseif cp < 0x10000 then
    return ('\\u%04x'):format(cp)
  end
  return ('\\U%08x'):format(cp)
end

--- `s` with every character of the escaped ranges shown as its escape (non-strings are returned as is).
function M.visible(s, one_line)
  if type(s) ~= 'string' then
    return s
  end
  return (
    s:gsub('[%z\1-\255][\128-\191]*', function(ch)
      local cp = decode(ch)
      if cp == nil then
        return (ch:gsub('.', function(byte)
          return ('\\x%02x'):format(byte:byte())
        end))
      elseif cp == 10 then
        return one_line and '\\n' or ch
      elseif escaped(cp) then
        return escape(cp)
      end
      return ch
    end)
  )
end

return M
