-- Handlers for what the daemon sends: its notifications and its one server request.
local protocol = require('dsh.protocol')

local M = {}

local function goal_changed(_, params)
  if type(params) ~= 'table' or not params.agentId then
    return
  end
  -- After a clear there is no goal field.
  require('dsh.state').set_goal(params.agentId, params.goal, params.op)
  require('dsh.notices').on_goal_changed(params)
  if package.loaded['dsh.timeline'] then
    require('dsh.timeline').changed(params.agentId)
  end
end

local function plan_changed(_, params)
  if type(params) ~= 'table' or not params.agentId then
    return
  end
  require('dsh.state').set_plan(params.agentId, params)
end

local function session_event(_, params)
  if type(params) ~= 'table' then
    return
  end
  local event = params.event
  if type(event) == 'table' and params.agentId then
    if event.type == 'turn/open' then
      require('dsh.state').set_turn_open(params.agentId, true)
    elseif event.type == 'turn/close' then
      require('dsh.state').set_turn_open(params.agentId, false)
      if package.loaded['dsh.timeline'] then
        require('dsh.timeline').changed(params.agentId) -- a round's figures are final now
      end
    end
  end
  require('dsh.notices').on_event(params)
  require('dsh.transcript').on_event(params)
  require('dsh.asks').on_event(params)
  if package.loaded['dsh.review'] then
    require('dsh.review').on_event(params) -- a goal waiting for its plan's approval
  end
  require('dsh.reload').on_event(params)
end

local function chat_item(_, params)
  require('dsh.chat').on_item(params)
end
-- Live pieces of a model call. The chat buffer shows them through the daemon's chat
-- items (a streaming reply is an item upserted as it grows), so nothing reads the raw
-- deltas here.
local function agent_delta(_, _) end

-- What the agent does now (idle | working | waiting), as the daemon tells it.
local function agent_activity(_, params)
  if type(params) ~= 'table' or not params.agentId then
    return
  end
  require('dsh.state').set_activity(params.agentId, params.activity, params.question)
end

local function questions_ask(_, params, ctx)
  -- Yields until the person answers (see dsh.review); the return value is the result.
  return require('dsh.review').ask(params, ctx)
end

local function permission_ask(_, params, ctx)
  -- Yields until the person answers in the approval float (see dsh.approvals).
  return require('dsh.approvals').ask(params, ctx)
end

-- Who is attached to a session: this editor and any other (dsh/session/clients).
local function session_clients(_, params)
  if type(params) ~= 'table' or not params.agentId or type(params.clients) ~= 'table' then
    return
  end
  require('dsh.state').set_clients(params.agentId, params.clients)
end

-- A question was answered (first answer wins): windows of it close here.
local function question_resolved(_, params)
  require('dsh.asks').on_resolved(params)
end

-- The daemon stopped waiting for one of its requests (an ask): LSP's own cancel.
local function cancel_request(_, params, ctx)
  if type(params) == 'table' then
    require('dsh.asks').on_cancel_request(ctx and ctx.client_id, params.id)
  end
end

--- The `handlers` table of the LSP client config: method -> handler.
function M.table()
  return {
    [protocol.notifications.goal_changed] = goal_changed,
    [protocol.notifications.plan_changed] = plan_changed,
    [protocol.notifications.session_event] = session_event,
    [protocol.notifications.chat_item] = chat_item,
    [protocol.notifications.agent_delta] = agent_delta,
    [protocol.notifications.agent_activity] = agent_activity,
    [protocol.notifications.session_clients] = session_clients,
    [protocol.notifications.question_resolved] = question_resolved,
    [protocol.server_requests.questions_ask] = questions_ask,
    [protocol.server_requests.permission_ask] = permission_ask,
    -- Not a dsh method: the daemon's one notice (keys it ignored) in Neovim's words.
    ['window/showMessage'] = function(err, params, ctx)
      if type(params) == 'table' and require('dsh.asks').repeats_lost_notice(params.message) then
        return -- already said in this editor's words (dsh.asks.on_resolved)
      end
      require('dsh.trust').on_show_message(err, params, ctx)
    end,
    -- Not a dsh method either: LSP's cancel, for the daemon's asks.
    ['$/cancelRequest'] = cancel_request,
  }
end

return M
