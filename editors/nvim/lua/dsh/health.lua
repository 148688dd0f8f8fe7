-- :checkhealth dsh
local M = {}

local health = vim.health

local function check_neovim()
  local v = vim.version()
  local text = ('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok(text)
  else
    health.error(text .. ' is too old', { 'dsh needs Neovim 0.10 or newer (vim.lsp.config needs 0.11)' })
  end
end

--- Returns the command that starts the daemon when its executable was found.
local function check_dshd(root)
  local cfg = require('dsh.config').client_config(root or vim.fn.getcwd())
  local cmd = cfg.cmd
  if type(cmd) ~= 'table' or not cmd[1] then
    health.error('cmd is not a list of strings', { 'set dshd = "/path/to/dshd" (or a whole cmd list) in require("dsh").setup()' })
    return nil
  end
  local path = vim.fn.exepath(cmd[1])
  if path == '' then
    health.error(('dshd not found: %q is not an executable on $PATH'):format(cmd[1]), {
      'install dshd (pip install -e . in the dshd repository) or',
      'set its full path: require("dsh").setup({ dshd = "/path/to/dshd" })',
    })
    return nil
  end
  local ok, result = pcall(function()
    return vim.system({ path, '--version' }, { text = true }):wait(10000)
  end)
  if ok and result.code == 0 and vim.trim(result.stdout or '') ~= '' then
    health.ok(('dshd found: %s (%s)'):format(path, vim.trim(result.stdout)))
  else
    health.warn(('dshd found at %s, but `dshd --version` failed'):format(path), {
      ok and vim.trim((result.stderr or '') .. ' exit ' .. tostring(result.code)) or tostring(result),
      'an older or broken install; reinstall dshd',
    })
  end
  if cmd[2] == 'connect' then
    health.ok("connects to the workspace's shared daemon (dshd connect; server = 'serve' for one of this Neovim's own)")
  elseif cmd[2] == 'serve' then
    health.ok("starts a daemon of this Neovim's own (dshd serve; server = 'connect' shares one per workspace)")
  end
  return cmd
end

--- Ask a fresh daemon to initialize on the workspace: that loads and validates its
--- config exactly as a real start does (invalid-config names the key).
local function validate_config(cmd, root)
  local done, outcome = false, nil
  local rpc = vim.lsp.rpc.start(cmd, {
    on_exit = function(code)
      if not done then
        done, outcome = true, { exited = code }
      end
    end,
  }, { cwd = root })
  local cfg = require('dsh.config')
  rpc.request('initialize', {
    processId = vim.uv.os_getpid(),
    clientInfo = { name = 'Neovim :checkhealth dsh' },
    rootUri = vim.uri_from_fname(root),
    workspaceFolders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } },
    capabilities = require('dsh.protocol').client_capabilities,
    initializationOptions = cfg.client_config(root).init_options,
  }, function(err, result)
    if not done then
      done, outcome = true, { err = err, result = result }
    end
  end)
  vim.wait(15000, function()
    return done
  end, 20)
  if outcome and outcome.result then
    -- What the daemon left out of the config (an untrusted workspace's guarded keys).
    local answered = false
    rpc.request(require('dsh.protocol').requests.config_get, vim.empty_dict(), function(err, result)
      answered = true
      outcome.config = not err and result or nil
    end)
    vim.wait(5000, function()
      return answered
    end, 20)
    rpc.request('shutdown', nil, function()
      rpc.notify('exit', nil)
    end)
    vim.wait(2000, function()
      return rpc.is_closing()
    end, 20)
  end
  if not rpc.is_closing() then
    rpc.terminate()
  end
  return outcome
end

local function check_workspace(cmd)
  local cfg = require('dsh.config')
  local start = cfg.start_path()
  local root = cfg.find_root(start)
  if not root then
    health.warn(('no workspace marker (.dsh, .git) above %s'):format(start), {
      'dshd will use the working directory as the workspace',
      'create a .dsh directory at the project root to mark it',
    })
    root = start
  else
    health.ok('workspace: ' .. root)
  end
  local toml = root .. '/.dsh/config.toml'
  if vim.uv.fs_stat(toml) then
    health.info('config: ' .. toml)
    if require('dsh.trust').trusted(root) then
      health.ok('workspace trusted (Neovim trust database): its model and sandbox settings apply')
    else
      health.info(
        'workspace not trusted: its model provider, baseUrl, apiKeyEnv and looser sandbox settings are ignored'
          .. ' (:Dsh trust trusts it, or list the folder in [trust] folders of your user config)'
      )
    end
  else
    health.info('no .dsh/config.toml: the built-in defaults apply')
  end
  local running = require('dsh.client').get()
  if running and running.initialized and running.root_dir == root then
    health.ok(('workspace config valid (the running daemon, client %d, accepted it)'):format(running.id))
    return
  end
  if not cmd then
    health.warn('workspace config not checked: dshd is missing')
    return
  end
  -- A fresh `dshd serve` checks the config as this editor would send it; a shared daemon
  -- already running keeps the config its first client started it with.
  local check_cmd = cmd
  if cmd[2] == 'connect' then
    check_cmd = { cmd[1], 'serve' }
  end
  local outcome = validate_config(check_cmd, root)
  if not outcome then
    health.error('dshd did not start on this workspace within 15 s', { 'run `dshd serve` in a terminal to see why' })
  elseif outcome.result then
    health.ok('workspace config valid (dshd started on it)')
    for _, item in ipairs(type(outcome.config) == 'table' and outcome.config.ignored or {}) do
      health.warn(('ignored %s from %s: %s'):format(item.key, item.file, item.why))
    end
  elseif outcome.err then
    local err = outcome.err
    local data = type(err.data) == 'table' and err.data or {}
    if data.kind == 'invalid-config' then
      health.error('workspace config invalid: ' .. tostring(err.message), {
        ('fix %s in %s (or in setup({ config = ... }))'):format(data.key and ('the key ' .. data.key) or 'it', toml),
      })
    else
      health.error('dshd refused to start: ' .. require('dsh.errors').describe(err, { context = 'start dshd' }))
    end
  else
    health.error(('dshd exited (code %s) before it started'):format(tostring(outcome.exited)), {
      'run `dshd serve` in a terminal to see why',
    })
  end
end

function M.check()
  health.start('dsh: editor')
  check_neovim()
  health.start('dsh: daemon')
  local cfg = require('dsh.config')
  local root = cfg.find_root(cfg.start_path())
  local cmd = check_dshd(root)
  health.start('dsh: workspace')
  check_workspace(cmd)
end

return M
