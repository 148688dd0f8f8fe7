-- What waits for the person: the plan reviews and approvals open now, each the answer
-- to one server request. A request ends wherever it ends (the daemon stops waiting,
-- the turn ends, the daemon exits, another editor on the same session answered first),
-- and its window closes with it. A request that ends without this editor's answer is
-- answered with RequestCancelled (-32800): that is no answer, so nothing is decided
-- here, and a daemon still waiting fails it closed.
local M = {}

-- entry -> true; an entry is { agent_id, call_id, kind, question_id, label,
-- close = fun(reason, message), show = fun(), title, request, at } (see M.add).
local open = {}
local opened = 0 -- entries ever added: their order

-- Server requests being answered, by "<client id>:<request id>" (see M.serve).
local requests = {}

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
--- unregisters it: call it with the answer's outcome once the person answered.
--- `opts.kind` ('plan-review' | 'permission') and `opts.question_id` (the plan question's
--- id; an approval's callId) name it as dsh/question/resolved does; `opts.label` names it
--- in one-line notices; `opts.request` is the handle of the request it answers (M.serve).
---@param opts {show: fun(), title: string, kind: string?, question_id: string?, label: string?, request: table?}?
function M.add(agent_id, call_id, close, opts)
  opts = opts or {}
  opened = opened + 1
  local entry = {
    agent_id = agent_id,
    call_id = call_id,
    close = close,
    show = opts.show,
    title = opts.title,
    kind = opts.kind,
    question_id = opts.question_id,
    label = opts.label or opts.title,
    request = opts.request,
    at = opened,
  }
  open[entry] = true
  changed(entry, true)
  return function(outcome)
    if open[entry] then
      open[entry] = nil
      changed(entry, false)
      if outcome and entry.question_id ~= nil then
        M.remember_answer(entry, outcome)
      end
    end
  end
end

-- The answers this editor sent lately, by "<agentId>\n<questionId>": {label, outcome}; so
-- that when another client's answer won meanwhile, the person is told theirs did nothing.
local answered, answered_order = {}, {}
local ANSWERED_KEPT = 50

function M.remember_answer(entry, outcome)
  local key = tostring(entry.agent_id) .. '\n' .. tostring(entry.question_id)
  if not answered[key] then
    table.insert(answered_order, key)
    if #answered_order > ANSWERED_KEPT then
      answered[table.remove(answered_order, 1)] = nil
    end
  end
  answered[key] = { label = entry.label, outcome = outcome }
end

--- Close the open entries that `match`, unanswered: their requests end as cancelled.
--- `message(entry)`, when given, is what the person is told instead of `reason`.
local function close_where(match, reason, message)
  local closed = 0
  for _, entry in ipairs(vim.tbl_keys(open)) do
    if open[entry] and match(entry) then
      open[entry] = nil
      closed = closed + 1
      if entry.request then
        entry.request.ended = true
      end
      changed(entry, false)
      entry.close(reason, message and message(entry) or nil)
    end
  end
  return closed
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

-- What each winning choice did, in words (dsh/question/resolved's outcome).
M.outcome_words = {
  approve = 'approved',
  revise = 'sent back to keep planning',
  ['allow-once'] = 'allowed once',
  ['allow-session'] = 'allowed for this session',
  reject = 'rejected',
}

--- The one line that says who answered a question shown here, and how (pure):
--- `plan review "Retries": approved by VS Code`.
function M.resolved_message(label, outcome, by)
  local words = M.outcome_words[outcome] or tostring(outcome)
  return ('%s: %s by %s'):format(tostring(label or 'a question'), words, tostring(by or 'another client'))
end

--- dsh/question/resolved: another client answered first (or this one did). Its window
--- here closes, and the person is told in one line who answered what.
function M.on_resolved(params)
  if type(params) ~= 'table' or params.questionId == nil then
    return
  end
  local by = type(params.by) == 'table' and params.by.clientName or nil
  local closed = close_where(function(entry)
    return entry.agent_id == params.agentId
      and entry.question_id == params.questionId
      and (params.kind == nil or entry.kind == nil or entry.kind == params.kind)
  end, nil, function(entry)
    return M.resolved_message(entry.label, params.outcome, by)
  end)
  if closed > 0 then
    return
  end
  -- Answered here too, but another answer came first: the person's did nothing.
  local mine = answered[tostring(params.agentId) .. '\n' .. tostring(params.questionId)]
  if mine and mine.outcome ~= params.outcome then
    M.lost_told_at = vim.uv.now()
    require('dsh.errors').notify(
      M.lost_message(mine.label, params.outcome, by),
      vim.log.levels.WARN
    )
  end
end

--- Whether the daemon's own "your answer changed nothing" notice (it sends one when the
--- answer reached it after it withdrew the ask) only repeats what was just told here.
function M.repeats_lost_notice(message)
  return type(message) == 'string'
    and message:find('changed nothing', 1, true) ~= nil
    and M.lost_told_at ~= nil
    and vim.uv.now() - M.lost_told_at < 5000
end

--- The line for an answer of this editor that came second (pure):
--- `approval of Edit a.txt: answered in VS Code first (allowed once); your answer changed nothing`.
function M.lost_message(label, outcome, by)
  local words = M.outcome_words[outcome] or tostring(outcome)
  return ('%s: answered in %s first (%s); your answer changed nothing'):format(
    tostring(label or 'a question'), tostring(by or 'another client'), words)
end

--- `$/cancelRequest` from the daemon: it stopped waiting for request `id` (another
--- client answered, the turn was cancelled, its timeout passed). Its window closes and
--- the request is answered RequestCancelled.
function M.on_cancel_request(client_id, id)
  if id == nil then
    return
  end
  local request = requests[tostring(client_id) .. ':' .. tostring(id)]
  if not request or request.ended then
    return
  end
  request.ended = true
  close_where(function(entry)
    return entry.request == request
  end, 'dshd stopped waiting for it (the turn was cancelled, or its time ran out)')
end

--- The error a request that ended without this editor's answer is answered with.
function M.cancelled_error()
  return vim.lsp.rpc_response_error(vim.lsp.protocol.ErrorCodes.RequestCancelled, 'closed without an answer')
end

--- Answer one server request: `fn(request)` runs in its coroutine and returns the result;
--- `request` is the handle entries of this request are added with (M.add opts.request).
--- A request that ended without an answer (M.on_cancel_request, M.on_resolved, or any
--- close) is answered RequestCancelled. `ctx` is the handler's context.
function M.serve(ctx, fn)
  local id = require('dsh.client').take_request_id(ctx)
  local request = { client_id = ctx and ctx.client_id, id = id, ended = false }
  local key = id ~= nil and (tostring(request.client_id) .. ':' .. tostring(id)) or nil
  if key then
    requests[key] = request
  end
  local ok, result = pcall(fn, request)
  if key then
    requests[key] = nil
  end
  if not ok then
    error(result, 0)
  end
  if request.ended then
    return nil, M.cancelled_error()
  end
  return result
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
