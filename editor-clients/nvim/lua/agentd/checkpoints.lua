--- :AgentdRewind and :AgentdFork (`:help agentd-checkpoints`; docs/checkpoints.md, PROTOCOL.md §6.12-§6.14).
---
--- agentd takes a checkpoint of the workspace before each prompt. :AgentdRewind picks one of the session's
--- prompts (vim.ui.select, kind `agentd.checkpoint`), then what goes back (kind `agentd.rewind`: files and
--- conversation, files only, conversation only). A dry run first finds the files you changed after that
--- checkpoint; agentd leaves them as they are unless you confirm (kind `agentd.overwrite`). After a
--- conversation rewind the session is loaded again, so the chat shows the conversation as it is now.
--- :AgentdFork [N] forks the session at prompt N (default: its end) and loads the fork.
local client = require('agentd.client')
local methods = require('agentd.protocol').methods

local M = {}

local levels = vim.log.levels
local WHAT = {
  { label = 'Files and conversation', files = true, conversation = true },
  { label = 'Files only', files = true, conversation = false },
  { label = 'Conversation only', files = false, conversation = true },
}

local function notify(msg, level)
  vim.notify('agentd: ' .. msg, level or levels.INFO)
end

local function fail(err)
  notify(client.error_message(err), levels.ERROR)
end

--- The prompts' checkpoints of the conversation as it is now, newest first.
local function prompts(listing)
  local out = {}
  for _, c in ipairs(listing.checkpoints or {}) do
    if c.before == 'prompt' and c.active then
      table.insert(out, 1, c)
    end
  end
  return out
end

--- One line of the picker: `3  Fix the parser (2 hours ago, 213 files)`.
function M.format(c)
  local text = require('agentd.visible').visible(c.text or '', true)
  local info = { require('agentd.util').when(c.at) }
  if c.error then
    info[#info + 1] = 'files not saved: ' .. c.error
  elseif c.files then
    info[#info + 1] = ('%d files'):format(c.files)
  end
  return ('%s  %s (%s)'):format(c.id, text, table.concat(info, ', '))
end

local function summary(res)
  local parts = {}
  if res.files then
    parts[#parts + 1] = ('%d restored, %d removed'):format(#res.files.restored, #res.files.removed)
    local kept = {}
    for _, k in ipairs(res.files.kept) do
      kept[#kept + 1] = k.path .. ' (' .. k.reason:gsub('_', ' ') .. ')'
    end
    if #kept > 0 then
      parts[#parts + 1] = 'kept ' .. table.concat(kept, ', ')
    end
  end
  if res.conversation then
    parts[#parts + 1] = ('conversation back to %d messages'):format(res.conversation.messagesAfter or 0)
  end
  if res.checkpoint then
    parts[#parts + 1] = 'undo: :AgentdRewind ' .. res.checkpoint .. ' files'
  end
  return ('rewound to %s: %s'):format(res.to, table.concat(parts, '; '))
end

--- Runs the rewind; `cb(result)` after the session shows it.
local function run(s, c, params, cb)
  client.request(c, methods.session_rewind, params, function(err, res)
    if err then
      return fail(err)
    end
    notify(summary(res))
    client.event('AgentdRewind', { sessionId = s.id, to = res.to, result = res })
    if params.conversation then -- the chat shows the conversation as it is now
      return client.load(c, s.root, { sessionId = s.id, cwd = s.cwd, title = s.title }, function()
        if cb then
          cb(res)
        end
      end)
    end
    if cb then
      cb(res)
    end
  end)
end

--- Asks about the files the user changed since the checkpoint (a dry run found them), then rewinds.
local function confirm_and_run(s, c, params, cb)
  if not params.files then
    return run(s, c, params, cb)
  end
  local dry = vim.tbl_extend('force', params, { dryRun = true })
  client.request(c, methods.session_rewind, dry, function(err, res)
    if err then
      return fail(err)
    end
    local mine = {}
    for _, k in ipairs(res.files and res.files.kept or {}) do
      if k.reason == 'changed_by_user' then
        mine[#mine + 1] = k.path
      end
    end
    if #mine == 0 then
      return run(s, c, params, cb)
    end
    local choices = { 'Keep my changes', 'Overwrite them' }
    vim.ui.select(choices, {
      prompt = ('agentd: you changed %s after checkpoint %s'):format(table.concat(mine, ', '), params.to),
      kind = 'agentd.overwrite',
    }, function(choice)
      if not choice then
        return
      end
      params.overwrite = choice == choices[2] and mine or false
      run(s, c, params, cb)
    end)
  end)
end

--- What to rewind: `what` = 'files' | 'conversation' | 'both', else asked.
local function choose_what(what, cb)
  local named = { both = WHAT[1], files = WHAT[2], conversation = WHAT[3] }
  if what and named[what] then
    return cb(named[what])
  end
  vim.ui.select(WHAT, {
    prompt = 'agentd: rewind what?',
    kind = 'agentd.rewind',
    format_item = function(w)
      return w.label
    end,
  }, function(w)
    if w then
      cb(w)
    end
  end)
end

--- :AgentdRewind [ID [files|conversation|both]]: rewind the active session to a checkpoint.
function M.rewind(args, cb)
  local id, what = (args or ''):match('^%s*(%S*)%s*(%S*)')
  client.with_session(function(s, c)
    if s.state ~= 'idle' then
      return notify('a prompt is running; :AgentdCancel it first', levels.WARN)
    end
    local function go(target)
      choose_what(what ~= '' and what or nil, function(w)
        local params = { sessionId = s.id, to = target, files = w.files, conversation = w.conversation }
        confirm_and_run(s, c, params, cb)
      end)
    end
    if id ~= '' then
      return go(id)
    end
    client.request(c, methods.session_checkpoints, { sessionId = s.id }, function(err, listing)
      if err then
        return fail(err)
      end
      local items = prompts(listing)
      if #items == 0 then
        return notify('no checkpoints yet: one is taken before each prompt')
      end
      vim.ui.select(items, {
        prompt = 'agentd: rewind to before which prompt?',
        kind = 'agentd.checkpoint',
        format_item = M.format,
      }, function(item)
        if item then
          go(item.id)
        end
      end)
    end)
  end, { existing = true })
end

--- :AgentdFork [N]: a new session with the history before prompt N (default: all of it), then loaded.
function M.fork(at, cb)
  at = at and vim.trim(at) or ''
  client.with_session(function(s, c)
    local params = { sessionId = s.id }
    if at ~= '' then
      params.at = at
    end
    client.request(c, methods.session_fork, params, function(err, res)
      if err then
        return fail(err)
      end
      notify(('forked %s%s: %s'):format(s.id, res.at and (' at ' .. res.at) or '', res.sessionId))
      client.event('AgentdFork', { sessionId = res.sessionId, forkedFrom = s.id, at = res.at or vim.NIL })
      client.load(c, s.root, { sessionId = res.sessionId, cwd = s.cwd, title = res.title }, function(fs)
        if cb then
          cb(fs, res)
        end
      end)
    end)
  end, { existing = true })
end

return M
