--- Approvals: agentd/session/requestPermission (PROTOCOL.md §6.10), one at a time in arrival order.
---
--- With `approval.ui = 'diff'` (the default) the request opens the approval window (`agentd.review`): the
--- proposed change as a coloured diff, or the command, with a key per option. With `'select'`, or when that
--- window is left with `s` or closed, `vim.ui.select` asks instead: the details are shown first in a scratch
--- window (`agentd://approval/<toolCallId>`). Either way the options are the ones the request carries, and
--- dismissing answers `reject_once` (a Deny, never `cancelled`).
local config = require('agentd.config')
local diff = require('agentd.diff')

local M = {}

local api = vim.api
local visible = require('agentd.visible').visible

--- Queue of approvals waiting for the UI; `current` is the one on screen.
local queue = {}
local current = nil

local function root_of(params)
  local s = require('agentd.client').sessions[params.sessionId]
  return s and (s.cwd or s.root) or nil
end

local function stat(content)
  local st = diff.stat(content)
  return st and (' (%s lines)'):format(st) or ''
end

--- The lines shown before the question: title, description, then the diff or the command, each line
--- with bidi controls and invisible characters escaped (issue 9 H20).
function M.details(params)
  local tc = params.toolCall or {}
  local meta = params._meta and params._meta.agentd or {}
  local lines = { 'agentd asks: ' .. (meta.title or tc.title or tc.toolCallId or '?') }
  if meta.description then
    lines[#lines + 1] = meta.description
  end
  lines[#lines + 1] = ''
  local shown = false
  for _, c in ipairs(tc.content or {}) do
    if c.type == 'diff' and type(c.path) == 'string' then
      vim.list_extend(lines, (diff.unified(c, root_of(params))))
      shown = true
    elseif c.type == 'content' and type(c.content) == 'table' and c.content.type == 'text' then
      vim.list_extend(lines, vim.split(c.content.text or '', '\n', { plain = true }))
      shown = true
    end
  end
  if not shown and tc.rawInput ~= nil then
    vim.list_extend(lines, vim.split(vim.inspect(tc.rawInput), '\n', { plain = true }))
  end
  for i, line in ipairs(lines) do
    lines[i] = visible(line, true)
  end
  return lines
end

--- The select prompt: what the call does, in one line (for a command: where it runs).
function M.prompt_text(params)
  local tc = params.toolCall or {}
  local meta = params._meta and params._meta.agentd or {}
  local what = meta.title or tc.title or '?'
  if tc.kind == 'execute' then
    for _, c in ipairs(tc.content or {}) do
      if c.type == 'content' and type(c.content) == 'table' and c.content.type == 'text' then
        local cwd = (c.content.text or ''):match('\n%(cwd (.*)%)%s*$')
        if cwd then
          what = ('%s in %s'):format(what, cwd)
        end
        break
      end
    end
  end
  return visible(('agentd: %s%s. Allow?'):format(what, stat(tc.content)), true)
end

local function show_details(item)
  local lines = M.details(item.params)
  local b = api.nvim_create_buf(false, true)
  local id = item.params.toolCall and item.params.toolCall.toolCallId or tostring(b)
  pcall(api.nvim_buf_set_name, b, 'agentd://approval/' .. id)
  api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'wipe'
  vim.bo[b].modifiable = false
  vim.bo[b].filetype = 'diff'
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.max(1, math.min(#lines, vim.o.lines - 8))
  local ok, w = pcall(api.nvim_open_win, b, false, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 2),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    border = 'rounded',
    title = ' agentd approval ',
    zindex = 60,
  })
  item.buf, item.win = b, ok and w or nil
end

local function close_details(item)
  require('agentd.review').close(item)
  if item.win and api.nvim_win_is_valid(item.win) then
    api.nvim_win_close(item.win, true)
  end
  if item.buf and api.nvim_buf_is_valid(item.buf) then
    pcall(api.nvim_buf_delete, item.buf, { force = true })
  end
  item.win, item.buf = nil, nil
end

local function finish(item, option)
  if item.done then
    return
  end
  item.done = true
  close_details(item)
  local client = require('agentd.client')
  local s = client.sessions[item.params.sessionId]
  local tc = item.params.toolCall or {}
  if s then
    require('agentd.chat').awaiting(s, tc.toolCallId, false)
    if s.state == 'awaiting_permission' then
      s.state = 'running'
      s.status = 'Thinking'
    end
    client.render(s)
  end
  item.answer = { outcome = { outcome = 'selected', optionId = option and option.optionId or 'reject_once' } }
  if current == item then
    current = nil
  end
  item.resume()
  vim.schedule(M.pump)
end

--- Neovim's own vim.ui.select (inputlist) redraws over floating windows: with it, the details go into
--- the prompt, right above the list.
local function builtin_select()
  local info = debug.getinfo(vim.ui.select, 'S')
  return info ~= nil and info.source:match('vim/ui%.lua$') ~= nil
end

local PROMPT_MAX_LINES = 40

local function long_prompt(item)
  local lines = M.details(item.params)
  if #lines > PROMPT_MAX_LINES then
    local more = #lines - PROMPT_MAX_LINES
    lines = vim.list_slice(lines, 1, PROMPT_MAX_LINES)
    lines[#lines + 1] = ('… %d more lines'):format(more)
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = M.prompt_text(item.params)
  return table.concat(lines, '\n')
end

local function ask_select(item)
  current = item
  show_details(item)
  local options = item.params.options or {}
  local builtin = builtin_select() and #vim.api.nvim_list_uis() > 0
  vim.ui.select(options, {
    prompt = builtin and long_prompt(item) or M.prompt_text(item.params),
    kind = 'agentd.approval',
    format_item = function(o)
      return o.name or o.optionId
    end,
  }, function(choice)
    -- scheduled: the default vim.ui.select answers synchronously, before the handler has yielded
    vim.schedule(function()
      finish(item, choice)
    end)
  end)
end

local function ask(item)
  if (config.options.approval or {}).ui == 'select' then
    return ask_select(item)
  end
  current = item
  local ok, err = pcall(require('agentd.review').open, item, root_of(item.params), function(option)
    finish(item, option)
  end, function()
    if not item.done and current == item then
      require('agentd.review').close(item)
      ask_select(item)
    end
  end)
  if not ok then -- no room for a window (e.g. in the command-line window): ask with the list
    require('agentd.client').notify('approval window: ' .. tostring(err), vim.log.levels.WARN)
    ask_select(item)
  end
end

--- Shows the next queued approval, if none is on screen.
function M.pump()
  while not current and #queue > 0 do
    local item = table.remove(queue, 1)
    if not item.done then
      ask(item)
    end
  end
end

--- The tool call ended (answered elsewhere, timed out, or the turn was cancelled): drop its approval.
function M.withdraw(tool_call_id)
  for _, item in ipairs(vim.list_extend(vim.list_slice(queue), { current })) do
    if item and not item.done and item.params.toolCall and item.params.toolCall.toolCallId == tool_call_id then
      item.withdrawn = true
      finish(item, nil)
    end
  end
end

--- The handler of agentd/session/requestPermission (runs in the coroutine Neovim gives server requests).
function M.handle(_, params, ctx)
  local client = require('agentd.client')
  local root = nil
  local c = vim.lsp.get_client_by_id(ctx.client_id)
  if c then
    root = client.client_root(c)
  end
  local s = client.session(params.sessionId, ctx.client_id, root)
  local tc = params.toolCall or {}
  s.state = 'awaiting_permission'
  s.status = 'Waiting for approval: ' .. visible(tc.title or '?', true)
  require('agentd.chat').awaiting(s, tc.toolCallId, true)
  client.render(s)
  client.event('AgentdApproval', { sessionId = s.id, toolCallId = tc.toolCallId })

  local co, is_main = coroutine.running()
  local item = { params = params }
  if co and not is_main then
    item.resume = function()
      coroutine.resume(co)
    end
    table.insert(queue, item)
    vim.schedule(M.pump)
    coroutine.yield()
  else -- not in a coroutine (should not happen with Neovim's RPC client): block until answered
    item.resume = function() end
    table.insert(queue, item)
    M.pump()
    local timeout = ((params._meta and params._meta.agentd or {}).timeoutS or 120) * 1000
    vim.wait(timeout, function()
      return item.done == true
    end, 10)
  end
  return item.answer or { outcome = { outcome = 'selected', optionId = 'reject_once' } }
end

return M
