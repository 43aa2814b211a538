-- Drives CodeCompanion.nvim's ACP client against `agentd --acp`, headless, as its users do: a chat, a prompt
-- typed and submitted, approvals answered with the keys CodeCompanion shows. Run by tests/acp/test_codecompanion.py
-- with `nvim --headless -u NONE -i NONE -l`; writes what happened to $AGENTD_OUT.
-- $CODECOMPANION_DIR holds checkouts of codecompanion.nvim and plenary.nvim (not part of agentd).
local cc_dir = os.getenv('CODECOMPANION_DIR')
vim.opt.rtp:prepend(cc_dir .. '/plenary.nvim')
vim.opt.rtp:prepend(cc_dir .. '/codecompanion.nvim')
vim.treesitter.language.register('markdown', 'codecompanion')

local out = { events = {}, approvals = {} }
local function finish(code, err)
  out.error = err
  local f = assert(io.open(os.getenv('AGENTD_OUT'), 'w'))
  f:write(vim.json.encode(out))
  f:close()
  os.exit(code)
end

local answers = vim.json.decode(os.getenv('AGENTD_ANSWERS') or '[]')

local function answer(bufnr)
  local want = table.remove(answers, 1) or 'Reject'
  local key
  for _, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    local k, label = line:match('^%- `(.-)` %- (.+)$')
    if k and label == want then
      key = k
    end
  end
  table.insert(out.approvals, { want = want, key = key })
  for _, map in ipairs(vim.api.nvim_buf_get_keymap(bufnr, 'n')) do
    if map.lhs == key and map.callback then
      map.callback()
    end
  end
end

local ok, err = xpcall(function()
  require('codecompanion').setup({
    adapters = {
      acp = {
        agentd = function()
          return {
            name = 'agentd',
            formatted_name = 'agentd',
            type = 'acp',
            roles = { llm = 'assistant', user = 'user' },
            opts = { vision = false },
            commands = { default = vim.json.decode(os.getenv('AGENTD_CMD')) },
            defaults = { mcpServers = {}, timeout = 20000 },
            parameters = {
              protocolVersion = 1,
              clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
              clientInfo = { name = 'CodeCompanion.nvim', version = '1.0.0' },
            },
            handlers = {
              setup = function()
                return true
              end,
              form_messages = function(self, messages, caps)
                return require('codecompanion.adapters.acp.helpers').form_messages(self, messages, caps)
              end,
              on_exit = function() end,
            },
          }
        end,
      },
    },
    interactions = { chat = { adapter = 'agentd' } },
  })
  local done
  for _, ev in ipairs({ 'RequestFinished', 'ToolApprovalRequested' }) do
    vim.api.nvim_create_autocmd('User', {
      pattern = 'CodeCompanion' .. ev,
      callback = function(a)
        table.insert(out.events, ev)
        if ev == 'RequestFinished' then
          done = true
        else
          vim.schedule(function()
            answer(a.data.bufnr)
          end)
        end
      end,
    })
  end
  local chat = require('codecompanion').chat({ params = { adapter = 'agentd' } })
  for _, prompt in ipairs(vim.json.decode(os.getenv('AGENTD_PROMPTS'))) do
    done = false
    chat:add_buf_message({ role = 'user', content = prompt })
    chat:submit()
    if not vim.wait(60000, function()
      return done
    end, 20) then
      finish(1, 'timeout: ' .. prompt)
    end
  end
  out.buffer = vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false)
  out.title = chat.title
  local conn = chat.acp_connection
  out.config_options = conn and conn._config_options or vim.NIL
  out.session_id = conn and conn.session_id or vim.NIL
  finish(0)
end, debug.traceback)
if not ok then
  finish(1, err)
end
