-- Daemon errors as messages that say what to do next (the protocol's error kinds).
local M = {}

function M.notify(message, level)
  vim.notify('dsh: ' .. message, level or vim.log.levels.ERROR, { title = 'dsh' })
end

local function goal_line(view)
  if not view or view == vim.NIL then
    return 'the session now has no goal'
  end
  return ('it is now revision %d, %s, %d/%d rounds: %q'):format(
    view.revision or 0,
    view.phase or '?',
    view.roundsStarted or 0,
    view.maxRounds or 0,
    view.objective or ''
  )
end

-- kind -> function(data, err, ctx) returning the message. `ctx.context` says what the
-- person asked for ("pause the goal").
local explain = {
  ['invalid-params'] = function(data, err)
    return ('the daemon rejected %s: %s. Check the arguments (:help dsh-commands).'):format(
      data.field and ('the field ' .. tostring(data.field)) or 'the request',
      err.message or 'invalid params'
    )
  end,
  ['unknown-agent'] = function()
    return 'this agent is unknown to the daemon (it may have restarted). Open the session again: :Dsh session open'
  end,
  ['stale-agent'] = function()
    return 'this session was reloaded elsewhere and this agent is stale. Open it again: :Dsh session open'
  end,
  ['stale-revision'] = function(data)
    return ('the goal changed since it was read (current revision %s); re-reading it, please check and retry.'):format(
      tostring(data.current or '?')
    )
  end,
  ['invalid-transition'] = function(data, _, ctx)
    return ('cannot %s while the goal is %s. See :help dsh-goal for what each phase allows.'):format(
      ctx.context or 'do that',
      tostring(data.phase or 'in its current phase')
    )
  end,
  ['no-goal'] = function()
    return 'this session has no goal. Create one: :Dsh goal create {objective} [rounds]'
  end,
  ['budget-exhausted'] = function()
    return 'the goal has spent its round budget. Raise it with :Dsh goal edit {rounds}, or :Dsh goal complete.'
  end,
  ['plugin-not-loaded'] = function(data, err)
    return ('%s. Add the plugin to `plugins` in .dsh/config.toml and restart the daemon (:Dsh restart).'):format(
      err.message or ('the ' .. tostring(data.plugin or 'needed') .. ' plugin is not loaded')
    )
  end,
  ['invalid-config'] = function(data, err)
    local what = err.message or ''
    if data.key and not what:find(data.key, 1, true) then
      what = ('key %s: %s'):format(tostring(data.key), what)
    end
    local file = data.file and vim.fn.fnamemodify(tostring(data.file), ':~:.') or '.dsh/config.toml'
    require('dsh.configfile').last_error = { file = data.file, key = data.key }
    return ('invalid config (%s). :Dsh config opens %s at that key; fix it, then :Dsh restart.'):format(what, file)
  end,
  ['replay-failed'] = function(data, err)
    return ('the session log is damaged at line %s (seq %s): %s. Nothing was changed; inspect it with `dshd log verify`.'):format(
      tostring(data.line or '?'),
      tostring(data.seq or '?'),
      tostring(data.reason or err.message or '')
    )
  end,
  ['session-locked'] = function(data)
    return ('another dshd (pid %s) holds this session. Close the editor that runs it, then open the session again.'):format(
      tostring(data.pid or '?')
    )
  end,
  ['turn-open'] = function()
    return 'a turn is running. Add to it with :Dsh steer {text}, or stop it with :Dsh cancel.'
  end,
}

--- A message for a JSON-RPC error `err` ({code, message, data}) from a request.
---@param err table
---@param ctx table? {method, params, context}
---@return string message
---@return string? kind
function M.describe(err, ctx)
  ctx = ctx or {}
  local data = type(err) == 'table' and type(err.data) == 'table' and err.data or {}
  local kind = data.kind
  local fn = kind and explain[kind]
  if fn then
    return fn(data, err, ctx), kind
  end
  local message = type(err) == 'table' and err.message or tostring(err)
  return ('%s failed: %s'):format(ctx.context or ctx.method or 'request', message), kind
end

--- Tell the person about `err`, and repair what the plugin can: a stale revision
--- re-reads the goal, a stale or unknown agent stops being the current one.
function M.report(err, ctx)
  ctx = ctx or {}
  local message, kind = M.describe(err, ctx)
  local state = require('dsh.state')
  local agent_id = ctx.params and ctx.params.agentId
  if kind == 'stale-revision' and agent_id then
    local protocol = require('dsh.protocol')
    require('dsh.client').request(protocol.requests.goal_get, { agentId = agent_id }, function(view)
      state.set_goal(agent_id, view, 'reread')
      M.notify(message .. ' Now: ' .. goal_line(view) .. '.', vim.log.levels.WARN)
    end, 're-read the goal')
    return
  end
  if (kind == 'stale-agent' or kind == 'unknown-agent') and agent_id then
    state.forget(agent_id)
  end
  M.notify(message)
end

return M
