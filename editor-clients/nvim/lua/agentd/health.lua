--- :checkhealth agentd
local M = {}

local health = vim.health or {}
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local info = health.info or health.report_info
local warn = health.warn or health.report_warn
local error = health.error or health.report_error

local fmt = string.format

--- The resolved LSP config's cmd, initializationOptions and environment (setup() options included).
local function resolved()
  local cfg = {}
  if vim.lsp and vim.lsp.config then
    local got, c = pcall(function()
      return vim.lsp.config.agentd
    end)
    if got and type(c) == 'table' then
      cfg = c
    end
  end
  return cfg.cmd or { 'agentd' }, cfg.init_options or {}, cfg.cmd_env or {}
end

local function getenv(env, name)
  local v = env[name]
  if v == nil then
    v = vim.env[name]
  end
  return v
end

--- agentd's data dir: AGENTD_DATA_DIR, else the platform's user data dir (platformdirs, appname agentd).
local function data_dir(env)
  local d = getenv(env, 'AGENTD_DATA_DIR')
  if d and d ~= '' then
    return d
  end
  local sys = vim.uv.os_uname().sysname
  local home = vim.uv.os_homedir() or vim.env.HOME or ''
  if sys == 'Darwin' then
    return home .. '/Library/Application Support/agentd'
  elseif sys:match('Windows') then
    return (vim.env.LOCALAPPDATA or (home .. '/AppData/Local')) .. '/agentd'
  end
  local xdg = vim.env.XDG_DATA_HOME
  return ((xdg and xdg ~= '') and xdg or (home .. '/.local/share')) .. '/agentd'
end

local function check_nvim()
  local v = vim.version and vim.version() or { major = 0, minor = 0, patch = 0 }
  local version = fmt('%d.%d.%d', v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    ok(fmt('Neovim %s (>= 0.11)', version))
    return true
  end
  error(
    fmt('Neovim %s is too old: agentd needs Neovim >= 0.11 (vim.lsp.config, vim.lsp.enable)', version),
    { 'Upgrade Neovim to 0.11 or later.' }
  )
  return false
end

local function check_executable(cmd)
  if type(cmd) == 'function' then
    info('cmd is a function; not checked')
    return
  end
  local exe = cmd[1]
  local path = exe and vim.fn.exepath(exe) or ''
  if path == '' then
    error(fmt('%s not found (cmd = %s)', tostring(exe), vim.inspect(cmd)), {
      'Install agentd from a clone of its repository: `pipx install .` there puts it on PATH.',
      'Its Python package is agentd-daemon; `pip install agentd` installs an unrelated project.',
      "Or set cmd in require('agentd').setup({ cmd = { '/path/to/agentd' } }), e.g. a venv's bin/agentd.",
    })
    return
  end
  ok(exe == path and fmt('executable found: %s', path) or fmt('executable %s found: %s', exe, path))
  local argv = vim.list_extend(vim.deepcopy(cmd), { '--version' })
  local okrun, res = pcall(function()
    return vim.system(argv, { text = true }):wait(10000)
  end)
  if not okrun then
    error(fmt('%s --version failed: %s', table.concat(cmd, ' '), tostring(res)))
  elseif res.code ~= 0 then
    error(fmt('%s --version exited with %d: %s', table.concat(cmd, ' '), res.code, vim.trim(res.stderr or '')))
  else
    ok(fmt('%s --version: %s', table.concat(cmd, ' '), vim.trim(res.stdout or '')))
  end
end

local function check_key(init, env)
  local provider = init.provider or 'anthropic'
  if provider == 'scripted' then
    ok('provider scripted: no API key needed')
    return
  end
  local var = init.apiKeyEnv or (provider == 'openai' and 'OPENAI_API_KEY' or 'ANTHROPIC_API_KEY')
  local v = getenv(env, var)
  if v and v ~= '' then
    ok(fmt('%s is set (provider %s)', var, provider))
  elseif provider == 'openai' then
    warn(fmt('%s is not set (provider openai)', var), {
      'A local OpenAI-compatible server usually needs no key; a hosted one does.',
      'Set it in the environment that starts Neovim.',
    })
  else
    warn(fmt('%s is not set (provider %s): agentd cannot reach the model', var, provider), {
      fmt('Set %s in the environment that starts Neovim, then restart agentd.', var),
      'agentd reads API keys only from the environment; settings carry only the variable name (apiKeyEnv).',
    })
  end
end

local function check_data_dir(env)
  local dir = data_dir(env)
  local stat = vim.uv.fs_stat(dir)
  if stat then
    if stat.type == 'directory' and vim.fn.filewritable(dir) == 2 then
      ok(fmt('data dir %s is writable', dir))
    else
      error(fmt('data dir %s is not a writable directory', dir), {
        'Fix its permissions, or set data_dir in setup() / AGENTD_DATA_DIR.',
      })
    end
    return
  end
  local parent = vim.fs.dirname(dir)
  while parent and not vim.uv.fs_stat(parent) do
    local up = vim.fs.dirname(parent)
    if up == parent then
      break
    end
    parent = up
  end
  if parent and vim.fn.filewritable(parent) == 2 then
    ok(fmt('data dir %s does not exist yet; agentd will create it (%s is writable)', dir, parent))
  else
    error(fmt('data dir %s cannot be created (%s is not writable)', dir, tostring(parent)), {
      'Set data_dir in setup() or AGENTD_DATA_DIR to a writable directory.',
    })
  end
end

--- The sandbox facts of `agentd doctor --json` (docs/security.md): one OK line when every protection
--- holds, else one warning per missing protection with what to do.
local function check_sandbox(cmd, env)
  if type(cmd) ~= 'table' or vim.fn.exepath(cmd[1] or '') == '' then
    return
  end
  local argv = vim.list_extend(vim.deepcopy(cmd), { 'doctor', '--json', '--workspace', vim.fn.getcwd() })
  local okrun, res = pcall(function()
    return vim.system(argv, { text = true, env = env }):wait(20000)
  end)
  local okjson, rep = false, nil
  if okrun and res.stdout then
    okjson, rep = pcall(vim.json.decode, res.stdout)
  end
  if not okjson or type(rep) ~= 'table' or type(rep.facts) ~= 'table' then
    local why = okrun and vim.trim(res.stderr or '') or tostring(res)
    warn(fmt('agentd doctor failed: %s', why), { 'Run `agentd doctor` in a terminal to see why.' })
    return
  end
  local box = rep.sandbox or {}
  local missing = {}
  for _, f in ipairs(rep.facts) do
    if not f.ok then
      table.insert(missing, f)
    end
  end
  if #missing == 0 then
    ok(fmt('sandbox: %s; every protection holds', rep.facts[1].text))
    return
  end
  for _, f in ipairs(missing) do
    local advice = { 'See docs/security.md, or run `agentd doctor` in a terminal.' }
    if f.name == 'sandbox' and box.problem and box.problem ~= vim.NIL then
      advice = { box.problem }
    end
    warn(fmt('%s: %s', f.name, f.text), advice)
  end
end

function M.check()
  start('agentd')
  if not check_nvim() then
    return
  end
  local cmd, init, env = resolved()
  check_executable(cmd)
  check_key(init, env)
  check_data_dir(env)
  check_sandbox(cmd, env)
  local clients = vim.lsp.get_clients({ name = 'agentd' })
  if #clients == 0 then
    info('agentd is not running in this Neovim (it starts with the first :Agentd command)')
  else
    for _, c in ipairs(clients) do
      local si = c.server_info or {}
      info(fmt('client %d: %s %s, root %s', c.id, si.name or 'agentd', si.version or '?', tostring(c.root_dir)))
    end
  end
end

return M
