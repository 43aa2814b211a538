--- Small helpers shared by the plugin's views: workspace-relative paths, session times for people,
--- display-width fitting. No state, no windows.
local M = {}

--- `path` relative to `root` when it lies inside it, else `path` with the home directory as `~`.
---@param path string absolute path
---@param root string? workspace root
function M.relpath(path, root)
  path = vim.fs.normalize(path)
  if root and root ~= '' then
    root = vim.fs.normalize(root)
    local prefix = root == '/' and root or root .. '/'
    if vim.startswith(path, prefix) then
      return path:sub(#prefix + 1)
    end
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- Seconds since the epoch of an RFC 3339 UTC time (`2026-09-01T10:15:30Z`, fractions ignored), or nil.
---@param iso string?
function M.parse_utc(iso)
  if type(iso) ~= 'string' then
    return nil
  end
  local y, mo, d, h, mi, s = iso:match('^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)')
  if not y then
    return nil
  end
  -- days from the civil date (proleptic Gregorian), so no local time zone is involved
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  local a = mo <= 2 and 1 or 0
  local yy, mm = y - a, mo + 12 * a - 3
  local days = d + math.floor((153 * mm + 2) / 5) + 365 * yy + math.floor(yy / 4) - math.floor(yy / 100)
  days = days + math.floor(yy / 400) - 719469
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
end

--- A session time for people: `just now`, `5 min ago`, `3 h ago`, `yesterday 17:02`, else the local date
--- and time (`2026-08-30 17:02`). Unparsable input is returned as it is. `now`: seconds (default: now).
---@param iso string?
---@param now integer?
function M.when(iso, now)
  local t = M.parse_utc(iso)
  if not t then
    return iso or '?'
  end
  now = now or os.time()
  local ago = now - t
  if ago < 60 and ago > -60 then
    return 'just now'
  elseif ago >= 0 and ago < 3600 then
    return ('%d min ago'):format(math.floor(ago / 60))
  elseif ago >= 0 and ago < 6 * 3600 then
    return ('%d h ago'):format(math.floor(ago / 3600))
  end
  local day = os.date('%Y-%m-%d', t)
  if day == os.date('%Y-%m-%d', now) then
    return 'today ' .. os.date('%H:%M', t)
  elseif day == os.date('%Y-%m-%d', now - 86400) then
    return 'yesterday ' .. os.date('%H:%M', t)
  end
  return os.date('%Y-%m-%d %H:%M', t)
end

--- Display width of a string.
function M.width(s)
  return vim.fn.strdisplaywidth(s)
end

--- `s` cut to at most `max` display cells, ending in `…` when cut.
---@param s string
---@param max integer
function M.fit(s, max)
  if max <= 0 then
    return ''
  end
  if M.width(s) <= max then
    return s
  end
  local n = vim.fn.strchars(s)
  while n > 0 and M.width(vim.fn.strcharpart(s, 0, n)) > max - 1 do
    n = n - 1
  end
  return (vim.fn.strcharpart(s, 0, n):gsub('%s+$', '')) .. '…'
end

--- Seconds for people: `4`, `0.5`, `12`.
function M.seconds(n)
  n = tonumber(n) or 0
  if n >= 10 or n == math.floor(n) then
    return ('%d'):format(math.floor(n + 0.5))
  end
  return (('%.1f'):format(n))
end

return M
