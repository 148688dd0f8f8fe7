-- Telling the person what changed while they were elsewhere: the agent blocked or
-- completed the goal, the goal spent its budget, a turn ended with a model error.
-- Pure message builders, and the handlers that send them with vim.notify.
local M = {}

local levels = vim.log.levels

--- The message (and level) for a dsh/goal/changed notification, or nil when there is
--- nothing to tell (pure). `own` is true when this editor asked for the change itself
--- (its command already said so).
---@return string? message
---@return integer? level
function M.goal_message(params, own)
  local goal = type(params) == 'table' and params.goal or nil
  if own or type(goal) ~= 'table' then
    return nil
  end
  local usage = require('dsh.statusline').usage(goal)
  -- One line each: a message wider than the screen pushes the statusline away.
  if params.op == 'block' then
    local reason = type(goal.blockedReason) == 'table' and goal.blockedReason or {}
    -- The daemon offers "raise" (edit then resume) on a goal its budget stopped.
    local raise = vim.tbl_contains(require('dsh.statusline').actions(goal), 'raise')
    if reason.code == 'round-budget-exhausted' then
      return ('the goal spent its round budget (%s): %s to go on'):format(
        usage, raise and ':Dsh goal raise' or ':Dsh goal edit {rounds}'), levels.WARN
    elseif reason.code == 'token-budget-exhausted' then
      -- Shorter than the round budget's: the usage names the tokens too, and one line must hold it.
      return ('token budget spent (%s): %s to go on'):format(
        usage, raise and ':Dsh goal raise' or ':Dsh goal edit {n} tokens'), levels.WARN
    end
    return ('the agent blocked the goal: %s (%s)'):format(tostring(reason.message or ''), tostring(reason.code or '?')),
      levels.WARN
  elseif params.op == 'complete' then
    return ('goal complete: %s (%s)'):format(tostring(goal.objective or ''), usage), levels.INFO
  end
  return nil
end

--- The message for a committed event that ended a turn with an error, or nil (pure).
function M.turn_message(event)
  if type(event) ~= 'table' or event.type ~= 'turn/close' or type(event.data) ~= 'table' then
    return nil
  end
  local data = event.data
  local err = type(data.error) == 'table' and data.error or nil
  if err then
    -- Short: the daemon's message says what to do, and the chat says which turn stopped.
    return ('model error (%s): %s'):format(tostring(err.kind or 'error'), tostring(err.message or ''))
  elseif data.stopReason == 'error' then
    return 'a turn stopped on an internal error; the daemon log says more (:LspLog)'
  end
  return nil
end

-- Goal writes this editor has in flight, so their notifications are not told twice:
-- agentId -> op -> count.
local own = {}

--- Mark a goal write of `op` as sent (+1) or answered (-1) by this editor.
function M.own_write(agent_id, op, delta)
  own[agent_id] = own[agent_id] or {}
  own[agent_id][op] = math.max(0, (own[agent_id][op] or 0) + delta)
end

function M.on_goal_changed(params)
  local mine = own[params.agentId] and (own[params.agentId][params.op] or 0) > 0
  local message, level = M.goal_message(params, mine)
  if message then
    require('dsh.errors').notify(message, level)
  end
  local goal = type(params) == 'table' and type(params.goal) == 'table' and params.goal or nil
  if goal and type(goal.waitingFor) == 'string' then
    M.tell_waiting(params.agentId, M.waiting_message(goal.waitingFor))
  end
end

-- What the goal waits for, in words (GoalView.waitingFor).
M.waiting_words = { ['plan-review'] = 'a plan review', approval = 'an approval' }

--- The one line that says the goal waits for the person (pure).
function M.waiting_message(waiting_for)
  return ('the goal waits for you: %s is open (:Dsh answer)'):format(M.waiting_words[waiting_for] or 'a question')
end

-- agentId -> true once this waiting spell was told: one notice per spell, whoever
-- tells it first (the goal's waitingFor, or a question that opened without the focus).
local told_waiting = {}

--- Tell `message` unless this agent's waiting spell was told already; true when told.
function M.tell_waiting(agent_id, message, level)
  if agent_id ~= nil and told_waiting[agent_id] then
    return false
  end
  if agent_id ~= nil then
    told_waiting[agent_id] = true
  end
  require('dsh.errors').notify(message, level or levels.WARN)
  return true
end

--- Nothing of `agent_id` waits any more: the next wait is told again.
function M.waiting_over(agent_id)
  told_waiting[agent_id] = nil
end

function M.on_event(params)
  local message = M.turn_message(params and params.event)
  if message then
    require('dsh.errors').notify(message, levels.ERROR)
  end
end

return M
