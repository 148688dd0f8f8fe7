-- What the plugin knows about the daemon: the client, the current agent, and per
-- agent the last GoalView and plan state the daemon announced. Nothing here is a
-- source of truth; it is the daemon's notifications, kept for display and for the
-- refs that goal commands must name.
local statusline = require('dsh.statusline')

local M = {}

M.client_id = nil ---@type integer?
M.root_dir = nil ---@type string?
M.agent_id = nil ---@type string? the agent :Dsh commands address
M.session_id = nil ---@type string?
M.goals = {} ---@type table<string, table|false> agentId -> GoalView, or false: no goal
M.plans = {} ---@type table<string, {active: boolean, pending: boolean?}>
M.sessions = {} ---@type table[] the last dsh/session/list answer (for completion)
M.prompts = {} ---@type table<string, integer> agentId -> prompts in flight
M.session_of = {} ---@type table<string, string> agentId -> sessionId
M.turns = {} ---@type table<string, boolean> agentId -> a turn is open (turn/open .. turn/close)
-- agentId -> what the daemon last said the agent does (dsh/agent/activity).
M.activities = {} ---@type table<string, {activity: string, question: string?}>
-- agentId -> the clients attached to its session, this editor among them (you = true),
-- as dsh/session/clients last said; nil until it said anything.
M.clients = {} ---@type table<string, {clientId: string, clientName: string, you: boolean}[]>

local function announce(pattern, data)
  vim.api.nvim_exec_autocmds('User', { pattern = pattern, modeline = false, data = data })
end

-- The statusline is read on every redraw: keep the rendered text, rebuild on change.
local status_text = ''

--- Whether `agent_id` is working: a turn is open (a prompt, a steer, a goal round)
--- or a prompt is on its way.
function M.busy(agent_id)
  agent_id = agent_id or M.agent_id
  return agent_id ~= nil and (M.turns[agent_id] == true or (M.prompts[agent_id] or 0) > 0)
end

--- Whether a question of `agent_id` (an approval, a plan review) waits for the person.
function M.waiting(agent_id)
  agent_id = agent_id or M.agent_id
  return agent_id ~= nil and package.loaded['dsh.asks'] ~= nil and #require('dsh.asks').waiting(agent_id) > 0
end

--- What `agent_id` is doing, as people are told: 'waiting' (a question is open: nothing
--- runs until it is answered), 'working' (a model request or a tool runs), 'paused'
--- (its goal is paused and nothing runs), or nil.
---@return 'waiting'|'working'|'paused'|nil
function M.activity(agent_id)
  agent_id = agent_id or M.agent_id
  if agent_id == nil then
    return nil
  end
  local told = M.activities[agent_id]
  local goal = M.goals[agent_id]
  if M.waiting(agent_id) or (told and told.activity == 'waiting') or (goal and goal.waitingFor ~= nil) then
    return 'waiting'
  elseif told then
    -- The daemon knows: an open turn alone (waiting between steps) is not "working".
    if told.activity == 'working' then
      return 'working'
    end
  elseif M.busy(agent_id) then
    return 'working' -- a daemon that does not tell: a turn is open or a prompt on its way
  end
  if goal and goal.phase == 'paused' then
    return 'paused'
  end
  return nil
end

--- The names of the other clients attached to `agent_id`'s session, in the daemon's order.
---@return string[]
function M.others(agent_id)
  agent_id = agent_id or M.agent_id
  local out = {}
  for _, c in ipairs(agent_id and M.clients[agent_id] or {}) do
    if c.you ~= true then
      table.insert(out, tostring(c.clientName or c.clientId or '?'))
    end
  end
  return out
end

local function render()
  if not M.agent_id then
    status_text = ''
  else
    local plan = M.plans[M.agent_id]
    status_text = statusline.format(M.goals[M.agent_id] or nil, {
      plan = plan ~= nil and plan.active == true,
      activity = M.activity(M.agent_id),
      others = M.others(M.agent_id),
    })
  end
end

--- Rebuild the statusline of the current agent and tell who listens: DshGoalChanged
--- when `goal_change` ({op, goal}) is given, DshStatusChanged when the text changed.
local function refresh(agent_id, goal_change)
  if agent_id ~= M.agent_id then
    return
  end
  local before = status_text
  render()
  if goal_change then
    announce('DshGoalChanged', vim.tbl_extend('force', { agentId = agent_id, status = status_text }, goal_change))
  end
  if before ~= status_text or goal_change then
    announce('DshStatusChanged', { agentId = agent_id, status = status_text })
    vim.cmd('redrawstatus!')
  end
end

function M.statusline()
  return status_text
end

--- Record the GoalView (or nil) of `agent_id` and refresh the statusline if it is shown.
function M.set_goal(agent_id, view, op)
  if view == vim.NIL then
    view = nil -- a JSON null that was not decoded to nil
  end
  if type(view) == 'table' and view.waitingFor == vim.NIL then
    view.waitingFor = nil
  end
  M.goals[agent_id] = view or false
  refresh(agent_id, { op = op, goal = view })
  M.end_waiting_spell(agent_id)
end

--- A turn opened or closed for `agent_id` (from its committed events).
function M.set_turn_open(agent_id, open)
  M.turns[agent_id] = open or nil
  refresh(agent_id)
end

--- dsh/agent/activity (also in dsh/session/open's result): what `agent_id` does now.
function M.set_activity(agent_id, activity, question)
  if type(activity) ~= 'string' then
    return
  end
  M.activities[agent_id] = { activity = activity, question = type(question) == 'string' and question or nil }
  refresh(agent_id)
end

--- Who joined and who left between two client lists (pure): names of others only.
---@return string[] joined, string[] left
function M.client_changes(before, after)
  local function others(list)
    local out = {}
    for _, c in ipairs(list or {}) do
      if c.you ~= true and c.clientId then
        out[c.clientId] = tostring(c.clientName or c.clientId)
      end
    end
    return out
  end
  local was, now = others(before), others(after)
  local joined, left = {}, {}
  for id, name in pairs(now) do
    if not was[id] then
      table.insert(joined, name)
    end
  end
  for id, name in pairs(was) do
    if not now[id] then
      table.insert(left, name)
    end
  end
  table.sort(joined)
  table.sort(left)
  return joined, left
end

--- dsh/session/clients (also in dsh/session/open's result): who is attached to
--- `agent_id`'s session. Others joining or leaving later are told in one line.
function M.set_clients(agent_id, clients)
  if type(clients) ~= 'table' then
    return
  end
  local list = {}
  for _, c in ipairs(clients) do
    if type(c) == 'table' then
      table.insert(list, { clientId = c.clientId, clientName = c.clientName, you = c.you == true })
    end
  end
  local before = M.clients[agent_id]
  M.clients[agent_id] = list
  if before and agent_id == M.agent_id then
    local joined, left = M.client_changes(before, list)
    local parts = {}
    if #joined > 0 then
      table.insert(parts, table.concat(joined, ', ') .. ' joined')
    end
    if #left > 0 then
      table.insert(parts, table.concat(left, ', ') .. ' left')
    end
    if #parts > 0 then
      require('dsh.errors').notify('this session: ' .. table.concat(parts, '; '), vim.log.levels.INFO)
    end
  end
  announce('DshClientsChanged', { agentId = agent_id, others = M.others(agent_id) })
  refresh(agent_id)
end

--- A question of `agent_id` opened or was answered (see dsh.asks).
function M.refresh_waiting(agent_id)
  refresh(agent_id)
  M.end_waiting_spell(agent_id)
end

--- Once nothing of `agent_id` waits for the person (no question open here, none the
--- daemon names in the goal), the next wait is a new spell: it is told again.
function M.end_waiting_spell(agent_id)
  if M.activity(agent_id) ~= 'waiting' then
    require('dsh.notices').waiting_over(agent_id)
  end
end

--- A prompt was sent (+1) or answered (-1).
function M.count_prompt(agent_id, delta)
  M.prompts[agent_id] = math.max(0, (M.prompts[agent_id] or 0) + delta)
  refresh(agent_id)
end

function M.goal(agent_id)
  local view = M.goals[agent_id or M.agent_id]
  return view or nil
end

function M.set_plan(agent_id, plan)
  local pending = nil
  if type(plan.pending) == 'boolean' then
    pending = plan.pending
  end
  M.plans[agent_id] = { active = plan.active == true, pending = pending }
  if agent_id == M.agent_id then
    announce('DshPlanChanged', { agentId = agent_id, active = plan.active == true, pending = pending })
  end
  refresh(agent_id)
end

function M.plan(agent_id)
  return M.plans[agent_id or M.agent_id]
end

--- Make `agent_id` the agent that commands address and the statusline shows.
function M.set_current(agent_id, session_id)
  if agent_id then
    M.session_of[agent_id] = session_id
  end
  M.agent_id = agent_id
  M.session_id = session_id
  render()
  announce('DshGoalChanged', { agentId = agent_id, status = status_text })
  announce('DshStatusChanged', { agentId = agent_id, status = status_text })
  announce('DshSessionChanged', { agentId = agent_id, sessionId = session_id })
  if package.loaded['dsh.chat'] then
    require('dsh.chat').on_session_changed(agent_id, session_id)
  end
  vim.cmd('redrawstatus!')
end

--- Forget an agent (closed, replaced by a reload, or the daemon exited).
function M.forget(agent_id)
  M.goals[agent_id] = nil
  M.plans[agent_id] = nil
  M.prompts[agent_id] = nil
  M.turns[agent_id] = nil
  M.activities[agent_id] = nil
  M.clients[agent_id] = nil
  M.session_of[agent_id] = nil
  require('dsh.asks').close_all('the session was closed or reloaded', agent_id)
  if agent_id == M.agent_id then
    M.set_current(nil, nil)
  end
end

function M.reset()
  M.client_id = nil
  M.root_dir = nil
  M.goals = {}
  M.plans = {}
  M.prompts = {}
  M.turns = {}
  M.activities = {}
  M.clients = {}
  M.session_of = {}
  M.set_current(nil, nil)
end

return M
