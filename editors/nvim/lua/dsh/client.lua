-- Starting the daemon and talking to it: one LSP client per workspace root.
local config = require('dsh.config')
local state = require('dsh.state')

local M = {}

local has_011 = vim.fn.has('nvim-0.11') == 1

-- Work asked for before the daemon answered `initialize`, run by on_init.
local waiting = {} ---@type table<integer, fun(client: vim.lsp.Client)[]>

local function get_client(id)
  return id and vim.lsp.get_client_by_id(id) or nil
end

--- The running dsh client, if any.
---@return vim.lsp.Client?
local function running(client)
  return client ~= nil and not (client.is_stopped and client:is_stopped())
end

function M.get()
  local client = get_client(state.client_id)
  if running(client) then
    return client
  end
  for _, c in ipairs(vim.lsp.get_clients({ name = 'dsh' })) do
    if running(c) then
      state.client_id = c.id
      state.root_dir = c.root_dir or c.config.root_dir
      return c
    end
  end
  return nil
end

--- Start the daemon for the workspace around `path` (default: current file or cwd).
---@return integer? client_id
---@return string? error
function M.start(path)
  local existing = M.get()
  if existing then
    return existing.id
  end
  path = path or config.start_path()
  local root = config.find_root(path) or vim.fn.fnamemodify(path, ':p'):gsub('/$', '')
  local cfg = config.client_config(root)
  local exe = type(cfg.cmd) == 'table' and cfg.cmd[1] or nil
  if exe and vim.fn.executable(exe) ~= 1 then
    return nil,
      ('dshd not found: put it on PATH or set dshd in setup() (:checkhealth dsh); tried %s'):format(exe)
  end
  local argv = cfg.cmd
  -- `dshd connect`: the workspace's shared daemon, which outlives this client.
  M.shared = type(argv) == 'table' and argv[2] == 'connect'
  M.argv = M.shared and { argv[1], root } or nil -- dshd and the workspace, for `dshd daemon`
  cfg.cmd = M.guard_initialize(argv, cfg)
  local id
  if has_011 then
    id = vim.lsp.start(cfg, { attach = false, silent = true })
  else
    id = vim.lsp.start_client(cfg)
  end
  if not id then
    return nil, 'could not start dshd (' .. table.concat(argv, ' ') .. '); run :checkhealth dsh'
  end
  state.client_id = id
  state.root_dir = root
  return id
end

--- Run `fn(client)` once the daemon is initialized, starting it if needed.
function M.with_client(fn)
  local client = M.get()
  if not client then
    local id, err = M.start()
    if not id then
      require('dsh.errors').notify(err)
      return
    end
    client = get_client(id)
  end
  if client and client.initialized then
    fn(client)
  elseif client then
    waiting[client.id] = waiting[client.id] or {}
    table.insert(waiting[client.id], fn)
  end
end

function M.on_init(client)
  state.client_id = client.id
  state.root_dir = client.root_dir or client.config.root_dir
  local queued = waiting[client.id] or {}
  waiting[client.id] = nil
  for _, fn in ipairs(queued) do
    fn(client)
  end
end

-- Clients the plugin itself is stopping (restart, :Dsh session close of the last...):
-- their exit is expected and says nothing.
local stopping = {} ---@type table<integer, boolean>
-- When the daemon crashed lately (os.time()), to stop restarting one that keeps crashing.
local crashes = {} ---@type integer[]
M.max_restarts = 3 -- within M.restart_window_s
M.restart_window_s = 60

--- "exit code 1", "signal 9 (SIGKILL)" (pure).
function M.describe_exit(code, signal)
  if signal and signal ~= 0 then
    local names = { [1] = 'SIGHUP', [2] = 'SIGINT', [6] = 'SIGABRT', [9] = 'SIGKILL', [11] = 'SIGSEGV', [15] = 'SIGTERM' }
    return ('signal %d%s'):format(signal, names[signal] and (', ' .. names[signal]) or '')
  end
  return 'exit code ' .. tostring(code)
end

--- Whether to start the daemon again after a crash at `now`: not when it crashed
--- `max_restarts` times within the window (it would only crash again).
function M.may_restart(now)
  local recent = {}
  for _, at in ipairs(crashes) do
    if now - at < M.restart_window_s then
      table.insert(recent, at)
    end
  end
  crashes = recent
  table.insert(crashes, now)
  return #crashes <= M.max_restarts
end

function M.on_exit(code, signal, client_id)
  waiting[client_id] = nil
  local client = get_client(client_id)
  -- The wrapper in M.guard_initialize keeps the real status (Neovim is told 0 so that
  -- it does not add a second, vaguer warning of its own).
  local real = client and client.rpc and client.rpc.dsh_exit
  if real then
    code, signal = real.code, real.signal
  end
  local expected = stopping[client_id] or M.init_failed
  stopping[client_id] = nil
  if client_id ~= state.client_id then
    return
  end
  local session_id = state.session_id
  vim.schedule(function()
    require('dsh.asks').close_all('the daemon exited')
    state.reset()
    local ours = M.init_failed
    M.init_failed = nil
    if ours or expected then
      return
    end
    local announced = M.restart_announced and vim.uv.now() - M.restart_announced < 30000
    M.restart_announced = nil
    if announced and M.shared and session_id then
      -- `dshd daemon restart` (from another client or a terminal): reattach, after the
      -- client that asked for it has (its settings are the next daemon's).
      require('dsh.errors').notify("the workspace's daemon restarted; reopening your session", vim.log.levels.INFO)
      return vim.defer_fn(function()
        require('dsh.commands').open_session(session_id, false, 'reopened')
      end, M.reattach_delay_ms)
    end
    local crashed = code ~= 0 or (signal and signal ~= 0)
    -- Each said in one line: a message wider than the screen waits for Enter.
    local how = crashed and ('dshd crashed (%s)'):format(M.describe_exit(code, signal)) or 'dshd stopped'
    if crashed and not real then
      how = 'dshd crashed' -- started by vim.lsp.enable: Neovim already said how it exited
    end
    if M.shared and real then
      -- The forwarder ends when the workspace's daemon does (status 1: it died).
      how = crashed and 'the shared dshd daemon went away' or 'the shared dshd daemon closed this connection'
    end
    if not session_id then
      return require('dsh.errors').notify(how .. '; nothing is lost, and any :Dsh command starts it again')
    end
    if not M.may_restart(os.time()) then
      return require('dsh.errors').notify(
        ('%s again; not restarted (%d crashes in a minute): :Dsh restart, :checkhealth dsh'):format(how, M.max_restarts + 1)
      )
    end
    require('dsh.errors').notify(how .. '; restarting it and reopening your session')
    require('dsh.commands').open_session(session_id, false, 'reopened')
  end)
end

--- `dshd daemon restart` for this client's workspace. `on_gone()` once this client's
--- connection to the old daemon is gone (its exit is expected: it says nothing and is
--- no crash), so this editor reattaches first and the next daemon starts with its
--- settings; `on_result(ok, said)` when the command ends. The other clients of the
--- daemon reattach by themselves, a moment later (M.on_exit).
function M.restart_shared(client, on_gone, on_result)
  local id = client.id
  stopping[id] = true
  local argv = { M.argv[1], 'daemon', 'restart', '--workspace', M.argv[2] }
  local timer = vim.uv.new_timer()
  local waited = 0
  local function stop_timer()
    if not timer:is_closing() then
      timer:stop()
      timer:close()
    end
  end
  timer:start(50, 50, vim.schedule_wrap(function()
    waited = waited + 50
    local old = vim.lsp.get_client_by_id(id)
    if old == nil or (old.is_stopped and old:is_stopped()) then
      stop_timer()
      on_gone()
    elseif waited > 30000 then
      stop_timer()
    end
  end))
  vim.system(argv, { text = true }, function(result)
    vim.schedule(function()
      local said = vim.trim((result.code == 0 and result.stdout or result.stderr) or '')
      if result.code ~= 0 then
        stopping[id] = nil
        stop_timer()
      end
      on_result(result.code == 0, said ~= '' and said or ('exit code ' .. tostring(result.code)))
    end)
  end)
end

-- When the daemon said it is restarting (vim.uv.now()): its end is then no crash.
M.restart_announced = nil
M.reattach_delay_ms = 1500 -- the editor that asked for the restart reattaches first

--- `cmd` as a function (|vim.lsp.ClientConfig|): the real RPC client for `argv`, except
--- that a failed `initialize` (an invalid workspace config) is reported by error kind
--- and the daemon stopped. Neovim itself would only raise the raw error from a
--- scheduled callback and leave the client hanging uninitialized.
function M.guard_initialize(argv, cfg)
  return function(dispatchers)
    local rpc
    local on_exit = dispatchers.on_exit
    dispatchers = vim.tbl_extend('force', dispatchers, {
      on_exit = function(code, signal)
        if rpc then
          rpc.dsh_exit = { code = code, signal = signal }
        end
        -- The plugin reports the exit itself, once, with its status (see M.on_exit).
        return on_exit(0, 0)
      end,
    })
    local asked = {} -- method -> ids of its server requests not yet handed to a handler
    rpc = M.start_rpc(argv, dispatchers, { cwd = cfg.cmd_cwd, env = cfg.cmd_env, detached = cfg.detached }, asked)
    rpc.dsh_asked = asked
    local request = rpc.request
    rpc.request = function(method, params, callback, notify_reply_callback)
      if method == 'initialize' then
        local initialized = callback
        callback = function(err, result)
          if err then
            vim.schedule(function()
              require('dsh.errors').report(err, { method = method, context = 'start dshd' })
              M.init_failed = true -- the exit that follows is ours: no second message
              rpc.terminate()
            end)
            return
          end
          return initialized(err, result)
        end
      end
      return request(method, params, callback, notify_reply_callback)
    end
    return rpc
  end
end

-- The server requests whose JSON-RPC id the plugin needs: `$/cancelRequest` names a
-- request by id, and Neovim hands a request's handler its method and params only.
M.asked_methods = {
  [require('dsh.protocol').server_requests.questions_ask] = true,
  [require('dsh.protocol').server_requests.permission_ask] = true,
}

--- The ids of the asks in `body` (a message as read), appended to `asked[method]`. Only
--- a message that names an ask method is decoded again: the rest pass at a string find.
function M.note_asked(body, asked)
  if not body:find('/ask"', 1, true) then
    return
  end
  local ok, message = pcall(vim.json.decode, body)
  if ok and type(message) == 'table' and message.id ~= nil and M.asked_methods[message.method] then
    asked[message.method] = asked[message.method] or {}
    table.insert(asked[message.method], message.id)
  end
end

--- vim.lsp.rpc.start, with every message read seen by M.note_asked first. The read loop
--- is made by vim.lsp.rpc.create_read_loop while start runs (synchronously), so it is
--- wrapped for that call only. Handlers run in the order the messages came, so the
--- first id noted for a method belongs to the first handler of that method still to run.
function M.start_rpc(argv, dispatchers, extra, asked)
  local rpc_mod = vim.lsp.rpc
  local create = rpc_mod.create_read_loop
  if type(create) ~= 'function' then
    -- A Neovim without it: no ids, so windows close on dsh/question/resolved and events.
    return rpc_mod.start(argv, dispatchers, extra)
  end
  rpc_mod.create_read_loop = function(handle_body, ...)
    return create(function(body)
      pcall(M.note_asked, body, asked)
      return handle_body(body)
    end, ...)
  end
  local ok, rpc = pcall(rpc_mod.start, argv, dispatchers, extra)
  rpc_mod.create_read_loop = create
  if not ok then
    error(rpc, 0)
  end
  return rpc
end

--- The JSON-RPC id of the server request whose handler runs now (`ctx` is the handler's
--- context), or nil when it is not known (a client started without this wrapper).
function M.take_request_id(ctx)
  local client = ctx and ctx.client_id and get_client(ctx.client_id)
  local asked = client and client.rpc and client.rpc.dsh_asked
  local ids = asked and asked[ctx.method]
  if ids and #ids > 0 then
    return table.remove(ids, 1)
  end
  return nil
end

--- Where Neovim reports a failed `initialize` itself (through on_error, as an assertion
--- message holding vim.lsp.rpc.format_rpc_error's text), read kind and key back from it.
function M.parse_rpc_error_text(text)
  if type(text) ~= 'string' or not text:find('RPC%[Error%]') then
    return nil
  end
  local err = { code = tonumber(text:match('code = (%-?%d+)')), message = text:match('message = "(.-)"'), data = {} }
  for _, field in ipairs({ 'kind', 'key', 'field', 'reason' }) do
    err.data[field] = text:match(field .. ' = "(.-)"')
  end
  for _, field in ipairs({ 'pid', 'seq', 'line', 'current' }) do
    err.data[field] = tonumber(text:match(field .. ' = (%d+)'))
  end
  return err
end

--- on_error of the client config: a fallback for start-up failures guard_initialize
--- did not see (a daemon that died before answering, a client started by vim.lsp.enable).
function M.on_error(code, err, client_id)
  local client = get_client(client_id or state.client_id)
  if client and client.initialized then
    return -- Neovim already reported it; requests report their own errors
  end
  local parsed = M.parse_rpc_error_text(type(err) == 'string' and err or tostring(err))
  if parsed then
    require('dsh.errors').report(parsed, { context = 'start dshd' })
  else
    require('dsh.errors').notify(('dshd failed to start (%s): %s. Run :checkhealth dsh.'):format(
      tostring(vim.lsp.client_errors[code] or code),
      tostring(err)
    ))
  end
  if client then
    waiting[client.id] = nil
    if has_011 then
      client:stop(true)
    else
      client.stop(true)
    end
  end
end

--- Send a request; `on_result(result)` on success, errors go to dsh.errors.report
--- with `context` (what the person asked for), unless `on_error(err)` handles them.
---@param method string
---@param params table
---@param on_result fun(result: any)?
---@param context string? e.g. "pause the goal"
---@param on_error fun(err: table): boolean? return true when handled
function M.request(method, params, on_result, context, on_error)
  M.with_client(function(client)
    local handler = function(err, result)
      if err then
        if not (on_error and on_error(err)) then
          require('dsh.errors').report(err, { method = method, params = params, context = context })
        end
        return
      end
      if on_result then
        on_result(result)
      end
    end
    local ok
    if has_011 then
      ok = client:request(method, params, handler)
    else
      ok = client.request(method, params, handler)
    end
    if not ok then
      require('dsh.errors').notify('could not reach dshd to ' .. (context or method) .. '; is it running? (:checkhealth dsh)')
    end
  end)
end

function M.stop()
  local client = M.get()
  if client then
    stopping[client.id] = true
    if has_011 then
      client:stop()
    else
      client.stop()
    end
  end
end

return M
