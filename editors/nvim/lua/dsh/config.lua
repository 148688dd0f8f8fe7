-- Options from require('dsh').setup() and the LSP client config built from them.
local M = {}

M.defaults = {
  -- How to reach the daemon: 'connect' (`dshd connect --workspace <root>`: the one
  -- daemon of the workspace, shared with every other editor and ACP client on it,
  -- started when there is none) or 'serve' (`dshd serve`: a daemon of this Neovim's own).
  server = 'connect',
  -- The dshd executable (a name on $PATH or a full path).
  dshd = 'dshd',
  -- The whole command instead (overrides `server` and `dshd`), e.g. { '/opt/dshd', 'serve' };
  -- nil takes `cmd` from lsp/dsh.lua unless that is the shipped default.
  cmd = nil,
  -- The name other clients of a shared session see for this Neovim (initialize's
  -- clientInfo.name: "From …", "approved in …" in their chat); nil: "Neovim (pid <pid>)".
  client_name = nil,
  -- Files or directories that mark the workspace root, nearest first.
  root_markers = nil,
  -- Sent as initializationOptions.config; same shape as .dsh/config.toml.
  config = nil,
  -- The model, the [model] table of that config: { provider = 'openai'|'anthropic'|
  -- 'scripted', model = '...', baseUrl = '...', apiKeyEnv = 'OPENAI_API_KEY', ... }.
  -- Merged over `config.model`; your settings win over the workspace file.
  model = nil,
  -- Start the daemon at VimEnter when the working directory is inside a workspace
  -- with a `.dsh` directory, and take up the workspace's last session. Otherwise it
  -- starts at the first :Dsh command (which takes up the last session as well).
  autostart = false,
  -- Report the end of each turn started by :Dsh prompt.
  notify_turns = true,
  -- How long the daemon waits for a plan review before failing it closed
  -- (initializationOptions.questionTimeoutMs); nil: the daemon's default.
  question_timeout_ms = nil,
}

M.options = vim.deepcopy(M.defaults)

local known = {
  server = true,
  dshd = true,
  client_name = true,
  cmd = true,
  root_markers = true,
  config = true,
  model = true,
  autostart = true,
  notify_turns = true,
  question_timeout_ms = true,
}

function M.set(opts)
  opts = opts or {}
  -- The table form of vim.validate works on 0.10 and 0.11.
  vim.validate({ opts = { opts, 'table' } })
  for key in pairs(opts) do
    if not known[key] then
      error(('dsh.setup: unknown option %q (see :help dsh-setup)'):format(tostring(key)), 0)
    end
  end
  vim.validate({
    server = {
      opts.server,
      function(v)
        return v == nil or v == 'connect' or v == 'serve'
      end,
      "'connect' or 'serve'",
    },
    dshd = { opts.dshd, 'string', true },
    client_name = { opts.client_name, 'string', true },
    cmd = { opts.cmd, 'table', true },
    root_markers = { opts.root_markers, 'table', true },
    config = { opts.config, 'table', true },
    model = {
      opts.model,
      function(v)
        if v == nil then
          return true
        end
        if type(v) ~= 'table' or vim.islist(v) and next(v) ~= nil then
          return false
        end
        for _, key in ipairs({ 'provider', 'model', 'baseUrl', 'apiKeyEnv' }) do
          if v[key] ~= nil and type(v[key]) ~= 'string' then
            return false
          end
        end
        return true
      end,
      "a table like { provider = 'openai', model = '...', baseUrl = '...', apiKeyEnv = '...' } (strings)",
    },
    autostart = { opts.autostart, 'boolean', true },
    notify_turns = { opts.notify_turns, 'boolean', true },
    question_timeout_ms = {
      opts.question_timeout_ms,
      function(v)
        return v == nil or (type(v) == 'number' and v >= 1 and v == math.floor(v))
      end,
      'a whole number of milliseconds >= 1',
    },
  })
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
end

--- The `lsp/dsh.lua` table, as Neovim 0.11 resolves it (with the user's
--- vim.lsp.config('dsh', ...) overrides), or read from the runtimepath on 0.10.
local function base_lsp_config()
  if vim.fn.has('nvim-0.11') == 1 then
    local resolved = vim.lsp.config.dsh
    if resolved then
      return vim.deepcopy(resolved)
    end
  end
  local file = vim.api.nvim_get_runtime_file('lsp/dsh.lua', false)[1]
  assert(file, 'dsh: lsp/dsh.lua is not on the runtimepath; is the plugin installed?')
  return dofile(file)
end

--- The workspace root for `path` (a directory or file), or nil outside any workspace.
function M.find_root(path)
  local markers = M.options.root_markers or base_lsp_config().root_markers
  return vim.fs.root(path, markers)
end

--- The directory the plugin starts from: the current buffer's file, else the cwd.
function M.start_path()
  local name = vim.api.nvim_buf_get_name(0)
  if name ~= '' and vim.bo.buftype == '' and vim.uv.fs_stat(vim.fs.dirname(name)) then
    return vim.fs.dirname(name)
  end
  return vim.fn.getcwd()
end

--- initializationOptions.config from the options: `config`, with `model` over its
--- [model] table (nil when neither is set).
function M.settings_config()
  local config = M.options.config and vim.deepcopy(M.options.config) or nil
  if M.options.model then
    config = config or {}
    config.model = vim.tbl_extend('force', config.model or {}, M.options.model)
  end
  return config
end

-- The command lsp/dsh.lua ships with: standing for "as the options say".
M.shipped_cmd = { 'dshd', 'connect' }

--- The command that reaches the daemon of the workspace at `root_dir`, from `server`
--- and `dshd` (pure over the options).
---@return string[]
function M.command(root_dir)
  local argv = { M.options.dshd or 'dshd', M.options.server or 'connect' }
  if argv[2] == 'connect' then
    -- The daemon is the workspace's: name it, whatever Neovim's working directory is.
    vim.list_extend(argv, { '--workspace', root_dir })
  end
  return argv
end

--- The full vim.lsp.ClientConfig for the workspace at `root_dir`.
--- The name people at other clients of a shared session read for this Neovim: the
--- `client_name` option, else "Neovim (pid <pid>)" (two Neovims are told apart).
function M.client_name()
  local given = M.options.client_name
  if type(given) == 'string' and vim.trim(given) ~= '' then
    return vim.trim(given)
  end
  return ('Neovim (pid %d)'):format(vim.fn.getpid())
end

function M.client_config(root_dir)
  local cfg = base_lsp_config()
  cfg.name = 'dsh'
  cfg.root_dir = root_dir
  cfg.workspace_folders = {
    { uri = vim.uri_from_fname(root_dir), name = vim.fs.basename(root_dir) },
  }
  if M.options.cmd then
    cfg.cmd = vim.deepcopy(M.options.cmd)
  elseif cfg.cmd == nil or vim.deep_equal(cfg.cmd, M.shipped_cmd) then
    cfg.cmd = M.command(root_dir)
  end
  -- A `dshd connect` without --workspace takes its working directory's daemon.
  cfg.cmd_cwd = cfg.cmd_cwd or root_dir
  do
    local before_init = cfg.before_init
    local name = M.client_name()
    cfg.before_init = function(params, config)
      params.clientInfo = vim.tbl_extend('force', params.clientInfo or {}, { name = name })
      if type(before_init) == 'function' then
        before_init(params, config)
      end
    end
  end
  local settings = M.settings_config()
  if settings then
    cfg.init_options = vim.tbl_deep_extend('force', cfg.init_options or {}, { config = settings })
  end
  -- Whether the person trusts this workspace (Neovim's trust database, read without
  -- asking): only then may its .dsh/config.toml choose the model server or loosen the
  -- sandbox.
  cfg.init_options = vim.tbl_extend('force', cfg.init_options or {}, {
    trusted = require('dsh.trust').trusted(root_dir),
  })
  if M.options.question_timeout_ms then
    cfg.init_options = vim.tbl_extend('force', cfg.init_options or {}, {
      questionTimeoutMs = M.options.question_timeout_ms,
    })
  end
  -- These must hold whatever a user's vim.lsp.config('dsh') says: they are the protocol.
  cfg.capabilities = vim.tbl_deep_extend(
    'force',
    cfg.capabilities or {},
    require('dsh.protocol').client_capabilities
  )
  cfg.handlers = vim.tbl_extend('force', cfg.handlers or {}, require('dsh.handlers').table())
  cfg.root_markers = nil
  return cfg
end

return M
