-- What waits for the person: the plan reviews and approvals open now, each the answer
-- to one server request. A request ends wherever it ends (the daemon stops waiting,
-- the turn ends, the daemon exits), and its window closes with it.
local M = {}

-- entry -> true; an entry is { agent_id, call_id, close = fun(reason) }.
local open = {}

--- Register a window that answers a request about tool call `call_id` of `agent_id`;
--- `close(reason)` ends it unanswered (fail-closed). Returns the function that
--- unregisters it (call it once the person answered).
function M.add(agent_id, call_id, close)
  local entry = { agent_id = agent_id, call_id = call_id, close = close }
  open[entry] = true
  return function()
    open[entry] = nil
  end
end

local function close_where(match, reason)
  for _, entry in ipairs(vim.tbl_keys(open)) do
    if open[entry] and match(entry) then
      open[entry] = nil
      entry.close(reason)
    end
  end
end

--- Close everything open (of `agent_id`, when given) unanswered.
function M.close_all(reason, agent_id)
  close_where(function(entry)
    return agent_id == nil or entry.agent_id == agent_id
  end, reason)
end

--- A committed event settles what waits for it: the call's decision or result (the
--- person answered elsewhere, or the daemon's timeout), or the end of the turn.
function M.on_event(params)
  local event = params and params.event
  if type(event) ~= 'table' then
    return
  end
  local data = type(event.data) == 'table' and event.data or {}
  if event.type == 'turn/close' then
    M.close_all('the turn ended before an answer', params.agentId)
  elseif (event.type == 'tool/result' or event.type == 'permission/decision') and data.callId then
    close_where(function(entry)
      return entry.agent_id == params.agentId and entry.call_id == data.callId
    end, 'it ended without your answer (withdrawn or timed out)')
  end
end

--- Inside the coroutine Neovim runs a server request in: `show(done)` opens what the
--- person answers and calls `done(result)` once; the request's result is that value.
--- Nothing polls and the editor stays usable meanwhile. `what` names it in errors.
function M.await(what, show)
  local co, is_main = coroutine.running()
  if not co or is_main then
    require('dsh.errors').notify(('cannot show %s here (no coroutine); it was answered no.'):format(what))
    return nil
  end
  show(function(result)
    vim.schedule(function()
      local ok, err = coroutine.resume(co, result)
      if not ok then
        require('dsh.errors').notify(what .. ' failed: ' .. tostring(err))
      end
    end)
  end)
  return coroutine.yield()
end

return M
