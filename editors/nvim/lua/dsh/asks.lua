-- What waits for the person: the plan reviews and approvals open now, each the answer
-- to one server request. A request ends wherever it ends (the daemon stops waiting,
-- the turn ends, the daemon exits), and its window closes with it.
local M = {}

-- entry -> true; an entry is { agent_id, call_id, close = fun(reason), show = fun(),
-- title, at } (see M.add).
local open = {}
local opened = 0 -- entries ever added: their order

-- What shows that a question waits: the statusline, the chat line under its tool call.
local function changed(entry, waiting)
  require('dsh.state').refresh_waiting(entry.agent_id)
  if package.loaded['dsh.chat'] and entry.call_id then
    require('dsh.chat').mark_waiting(entry.agent_id, entry.call_id, waiting and entry.title or nil)
  end
end

--- Register a window that answers a request about tool call `call_id` of `agent_id`;
--- `close(reason)` ends it unanswered (fail-closed); `opts.show()` brings its window
--- back and into focus (:Dsh answer); `opts.title` names it. Returns the function that
--- unregisters it (call it once the person answered).
---@param opts {show: fun(), title: string}?
function M.add(agent_id, call_id, close, opts)
  opts = opts or {}
  opened = opened + 1
  local entry = { agent_id = agent_id, call_id = call_id, close = close, show = opts.show, title = opts.title, at = opened }
  open[entry] = true
  changed(entry, true)
  return function()
    if open[entry] then
      open[entry] = nil
      changed(entry, false)
    end
  end
end

local function close_where(match, reason)
  for _, entry in ipairs(vim.tbl_keys(open)) do
    if open[entry] and match(entry) then
      open[entry] = nil
      changed(entry, false)
      entry.close(reason)
    end
  end
end

--- The questions open (of `agent_id`, when given), oldest first.
function M.waiting(agent_id)
  local out = vim.tbl_filter(function(entry)
    return agent_id == nil or entry.agent_id == agent_id
  end, vim.tbl_keys(open))
  table.sort(out, function(a, b)
    return a.at < b.at
  end)
  return out
end

--- :Dsh answer: bring the oldest open question (of the current agent first) into view
--- and focus. Returns false when none is open.
function M.show_next()
  local current = require('dsh.state').agent_id
  local entry = M.waiting(current)[1] or M.waiting()[1]
  if not entry or not entry.show then
    return false
  end
  entry.show()
  return true
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
