--- agentd's stderr in `lsp.log` at its own level.
---
--- Neovim logs every stderr chunk of a language server as `[ERROR]` (vim/lsp/_transport.lua; upstream
--- neovim/neovim#16807, #24784), so agentd's info lines and the accounting lines looked like failures. This
--- wraps `vim.lsp.log.error` once: stderr of a command watched here (agentd's `cmd[1]`) is split into lines;
--- Python log lines (`2026-09-01 10:15:30,123 INFO agentd.lsp: …`) are logged at their level, the
--- operator lines (`[turn · …]`, `[Permission] …`, `[Tool] …`, `[Hook] …`, `[compressed history · …]`) are
--- left out (agentd also sends them as `window/logMessage`, which Neovim logs as INFO), and anything else
--- (a traceback, an error before logging started) stays an ERROR. Runs in libuv callbacks: no vim.api.
local M = {}

local log = require('vim.lsp.log')

---@type table<string, boolean> cmd[1] of agentd clients
local watched = {}
---@type table<string, string> cmd[1] -> the unfinished last line of its stderr
local partial = {}
local original_error = nil

local LEVELS = { DEBUG = 'debug', INFO = 'info', WARNING = 'warn', ERROR = 'error', CRITICAL = 'error' }
local OPERATOR = { '^%[turn · ', '^%[Permission%] ', '^%[Tool%] ', '^%[Hook%] ', '^%[compressed history' }

--- The log function name for one stderr line of agentd: 'debug', 'info', 'warn', 'error', or false (skip).
function M.level_of(line)
  for _, pat in ipairs(OPERATOR) do
    if line:match(pat) then
      return false
    end
  end
  local level = line:match('^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d,%d+ (%u+) [%w%._]+: ')
  return level and LEVELS[level] or 'error'
end

local function route(name, chunk)
  local text = (partial[name] or '') .. chunk
  local lines = vim.split(text, '\n', { plain = true })
  partial[name] = table.remove(lines)
  for _, line in ipairs(lines) do
    local level = line ~= '' and M.level_of(line)
    if level == 'error' then
      original_error('rpc', name, 'stderr', line)
    elseif level then
      log[level]('rpc', name, 'stderr', line)
    end
  end
end

--- Routes the stderr of `cmd` (an agentd command line) by level from now on.
---@param cmd string[]|any
function M.watch(cmd)
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    return
  end
  watched[cmd[1]] = true
  if original_error then
    return
  end
  original_error = log.error
  log.error = function(...)
    local what, name, stream, chunk = ...
    if what == 'rpc' and stream == 'stderr' and watched[name] and type(chunk) == 'string' then
      return route(name, chunk)
    end
    return original_error(...)
  end
end

return M
