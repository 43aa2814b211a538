-- Drives avante.nvim's ACP client (lua/avante/libs/acp_client.lua, the library avante's chat runs on)
-- against `agentd --acp`, headless: initialize, session/new, two mode changes, a prompt whose reads and
-- writes go through avante's fs handlers and whose approvals are answered by option kind, then
-- session/load. Run by tests/acp/test_avante.py with `nvim --headless -u NONE -i NONE -l`; writes what
-- happened to $AGENTD_OUT. $AVANTE_DIR is a checkout of avante.nvim (not part of agentd).
vim.opt.rtp:prepend(os.getenv('AVANTE_DIR'))

local out = { updates = {}, permissions = {}, reads = {}, writes = {}, notes = {}, steps = {} }
vim.notify = function(msg, level)
  table.insert(out.notes, { msg = tostring(msg), level = level })
end

local function finish(err)
  out.error = err
  local f = assert(io.open(os.getenv('AGENTD_OUT'), 'w'))
  f:write(vim.json.encode(out))
  f:close()
  os.exit(err and 1 or 0)
end

local answers = vim.json.decode(os.getenv('AGENTD_ANSWERS') or '[]')

local handlers = {
  on_session_update = function(update)
    table.insert(out.updates, update)
  end,
  on_request_permission = function(tool_call, options, respond)
    local want = table.remove(answers, 1) or 'reject_once'
    local pick
    for _, option in ipairs(options) do
      if option.kind == want then
        pick = option.optionId
      end
    end
    table.insert(out.permissions, { title = tool_call.title, want = want, pick = pick })
    respond(pick)
  end,
  on_read_file = function(path, _line, _limit, ok)
    table.insert(out.reads, path)
    ok(table.concat(vim.fn.readfile(path, 'b'), '\n')) -- 'b': the text as it is, last newline included
  end,
  on_write_file = function(path, content, done)
    table.insert(out.writes, path)
    vim.fn.writefile(vim.split(content, '\n', { plain = true }), path, 'b')
    done(nil)
  end,
}

local ok, err = xpcall(function()
  local ACPClient = require('avante.libs.acp_client')
  local cmd = vim.json.decode(os.getenv('AGENTD_CMD'))
  local client = ACPClient:new({
    command = cmd[1],
    args = vim.list_slice(cmd, 2),
    env = vim.json.decode(os.getenv('AGENTD_ENV')),
    handlers = handlers,
  })
  local ws = vim.fn.getcwd()
  local done = false
  local function step(name, value)
    table.insert(out.steps, name)
    out[name] = value
  end
  client:connect(function(e)
    if e then
      return finish('connect: ' .. vim.inspect(e))
    end
    step('initialize', true)
    client:create_session(ws, {}, function(sid, e2)
      if e2 then
        return finish('session/new: ' .. vim.inspect(e2))
      end
      step('new', sid)
      client:set_mode(sid, 'acceptEdits', function(options, e3)
        step('set_mode', { options = options, err = e3 })
        client:set_mode(sid, 'default', function()
          local prompt = { client:create_text_content(os.getenv('AGENTD_PROMPT')) }
          client:send_prompt(sid, prompt, function(result, e4)
            step('prompt', { result = result, err = e4 })
            client:load_session(sid, ws, {}, function(loaded, e5)
              step('load', { result = loaded, err = e5 })
              done = true
            end)
          end)
        end)
      end)
    end)
  end)
  vim.wait(120000, function()
    return done
  end, 50)
  client:stop()
  if not done then
    finish('timed out after: ' .. table.concat(out.steps, ', '))
  end
end, debug.traceback)
finish(not ok and err or nil)
