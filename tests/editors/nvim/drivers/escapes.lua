-- The plugin's approval texts with hostile characters (issue 9 H20): what `agentd.approval` shows for the
-- params in AGENTD_PARAMS (JSON), `agentd.visible` on AGENTD_SAMPLE (a JSON list of one string), and every
-- code point the escaping changes, as ranges (compared with agentd.protocol.display in pytest).
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)')
local L = dofile(here .. 'lib.lua')
local out = L.out

--- UTF-8 (WTF-8 for surrogates, as Neovim decodes a JSON `\udcff`) of one code point.
local function utf8(cp)
  if cp < 0x80 then
    return string.char(cp)
  elseif cp < 0x800 then
    return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64)
  elseif cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(
    0xF0 + math.floor(cp / 262144),
    0x80 + math.floor(cp / 4096) % 64,
    0x80 + math.floor(cp / 64) % 64,
    0x80 + cp % 64
  )
end

L.run(function()
  vim.opt.rtp:prepend(assert(os.getenv('AGENTD_PLUGIN')))
  local approval = require('agentd.approval')
  local visible = require('agentd.visible').visible
  local params = L.env_json('AGENTD_PARAMS')
  out.details = approval.details(params)
  out.prompt = approval.prompt_text(params)
  local sample = L.env_json('AGENTD_SAMPLE')[1]
  out.sample = visible(sample)
  out.sample_one_line = visible(sample, true)
  local ranges, start = {}, nil
  for cp = 0, 0x10FFFF do
    local ch = utf8(cp)
    local changed = cp ~= 10 and visible(ch) ~= ch
    if changed and not start then
      start = cp
    elseif not changed and start then
      ranges[#ranges + 1] = { start, cp - 1 }
      start = nil
    end
  end
  if start then
    ranges[#ranges + 1] = { start, 0x10FFFF }
  end
  out.ranges = ranges
  out.invalid = visible('ok \255\128 ok')
end)
