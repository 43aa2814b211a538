--- Finding and starting the agentd client, the sessions it holds, and the requests the commands send.
---
--- One agentd client (one daemon) per workspace root; one active session per root (PROTOCOL.md §6.1).
--- Session state is kept here and drawn by `agentd.chat` (the chat buffer) and `agentd.plan` (the plan
--- window). Handlers for agentd's notifications and requests are wired in `lsp/agentd.lua`.
local config = require('agentd.config')
local methods = require('agentd.protocol').methods

local M = {}

local levels = vim.log.levels
local DEFAULT_MARKERS = { '.agentd', '.git', '.hg', '.jj' }
local READY_TIMEOUT_MS = 20000

---@class agentd.Session
---@field id string
---@field client_id integer?
---@field root string workspace root (the client's root_dir)
---@field cwd string the session's stored cwd
---@field title string?
---@field state string 'idle'|'loading'|'running'|'awaiting_permission'
---@field status string? the latest progress message of the turn
---@field stop_reason string?
---@field turn integer prompts sent from this editor
---@field usage table? the latest usage_update
---@field plan table? { entries = PlanEntry[], snapshot = string? }
---@field mode string?
---@field modes table?
---@field detached boolean? the daemon that held it exited
---@field chat table the chat model (agentd.chat)

---@type table<string, agentd.Session>
M.sessions = {}
---@type table<string, string> root -> active sessionId
M.active = {}
---@type table<string, string> progress token -> sessionId
M.tokens = {}
--- Session resolution in progress per root (a load or a new session): the callbacks waiting for it.
--- Commands issued meanwhile wait here instead of resolving (loading, creating) a second time.
---@type table<string, fun(s: agentd.Session, c: vim.lsp.Client)[]>
M.resolving = {}
---@type table<integer, table> client id -> the session announced by `agentd --resume`, not yet loaded
M.announced = {}

--- Joins (or starts) the resolution of `root`'s session; cb runs once it is resolved.
local function join(root, cb)
  local waiting = M.resolving[root]
  if not waiting then
    waiting = {}
    M.resolving[root] = waiting
  end
  if cb then
    waiting[#waiting + 1] = cb
  end
end

--- Ends the resolution of `root`'s session: the waiting callbacks run with it (dropped on failure).
local function settle(root, s, c)
  local waiting = M.resolving[root] or {}
  M.resolving[root] = nil
  if s then
    for _, f in ipairs(waiting) do
      f(s, c)
    end
  end
end

local function notify(msg, level)
  vim.notify('agentd: ' .. msg, level or levels.INFO)
end
M.notify = notify

--- The message of an LSP error (agentd's messages say what to do next, PROTOCOL.md §11).
function M.error_message(err)
  if type(err) == 'table' then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

--- Fires `User {pattern}` with `data` (see `:help agentd-events`).
function M.event(pattern, data)
  vim.api.nvim_exec_autocmds('User', { pattern = pattern, modeline = false, data = data })
end

local function chat()
  return require('agentd.chat')
end

local function plan()
  return require('agentd.plan')
end

--- Redraws the chat buffer and the plan window of a session.
function M.render(s)
  chat().render(s)
end

local function normalize(path)
  return vim.fs.normalize(path)
end

local function under(path, root)
  return path == root or vim.startswith(path, root == '/' and root or root .. '/')
end

--- The workspace root for a buffer: the buffer's session root for agentd buffers, the nearest root
--- marker above a file buffer, else the current directory.
function M.root_for(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local own = vim.b[bufnr].agentd_root
  if own then
    return own
  end
  local markers = DEFAULT_MARKERS
  local ok, cfg = pcall(function()
    return vim.lsp.config.agentd
  end)
  if ok and type(cfg) == 'table' and type(cfg.root_markers) == 'table' then
    markers = cfg.root_markers
  end
  local root
  if vim.bo[bufnr].buftype == '' and vim.api.nvim_buf_get_name(bufnr) ~= '' then
    root = vim.fs.root(bufnr, markers)
  end
  return normalize(root or vim.fn.getcwd())
end

local function client_roots(c)
  local roots = {}
  if c.root_dir then
    roots[#roots + 1] = normalize(c.root_dir)
  end
  for _, wf in ipairs(c.workspace_folders or {}) do
    roots[#roots + 1] = normalize(vim.uri_to_fname(wf.uri))
  end
  return roots
end

--- The root a client was started for.
function M.client_root(c)
  return client_roots(c)[1] or normalize(vim.fn.getcwd())
end

--- The running agentd client for a workspace root, if any.
function M.get_client(root)
  for _, c in ipairs(vim.lsp.get_clients({ name = 'agentd' })) do
    if not c:is_stopped() then
      for _, r in ipairs(client_roots(c)) do
        if r == root then
          return c
        end
      end
    end
  end
end

--- Attaches every loaded file buffer under `root` to the client, so agentd sees unsaved text and edits
--- open files through workspace/applyEdit (PROTOCOL.md §8).
function M.attach_buffers(client_id, root)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= '' and under(normalize(name), root) then
        vim.lsp.buf_attach_client(b, client_id)
      end
    end
  end
end

--- BufReadPost/BufNewFile: attach a file buffer to the agentd client of its workspace.
function M.on_buf(bufnr)
  if vim.bo[bufnr].buftype ~= '' then
    return
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' then
    return
  end
  name = normalize(name)
  for _, c in ipairs(vim.lsp.get_clients({ name = 'agentd' })) do
    if not c:is_stopped() then
      for _, r in ipairs(client_roots(c)) do
        if under(name, r) then
          vim.lsp.buf_attach_client(bufnr, c.id)
          break
        end
      end
    end
  end
end

--- Starts the daemon for `root` with the resolved `vim.lsp.config.agentd`.
function M.start(root)
  local cfg = vim.lsp.config.agentd
  if type(cfg) ~= 'table' then
    return nil, 'no LSP configuration named agentd: is editor-clients/nvim on the runtimepath?'
  end
  cfg = vim.deepcopy(cfg)
  cfg.name = 'agentd'
  cfg.root_dir = root
  cfg.workspace_folders = nil
  if type(cfg.cmd) == 'table' and vim.fn.executable(cfg.cmd[1]) == 0 then
    return nil, ('%s is not executable; install agentd or set cmd in require("agentd").setup()'):format(cfg.cmd[1])
  end
  require('agentd.log').watch(cfg.cmd)
  local id = vim.lsp.start(cfg, { attach = false, silent = true })
  if not id then
    return nil, 'could not start ' .. table.concat(type(cfg.cmd) == 'table' and cfg.cmd or { '?' }, ' ')
  end
  M.attach_buffers(id, root)
  return vim.lsp.get_client_by_id(id)
end

--- Calls cb(client) once the client is initialized, or cb(nil, err).
function M.when_ready(c, cb)
  if c.initialized then
    return cb(c)
  end
  local timer = assert(vim.uv.new_timer())
  local waited, done = 0, false
  timer:start(
    10,
    10,
    vim.schedule_wrap(function()
      if done then
        return
      end
      waited = waited + 10
      local failed = c:is_stopped() or waited > READY_TIMEOUT_MS
      if c.initialized or failed then
        done = true
        timer:stop()
        timer:close()
        if c.initialized and not c:is_stopped() then
          cb(c)
        else
          cb(nil, 'agentd did not start; see :checkhealth agentd and :LspLog')
        end
      end
    end)
  )
end

--- Runs cb(client, root) with a ready client for the workspace of the current buffer (starting one);
--- fail() if there is none.
function M.with_client(cb, root, fail)
  root = root or M.root_for(0)
  local c = M.get_client(root)
  if not c then
    local err
    c, err = M.start(root)
    if not c then
      notify(err, levels.ERROR)
      return fail and fail()
    end
  end
  M.when_ready(c, function(ready, err)
    if not ready then
      notify(err, levels.ERROR)
      return fail and fail()
    end
    cb(ready, root)
  end)
end

--- Sends a request; cb(err, result).
function M.request(c, method, params, cb)
  local ok = c:request(method, params, function(err, result)
    cb(err, result)
  end)
  if not ok then
    cb({ code = -32603, message = 'agentd is not running' }, nil)
  end
end

--- The session object for an id (created on first sight).
function M.session(id, client_id, root)
  local s = M.sessions[id]
  if not s then
    s = {
      id = id,
      root = root,
      cwd = root,
      state = 'idle',
      turn = 0,
      chat = chat().new_model(),
    }
    M.sessions[id] = s
  end
  if client_id then
    if s.client_id ~= client_id then
      s.detached = false
    end
    s.client_id = client_id
  end
  s.root = s.root or root
  s.cwd = s.cwd or root
  return s
end

--- The active session of a root (default: the current buffer's).
function M.active_session(root)
  local id = M.active[root or M.root_for(0)]
  return id and M.sessions[id] or nil
end

--- The client holding a session, if it is still running.
function M.client_of(s)
  local c = s and s.client_id and vim.lsp.get_client_by_id(s.client_id)
  if c and not c:is_stopped() and not s.detached then
    return c
  end
end

local function idle(s)
  return s.state == 'idle'
end

--- Makes `s` the active session of its root. The previous one, if idle, is closed (its lock released).
function M.set_active(root, s, prev)
  if prev == nil then
    prev = M.active_session(root)
  end
  M.active[root] = s.id
  if prev and prev.id ~= s.id and idle(prev) then
    local pc = M.client_of(prev)
    if pc then
      M.request(pc, methods.session_close, { sessionId = prev.id }, function() end)
    end
    prev.detached = true
  end
  if s.plan then
    plan().show(s)
  else
    plan().render(s)
  end
end

--- agentd/session/new for the root; cb(session, client). Commands waiting for the root's session get it.
function M.new(c, root, cb)
  join(root, cb)
  M.request(c, methods.session_new, { cwd = root }, function(err, res)
    if err then
      settle(root, nil)
      return notify(M.error_message(err), levels.ERROR)
    end
    local s = M.session(res.sessionId, c.id, root)
    s.cwd = root
    s.modes = res.modes
    s.mode = res.modes and res.modes.currentModeId or nil
    M.set_active(root, s)
    M.event('AgentdSession', { sessionId = s.id, action = 'new' })
    settle(root, s, c)
  end)
end

--- agentd/session/load (the replay arrives as updates before the answer); cb(session, client). Commands
--- issued during the load wait for it (a prompt is sent once the session is loaded).
function M.load(c, root, item, cb)
  join(root, cb)
  local prev = M.active_session(root)
  local s = M.session(item.sessionId, c.id, root)
  M.active[root] = s.id
  s.cwd = item.cwd or s.cwd or root
  s.title = item.title or s.title
  s.state = 'loading'
  s.status = 'Loading'
  s.stop_reason = nil
  s.retry = nil
  s.plan = nil
  s.usage = nil -- the replay ends with the stored context use and cost
  chat().reset(s)
  chat().open(s)
  plan().render(s)
  M.request(c, methods.session_load, { sessionId = s.id, cwd = s.cwd }, function(err, res)
    s.state = 'idle'
    s.status = nil
    if err then
      s.detached = true
      M.active[root] = prev and prev.id or nil
      chat().note(s, 'load failed: ' .. M.error_message(err))
      M.render(s)
      settle(root, nil)
      return notify(M.error_message(err), levels.ERROR)
    end
    s.detached = false -- a session this daemon closed (:AgentdNew) and loaded again is held again
    s.status = nil
    s.modes = res and res.modes or s.modes
    s.mode = s.modes and s.modes.currentModeId or s.mode
    M.set_active(root, s, prev)
    M.render(s)
    M.event('AgentdSession', { sessionId = s.id, action = 'load' })
    settle(root, s, c)
  end)
end

local function unlocked(item)
  local meta = item._meta and item._meta.agentd
  return not (meta and type(meta.lockedBy) == 'table')
end

--- Runs cb(session, client) with the active session of the current workspace: the active one; the
--- active one reloaded if its daemon exited; with `auto_resume` the newest unlocked one; else a new one.
--- Resolution is serialised per root: commands issued while it runs (or while a load runs) wait for it.
--- `opts.existing`: only an existing session (no load or new session; says so when there is none).
function M.with_session(cb, opts)
  opts = opts or {}
  local root = M.root_for(0)
  if M.resolving[root] then
    return join(root, cb)
  end
  local cur = M.active_session(root)
  local cc = cur and M.client_of(cur)
  if cur and cc and cc.initialized then
    return cb(cur, cc)
  end
  if opts.existing and not cur then
    return notify('no session in this workspace yet; :Agentd {prompt} starts one')
  end
  join(root, cb)
  M.with_client(
    function(c)
      local s = M.active_session(root)
      -- `agentd --resume`: its load (scheduled by on_init) resolves the session; so does a running load
      if M.announced[c.id] or (s and s.state == 'loading' and s.client_id == c.id) then
        return
      end
      if s and s.client_id == c.id and not s.detached then
        return settle(root, s, c)
      end
      if s and s.detached and s.id then
        return M.load(c, root, { sessionId = s.id, cwd = s.cwd, title = s.title })
      end
      if opts.existing then
        settle(root, nil)
        return notify('no session in this workspace yet; :Agentd {prompt} starts one')
      end
      if not config.options.auto_resume then
        return M.new(c, root)
      end
      M.request(c, methods.session_list, { cwd = root }, function(err, res)
        for _, item in ipairs((not err and res and res.sessions) or {}) do
          if unlocked(item) then
            return M.load(c, root, item)
          end
        end
        M.new(c, root)
      end)
    end,
    root,
    function()
      settle(root, nil)
    end
  )
end

--- Builds the prompt's content blocks: the text, plus the selected lines as a `resource` whose URI names
--- them (`file:///…/app.py#L10-L20`, so the model knows where they are).
function M.blocks(text, sel)
  local blocks = { { type = 'text', text = text } }
  if sel and vim.api.nvim_buf_is_valid(sel.bufnr) then
    local lines = vim.api.nvim_buf_get_lines(sel.bufnr, sel.line1 - 1, sel.line2, false)
    local name = vim.api.nvim_buf_get_name(sel.bufnr)
    if name ~= '' then
      local range = sel.line1 == sel.line2 and ('#L%d'):format(sel.line1) or ('#L%d-L%d'):format(sel.line1, sel.line2)
      blocks[2] = {
        type = 'resource',
        resource = { uri = vim.uri_from_fname(name) .. range, text = table.concat(lines, '\n') .. '\n' },
      }
    end
  end
  return blocks
end

--- The URIs of a prompt's attachments (what the chat shows under the prompt).
local function attachments(blocks)
  local uris = {}
  for _, b in ipairs(blocks) do
    if b.type == 'resource' then
      uris[#uris + 1] = b.resource.uri
    end
  end
  return uris
end

--- Sends a prompt to the active session (creating or resuming one first); `on_sent()` runs once it went
--- out (not when a turn is still running).
function M.prompt(text, sel, on_sent)
  local blocks = M.blocks(text, sel)
  M.with_session(function(s, c)
    if not idle(s) then
      return notify('a prompt is still running in this session; wait for it or run :AgentdCancel', levels.WARN)
    end
    if on_sent then
      on_sent()
    end
    s.turn = s.turn + 1
    local token = ('agentd-nvim-%s-%d'):format(s.id, s.turn)
    M.tokens[token] = s.id
    s.state = 'running'
    s.status = 'Thinking'
    s.stop_reason = nil
    if not s.title then -- provisional, as agentd makes it; its session_info_update replaces it
      local first = vim.trim((text:match('^[^\n]*') or ''):gsub('%s+', ' '))
      s.title = vim.fn.strchars(first) > 80 and (vim.fn.strcharpart(first, 0, 77) .. '...') or first
    end
    s.retry = nil
    chat().add_user(s, text, attachments(blocks))
    chat().open(s)
    M.event('AgentdTurnStart', { sessionId = s.id })
    M.request(
      c,
      methods.session_prompt,
      { sessionId = s.id, prompt = blocks, workDoneToken = token },
      function(err, res)
        M.tokens[token] = nil
        s.state = 'idle'
        if err then
          s.stop_reason = 'error'
          s.status = M.error_message(err)
          chat().note(s, 'error: ' .. M.error_message(err))
          notify(M.error_message(err), levels.ERROR)
        else
          s.stop_reason = res.stopReason
        end
        chat().end_turn(s)
        M.event('AgentdTurnEnd', {
          sessionId = s.id,
          stopReason = s.stop_reason,
          error = err and M.error_message(err) or nil,
        })
      end
    )
  end)
end

--- :AgentdNew. The workspace's session resolution starts at once, before the daemon is ready, so a
--- command issued right after (`:Agentd …`) waits for the new session instead of loading the newest one.
--- A resolution already running (a load) finishes first.
function M.new_session(cb)
  local root = M.root_for(0)
  if M.resolving[root] then
    return join(root, function()
      M.new_session(cb)
    end)
  end
  join(root, function(s, cl)
    chat().open(s)
    M.render(s)
    if cb then
      cb(s, cl)
    end
  end)
  M.with_client(
    function(c)
      M.new(c, root)
    end,
    root,
    function()
      settle(root, nil)
    end
  )
end

--- One line of the :AgentdSessions picker. `current`: the id of the session this editor has open in the
--- workspace (marked "current", not as open in the daemon's pid).
local function fmt_item(item, current)
  local meta = item._meta and item._meta.agentd or {}
  local parts = { item.title or '(untitled)' }
  local info = {}
  if item.updatedAt then
    info[#info + 1] = require('agentd.util').when(item.updatedAt)
  end
  if meta.turns then
    info[#info + 1] = ('%d turn%s'):format(meta.turns, meta.turns == 1 and '' or 's')
  end
  if current ~= nil and item.sessionId == current then
    info[#info + 1] = 'current'
  elseif type(meta.lockedBy) == 'table' then
    info[#info + 1] = ('open in pid %s'):format(tostring(meta.lockedBy.pid))
  end
  if #info > 0 then
    parts[#parts + 1] = '(' .. table.concat(info, ', ') .. ')'
  end
  return table.concat(parts, ' ')
end
M.format_session_item = fmt_item

--- :AgentdSessions: pick a session of the workspace and load it.
function M.pick_session(cb)
  M.with_client(function(c, root)
    M.request(c, methods.session_list, { cwd = root }, function(err, res)
      if err then
        return notify(M.error_message(err), levels.ERROR)
      end
      local items = res and res.sessions or {}
      if #items == 0 then
        return notify('no sessions for ' .. root .. ' yet; :Agentd {prompt} starts one')
      end
      local mine = M.active_session(root)
      local current = mine and M.client_of(mine) == c and mine.id or nil
      vim.ui.select(items, {
        prompt = 'agentd sessions (' .. vim.fn.fnamemodify(root, ':~') .. ')',
        kind = 'agentd.session',
        format_item = function(item)
          return fmt_item(item, current)
        end,
      }, function(item)
        if not item then
          return
        end
        local cur = M.active_session(root)
        if cur and cur.id == item.sessionId and M.client_of(cur) then
          chat().open(cur)
          return cb and cb(cur, c)
        end
        M.load(c, root, item, cb)
      end)
    end)
  end)
end

--- :AgentdRestart: stops the workspace's daemon (a running turn is cancelled; its history stays valid) and
--- starts it again; the active session is loaded again and its chat shown. `cb(session?, client)`.
function M.restart(cb)
  local root = M.root_for(0)
  local function start()
    local s = M.active_session(root)
    if s then
      s.detached = true
      return M.with_session(function(s2, c2)
        chat().open(s2)
        if cb then
          cb(s2, c2)
        end
      end)
    end
    M.with_client(function(c2)
      if cb then
        cb(nil, c2)
      end
    end, root)
  end
  local c = M.get_client(root)
  if not c then
    return start()
  end
  local id = c.id
  c:stop()
  local waited = 0
  local timer = assert(vim.uv.new_timer())
  timer:start(
    20,
    20,
    vim.schedule_wrap(function()
      waited = waited + 20
      if waited == 3000 and not c:is_stopped() then
        c:stop(true) -- shutdown went unanswered: kill it
      end
      local gone = c:is_stopped() and vim.lsp.get_client_by_id(id) == nil
      if gone or waited >= 10000 then
        timer:stop()
        timer:close()
        if gone then
          start()
        else
          notify('agentd did not stop; see :LspLog', levels.ERROR)
        end
      end
    end)
  )
end

--- :AgentdCancel
function M.cancel()
  local s = M.active_session()
  local c = s and M.client_of(s)
  if not s or not c or idle(s) then
    return notify('no running prompt to cancel')
  end
  c:notify(methods.session_cancel, { sessionId = s.id })
  s.status = 'Cancelling'
  M.render(s)
end

--- :AgentdTodos: fetch the current todos and show them in the plan window.
function M.todos(cb)
  M.with_session(function(s, c)
    M.request(c, methods.session_todos, { sessionId = s.id }, function(err, res)
      if err then
        return notify(M.error_message(err), levels.ERROR)
      end
      local map = { done = 'completed' }
      local entries = {}
      for _, t in ipairs(res.todos or {}) do
        entries[#entries + 1] = { content = t.content, status = map[t.status] or t.status }
      end
      s.plan = { entries = entries, snapshot = res.snapshot }
      plan().show(s, { force = true })
      if cb then
        cb(s, res)
      end
    end)
  end, { existing = true })
end

--- :AgentdStatus
function M.status(cb)
  M.with_session(function(s, c)
    M.request(c, methods.session_status, { sessionId = s.id }, function(err, res)
      if err then
        return notify(M.error_message(err), levels.ERROR)
      end
      if cb then
        return cb(s, res)
      end
      local t = res.totals or {}
      local ctx = res.context or {}
      local cost = res.costEstimate and (' · ~$%.4f'):format(res.costEstimate.amount) or ''
      local files = {}
      for _, f in ipairs(res.instructions or {}) do
        files[#files + 1] = f.loadedBytes < f.bytes
            and ('%s (cut at %d of %d bytes)'):format(f.path, f.loadedBytes, f.bytes)
          or f.path
      end
      local instructions = ' · instructions: ' .. (#files > 0 and table.concat(files, ', ') or 'none')
      notify(
        ('%s · %s · %s/%s · context %s/%s tokens · %s requests (in=%s out=%s cache_read=%s cache_write=%s)%s%s'):format(
          s.title or s.id,
          res.state or '?',
          res.provider or '?',
          res.model or '?',
          tostring(ctx.usedTokens),
          tostring(ctx.windowTokens),
          tostring(t.requests),
          tostring(t.inputTokens),
          tostring(t.outputTokens),
          tostring(t.cacheReadTokens),
          tostring(t.cacheWriteTokens),
          cost,
          instructions
        )
      )
    end)
  end, { existing = true })
end

--- :AgentdMode {modeId}
function M.set_mode(mode_id)
  M.with_session(function(s, c)
    M.request(c, methods.session_set_mode, { sessionId = s.id, modeId = mode_id }, function(err)
      if err then
        return notify(M.error_message(err), levels.ERROR)
      end
      s.mode = mode_id
      M.render(s)
    end)
  end, { existing = true })
end

--- After a tool wrote to disk (a file that is not open, or a command), unmodified buffers showing those
--- files are reloaded (`:checktime`; with 'autoread' silently, and the reload is undoable). Modified
--- buffers are left alone: Neovim asks about them the next time it checks.
function M.reload_changed(s, t)
  if not t or (t.tool_kind ~= 'edit' and t.tool_kind ~= 'execute') then
    return
  end
  local paths = {}
  for _, loc in ipairs(type(t.locations) == 'table' and t.locations or {}) do
    if type(loc.path) == 'string' then
      paths[normalize(loc.path)] = true
    end
  end
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' and not vim.bo[b].modified then
      local name = normalize(vim.api.nvim_buf_get_name(b))
      local hit = t.tool_kind == 'execute' and under(name, s.root) or paths[name]
      if hit and name ~= '' then
        pcall(vim.cmd, 'silent! checktime ' .. b)
      end
    end
  end
end

-- Handlers (wired in lsp/agentd.lua) ------------------------------------------------------------

local function client_root_by_id(client_id)
  local c = vim.lsp.get_client_by_id(client_id)
  return c and M.client_root(c) or normalize(vim.fn.getcwd())
end

--- agentd/session/update (PROTOCOL.md §7).
function M.on_update(_, params, ctx)
  if type(params) ~= 'table' or type(params.update) ~= 'table' then
    return
  end
  local s = M.session(params.sessionId, ctx.client_id, client_root_by_id(ctx.client_id))
  local u = params.update
  local kind = u.sessionUpdate
  local meta = type(params._meta) == 'table' and params._meta.agentd or nil
  local replay = type(meta) == 'table' and meta.replay == true
  if kind == 'retry' then
    s.retry = u
    chat().retry(s, u)
  elseif s.retry and not replay then
    s.retry = nil -- the turn moved on
  end
  if kind == 'agent_message_chunk' or kind == 'agent_thought_chunk' or kind == 'user_message_chunk' then
    chat().chunk(s, u)
  elseif kind == 'tool_call' or kind == 'tool_call_update' then
    chat().tool(s, u)
    if not replay and kind == 'tool_call_update' and u.status == 'in_progress' then
      local t = s.chat.tools[u.toolCallId]
      s.status = 'Running: ' .. (t and t.title or u.toolCallId)
      if s.state == 'awaiting_permission' then
        s.state = 'running'
      end
    end
    if u.status == 'completed' or u.status == 'failed' then
      require('agentd.approval').withdraw(u.toolCallId)
    end
    if not replay and u.status == 'completed' then
      M.reload_changed(s, s.chat.tools[u.toolCallId])
    end
  elseif kind == 'plan' then
    local plan_meta = u._meta and u._meta.agentd or {}
    s.plan = { entries = u.entries or {}, snapshot = plan_meta.snapshot }
    plan().show(s)
  elseif kind == 'usage_update' then
    s.usage = u
  elseif kind == 'session_info_update' then
    if u.title ~= nil then
      s.title = u.title
    end
    if u.updatedAt ~= nil then
      s.updated_at = u.updatedAt
    end
  elseif kind == 'current_mode_update' then
    s.mode = u.currentModeId
  end
  if kind == 'agent_message_chunk' or kind == 'agent_thought_chunk' or kind == 'user_message_chunk' then
    chat().render_soon(s) -- coalesced: a long answer streams in many chunks
  else
    M.render(s)
  end
  M.event('AgentdUpdate', { sessionId = s.id, update = u, replay = replay })
end

--- $/progress: Neovim's handler (LspProgress, vim.lsp.status()), then the turn status (PROTOCOL.md §10.1).
function M.on_progress(err, result, ctx)
  local builtin = vim.lsp.handlers['$/progress']
  if builtin then
    builtin(err, result, ctx)
  end
  local id = result and M.tokens[result.token]
  local s = id and M.sessions[id]
  local value = result and result.value
  if s and type(value) == 'table' and value.message then
    s.status = value.message
    if value.kind == 'end' then
      s.last_end = value.message
    end
    M.render(s)
  end
end

local function edited_uris(edit)
  local uris = {}
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument and change.textDocument.uri then
      uris[#uris + 1] = change.textDocument.uri
    elseif change.uri then
      uris[#uris + 1] = change.uri
    elseif change.newUri then
      uris[#uris + 1] = change.newUri
    end
  end
  for uri in pairs(edit.changes or {}) do
    uris[#uris + 1] = uri
  end
  return uris
end

--- The loaded buffer of a file URI (by name, then by resolved path), without creating one.
local function loaded_buf(uri)
  local fname = normalize(vim.uri_to_fname(uri))
  local real = vim.uv.fs_realpath(fname)
  local by_real
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= '' then
        name = normalize(name)
        if name == fname then
          return b
        end
        if real and not by_real and vim.uv.fs_realpath(name) == real then
          by_real = b
        end
      end
    end
  end
  return by_real
end

--- Why a versioned edit must not be applied: a document whose buffer changed since the version the
--- edit was computed from (the user typed meanwhile). nil: all current.
local function stale(edit)
  for _, change in ipairs(edit.documentChanges or {}) do
    local td = change.textDocument
    if td and td.uri and type(td.version) == 'number' then
      local bufnr = loaded_buf(td.uri)
      local current = bufnr and vim.lsp.util.buf_versions[bufnr]
      if bufnr and current ~= td.version then
        return ('%s changed in the editor (version %s, the edit is for version %s); not applied'):format(
          vim.uri_to_fname(td.uri),
          tostring(current),
          tostring(td.version)
        )
      end
    end
  end
end
M.stale_edit = stale

--- workspace/applyEdit: refused if a document changed since the edit was computed (the user typed
--- meanwhile: a version mismatch fails the tool call, PROTOCOL.md §8.2; Neovim's built-in handler would
--- only print a warning and report success). Else Neovim's built-in handler (the change lands in the
--- undo history), then a save of every edited buffer when the label starts with `agentd:`
--- (saveAfterApply).
function M.on_apply_edit(err, params, ctx)
  local reason = type(params) == 'table' and type(params.edit) == 'table' and stale(params.edit) or nil
  if reason then
    return { applied = false, failureReason = reason }
  end
  local result = vim.lsp.handlers['workspace/applyEdit'](err, params, ctx)
  if result and result.applied and type(params.label) == 'string' and vim.startswith(params.label, 'agentd:') then
    for _, uri in ipairs(edited_uris(params.edit or {})) do
      local bufnr = vim.uri_to_bufnr(uri)
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].modified then
        local ok, werr = pcall(vim.api.nvim_buf_call, bufnr, function()
          vim.cmd('silent lockmarks update')
        end)
        if not ok then
          notify(('could not save %s after an agentd edit: %s'):format(vim.uri_to_fname(uri), werr), levels.WARN)
        end
      end
    end
  end
  return result
end

--- on_init: remember the server, and load the session announced by `agentd --resume` (PROTOCOL.md §4.2).
function M.on_init(c, result)
  local exp = result and result.capabilities and result.capabilities.experimental
  local resume = type(exp) == 'table' and type(exp.agentd) == 'table' and exp.agentd.resume or nil
  if type(resume) == 'table' and resume.sessionId then
    -- commands issued before the load wait for it (a first :Agentd {prompt} is sent once it is loaded)
    local root = M.client_root(c)
    M.announced[c.id] = resume
    join(root)
    vim.schedule(function()
      M.announced[c.id] = nil
      M.load(c, root, { sessionId = resume.sessionId, cwd = resume.cwd })
    end)
  end
end

--- on_exit: the sessions of that daemon are detached; the next command restarts it and reloads them.
function M.on_exit(code, signal, client_id)
  -- a resolution waiting on this daemon ends (its commands are dropped; the next command restarts it)
  local exiting = vim.lsp.get_client_by_id(client_id)
  local ok_root, exit_root = pcall(function()
    return exiting and exiting.root_dir and normalize(exiting.root_dir) or nil
  end)
  exit_root = ok_root and exit_root or nil
  M.announced[client_id] = nil
  local function run()
    if exit_root and M.resolving[exit_root] then
      local other = M.get_client(exit_root)
      if not other or other.id == client_id then
        settle(exit_root, nil)
      end
    end
    for _, s in pairs(M.sessions) do
      if s.client_id == client_id and not s.detached then
        s.detached = true
        if not idle(s) then
          s.state = 'idle'
          s.stop_reason = 'agentd exited'
          chat().note(s, 'agentd exited during the turn')
          chat().end_turn(s)
        end
        if code ~= 0 or signal ~= 0 then
          s.status = ('agentd exited (code %d, signal %d)'):format(code or -1, signal or 0)
        end
        M.render(s)
      end
    end
    if code ~= 0 or signal ~= 0 then
      notify(
        ('agentd exited (code %d, signal %d); the next :Agentd command restarts it and reloads the session'):format(
          code or -1,
          signal or 0
        ),
        levels.WARN
      )
    end
    M.event('AgentdExit', { client_id = client_id, code = code, signal = signal })
  end
  if vim.in_fast_event() then
    vim.schedule(run)
  else
    run()
  end
end

return M
