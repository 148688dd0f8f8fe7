-- Plan review: answers dsh/questions/ask (kind "plan-review") in a floating window.
--
-- The daemon's request is handled inside the coroutine Neovim 0.10+ runs server
-- requests in: the handler opens the float and yields; the key the person presses
-- resumes it with the answer. Nothing polls and the editor stays usable meanwhile.
--
-- A review that opens while the person types does not take their keys (dsh.float's
-- open_question). Closing its window (`q` or any other way) decides nothing: the review
-- stays open, with whatever the person wrote (line comments, feedback) kept as a draft,
-- shown in the chat and the statusline; :Dsh answer brings it back. A draft is never
-- dropped silently: approving instead asks, and a review that ends elsewhere repeats it.
local float = require('dsh.float')

local M = {}

M.keys = { approve = 'a', approve_goal = 'g', revise = 'r', comment = 'c', diff = 'd', close = 'q' }

-- Open reviews by buffer: see M.open for the fields.
local open_reviews = {}

--- The answer for one question (pure). `comments` maps line -> text.
---@param question_id string
---@param choice 'approve'|'revise'
---@param feedback string?
---@param comments table<integer, string>?
---@return table
function M.build_answer(question_id, choice, feedback, comments)
  local answer = { id = question_id, choice = choice }
  if choice == 'revise' then
    if feedback and feedback ~= '' then
      answer.feedback = feedback
    end
    local lines = vim.tbl_keys(comments or {})
    table.sort(lines)
    if #lines > 0 then
      answer.comments = {}
      for _, line in ipairs(lines) do
        table.insert(answer.comments, { line = line, text = comments[line] })
      end
    end
  end
  return answer
end

--- "2 comments and feedback", "1 comment", "feedback", or nil when nothing is unsent (pure).
---@param comments table<integer, string>?
---@param feedback string?
---@return string?
function M.describe_drafts(comments, feedback)
  local n = vim.tbl_count(comments or {})
  local parts = {}
  if n > 0 then
    table.insert(parts, n == 1 and '1 comment' or (n .. ' comments'))
  end
  if feedback and vim.trim(feedback) ~= '' then
    table.insert(parts, 'feedback')
  end
  if #parts == 0 then
    return nil
  end
  return table.concat(parts, ' and ')
end

--- The drafts as text a person can copy back (for a review that ended unanswered).
local function drafts_text(review)
  local out = {}
  if review.feedback and vim.trim(review.feedback) ~= '' then
    table.insert(out, 'feedback: ' .. review.feedback)
  end
  local lines = vim.tbl_keys(review.comments)
  table.sort(lines)
  for _, line in ipairs(lines) do
    table.insert(out, ('line %d: %s'):format(line, review.comments[line]))
  end
  return table.concat(out, '; ')
end

local ns = vim.api.nvim_create_namespace('dsh.review')

local function show_comment(buf, line, text)
  vim.api.nvim_buf_clear_namespace(buf, ns, line - 1, line)
  if text then
    vim.api.nvim_buf_set_extmark(buf, ns, line - 1, 0, {
      virt_text = { { '  « ' .. text, 'DiagnosticVirtualTextInfo' } },
      virt_text_pos = 'eol',
    })
  end
end

function M.split_lines(text)
  local lines = vim.split((text or ''):gsub('\r\n', '\n'), '\n', { plain = true })
  -- The newline that ends the last line does not start another one.
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

local function key_help()
  local k = M.keys
  return ('%s approve · %s + goal · %s keep planning · %s comment · %s changes · %s later (stays open)'):format(
    k.approve,
    k.approve_goal,
    k.revise,
    k.comment,
    k.diff,
    k.close
  )
end

--- Where line `line` of `old` is in `new` (pure), by their diff: the same line when it
--- is unchanged, else the first line of what replaced it. Returns the line and whether
--- it changed (its text is not in `new` as it was).
function M.line_in_revision(old, new, line)
  local function ended(text)
    text = (text or ''):gsub('\r\n', '\n')
    return text:sub(-1) == '\n' and text or (text .. '\n')
  end
  local hunks = (vim.text and vim.text.diff or vim.diff)(ended(old), ended(new), { result_type = 'indices' })
  local offset = 0
  for _, h in ipairs(type(hunks) == 'table' and hunks or {}) do
    local start_a, count_a, start_b, count_b = h[1], h[2], h[3], h[4]
    local before = count_a == 0 and line <= start_a or line < start_a
    if before then
      break
    end
    if count_a > 0 and line < start_a + count_a then
      return math.max(1, start_b), true -- (a deletion: start_b is the line before it)
    end
    offset = offset + count_b - count_a
  end
  return math.max(1, line + offset), false
end

--- What the person said about the plan before this one (the question's `previous`),
--- to set beside the revised plan (pure): `header`, the lines above the plan, and
--- `beside`, revised line -> the notes to show at its end.
function M.previous_notes(previous, plan)
  if type(previous) ~= 'table' then
    return nil
  end
  local header = { ('Your review of the plan before ("%s"):'):format(tostring(previous.title or 'Plan')) }
  if type(previous.feedback) == 'string' and vim.trim(previous.feedback) ~= '' then
    table.insert(header, '  feedback: ' .. previous.feedback:gsub('%s+', ' '))
  end
  local old_lines = M.split_lines(previous.markdown)
  local line_count = #M.split_lines(plan)
  local beside = {}
  for _, comment in ipairs(type(previous.comments) == 'table' and previous.comments or {}) do
    local line = tonumber(comment.line)
    if line then
      local quoted = vim.trim(old_lines[line] or '')
      if vim.fn.strchars(quoted) > 40 then
        quoted = vim.fn.strcharpart(quoted, 0, 39) .. '…'
      end
      local now, changed = M.line_in_revision(previous.markdown, plan, line)
      now = math.min(now, math.max(1, line_count))
      table.insert(header, ('  line %d "%s": %s  → line %d%s'):format(
        line, quoted, tostring(comment.text or ''), now, changed and ', changed' or ', unchanged'))
      beside[now] = beside[now] or {}
      table.insert(beside[now], tostring(comment.text or ''))
    end
  end
  if #header == 1 then
    table.insert(header, '  (sent back without comments or feedback)')
  end
  return { header = header, beside = beside }
end

local previous_ns = vim.api.nvim_create_namespace('dsh.review.previous')

--- Show the question's `previous` notes in the review buffer (see M.previous_notes).
local function show_previous(buf, question)
  local notes = M.previous_notes(question.previous, question.plan)
  if not notes then
    return 0
  end
  local virt = {}
  for i, line in ipairs(notes.header) do
    table.insert(virt, { { line, i == 1 and 'DiagnosticHint' or 'Comment' } })
  end
  vim.api.nvim_buf_set_extmark(buf, previous_ns, 0, 0, { virt_lines = virt, virt_lines_above = true })
  for line, texts in pairs(notes.beside) do
    vim.api.nvim_buf_set_extmark(buf, previous_ns, line - 1, 0, {
      virt_text = { { '  ⟲ last round: ' .. table.concat(texts, '; '), 'DiagnosticVirtualTextHint' } },
      virt_text_pos = 'eol',
      priority = 50, -- after this round's own comment («)
    })
  end
  return #notes.header
end

--- The one-line notice for a review that opened without the focus (pure).
function M.waiting_notice(title)
  return ('plan review "%s" waits for you: :Dsh answer (ga in the chat)'):format(title)
end

--- Show the review's float (again). `focus`: take the focus whatever the person does
--- (:Dsh answer); else as a question that arrives by itself (dsh.float.open_question).
local function show(review, focus)
  if review.done then
    return
  end
  local title = review.question.title or 'Plan review'
  if review.win and vim.api.nvim_win_is_valid(review.win) then
    float.focus(review.win, title)
    return
  end
  local opts = { title = title, keys = key_help(), conceal = 2 }
  local entered = true
  if focus then
    review.win = float.open(review.buf, opts)
    local shown_at = vim.uv.now()
    review.ready = function()
      return vim.uv.now() - shown_at >= float.guard_ms
    end
  else
    review.win, review.ready, entered = float.open_question(review.buf, opts)
  end
  if review.header_lines > 0 and review.win and vim.api.nvim_win_is_valid(review.win) then
    -- The notes of the round before sit above line 1: shown only from the window's top.
    vim.api.nvim_win_call(review.win, function()
      vim.fn.winrestview({ topline = 1, topfill = review.header_lines })
    end)
  end
  if not entered then
    require('dsh.notices').tell_waiting(review.meta.agentId, M.waiting_notice(title))
  end
end

--- Open the float for `question`; `finish(answer)` is called exactly once, with nil
--- when the person closes it without deciding (fail-closed: plan mode stays on).
---@return integer buf
function M.open(question, meta, finish)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.split_lines(question.plan))
  vim.bo[buf].bufhidden = 'hide' -- survives its window: a closed float can come back
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'markdown'
  pcall(vim.api.nvim_buf_set_name, buf, 'dsh://plan-review/' .. tostring(question.id))

  ---@class dsh.Review
  local review = {
    buf = buf,
    win = nil, ---@type integer?
    question = question,
    meta = meta or {},
    comments = {}, ---@type table<integer, string>
    feedback = nil, ---@type string? typed but not sent
    done = false,
    header_lines = show_previous(buf, question), -- the round before's notes, above the plan
  }

  -- The question reviews tool call <callId> (its id is "plan-review-<callId>").
  local label = 'plan review "' .. tostring(question.title or 'Plan') .. '"'
  local unregister = require('dsh.asks').add(review.meta.agentId, tostring(question.id):match('^plan%-review%-(.+)$'), function(reason, message)
    review.close(reason, message)
  end, {
    title = label,
    label = label,
    kind = 'plan-review',
    question_id = question.id,
    request = review.meta.request,
    show = function()
      show(review, true)
    end,
  })

  function review.decide(answer)
    if review.done then
      return
    end
    review.done = true
    unregister(answer and answer.choice)
    open_reviews[buf] = nil
    if review.win and vim.api.nvim_win_is_valid(review.win) then
      vim.api.nvim_win_close(review.win, true)
    end
    if vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_delete(buf, { force = true })
    end
    finish(answer)
  end

  --- Close without an answer because the review ended elsewhere; unsent drafts are
  --- repeated in the message, so nothing typed vanishes. `message` (who answered it
  --- elsewhere) is said instead of `reason`.
  function review.close(reason, message)
    if review.done then
      return
    end
    local drafts = M.describe_drafts(review.comments, review.feedback) and drafts_text(review)
    -- A key meant for the review, pressed as it closes, must not act on the window below.
    float.close_by_itself(review.win, message or ('plan review closed: ' .. (reason or 'ended elsewhere')))
    review.decide(nil)
    if message then
      require('dsh.errors').notify(
        message .. (drafts and ('. Not sent: ' .. drafts) or ''),
        drafts and vim.log.levels.WARN or vim.log.levels.INFO
      )
    elseif reason then
      require('dsh.errors').notify(
        'plan review closed: ' .. reason .. '.' .. (drafts and (' Not sent: ' .. drafts) or ''),
        vim.log.levels.WARN
      )
    end
  end

  local function send_back()
    review.decide(M.build_answer(question.id, 'revise', review.feedback, review.comments))
  end

  open_reviews[buf] = review
  show(review, false)

  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, function()
      if review.ready() then
        fn()
      end
    end, { buffer = buf, nowait = true, desc = desc })
  end
  map(M.keys.approve, function()
    local drafts = M.describe_drafts(review.comments, review.feedback)
    if drafts then
      return float.choose(
        ('An approval sends no comments: your %s would be dropped.'):format(drafts),
        { 'Keep reviewing', 'Send back with them instead', 'Approve and drop them' },
        function(choice)
          if choice == 2 then
            send_back()
          elseif choice == 3 then
            review.decide(M.build_answer(question.id, 'approve'))
          end
        end
      )
    end
    review.decide(M.build_answer(question.id, 'approve'))
  end, 'dsh: approve the plan')
  map(M.keys.approve_goal, function()
    local function start()
      -- The budgets first: cancelling them leaves the review open, nothing decided.
      require('dsh.commands').ask_budgets(function(max_rounds, max_tokens)
        if review.done then
          return
        end
        review.decide(M.build_answer(question.id, 'approve'))
        M.start_goal_when_approved(review.meta.agentId, question, max_rounds, max_tokens)
      end)
    end
    local drafts = M.describe_drafts(review.comments, review.feedback)
    if drafts then
      return float.choose(
        ('An approval sends no comments: your %s would be dropped.'):format(drafts),
        { 'Keep reviewing', 'Approve, drop them and start a goal' },
        function(choice)
          if choice == 2 then
            start()
          end
        end
      )
    end
    start()
  end, 'dsh: approve the plan and start a goal from it')
  map(M.keys.revise, function()
    -- <Esc> in the prompt keeps what was typed as a draft (the builtin input reads
    -- the command line; CmdlineLeave still sees the abandoned text).
    local group = vim.api.nvim_create_augroup('dsh.review.feedback', { clear = true })
    vim.api.nvim_create_autocmd('CmdlineLeave', {
      group = group,
      pattern = '@',
      once = true,
      callback = function()
        if vim.v.event.abort then
          local typed = vim.fn.getcmdline()
          if typed ~= '' then
            review.feedback = typed
          end
        end
      end,
    })
    vim.ui.input({ prompt = 'Keep planning. Feedback for the agent: ', default = review.feedback }, function(text)
      pcall(vim.api.nvim_del_augroup_by_id, group)
      if text == nil then
        if review.feedback then
          require('dsh.errors').notify('feedback kept as a draft; r again to send it', vim.log.levels.INFO)
        end
        return -- cancelled: the review stays open
      end
      review.feedback = text
      send_back()
    end)
  end, 'dsh: keep planning, with feedback')
  map(M.keys.comment, function()
    local line = vim.api.nvim_win_get_cursor(0)[1]
    vim.ui.input({ prompt = ('Comment on line %d: '):format(line), default = review.comments[line] }, function(text)
      if text == nil or not vim.api.nvim_buf_is_valid(buf) then
        return
      end
      review.comments[line] = text ~= '' and text or nil
      show_comment(buf, line, review.comments[line])
    end)
  end, 'dsh: comment on the line under the cursor')
  map(M.keys.diff, function()
    M.show_changes(review)
  end, 'dsh: compare with the previous plan')
  -- Closing decides nothing: the review waits, drafts and all (:Dsh answer).
  vim.keymap.set('n', M.keys.close, function()
    if review.win and vim.api.nvim_win_is_valid(review.win) then
      vim.api.nvim_win_close(review.win, true)
    end
  end, { buffer = buf, nowait = true, desc = 'dsh: close; the review stays open (:Dsh answer)' })
  return buf
end

-- Earlier plans: what the session's log holds as exit_plan_mode arguments. Read a page
-- at a time and only past what was read before (sessionId -> {last_seq, plans}).
local plan_history = {}

--- The plans of a session's log in order, then `done(plans)`; each plan `{callId, plan}`.
function M.read_plans(agent_id, session_id, done)
  local client = require('dsh.client')
  local protocol = require('dsh.protocol')
  local history = plan_history[session_id] or { last_seq = 0, plans = {} }
  plan_history[session_id] = history
  local limit = 500
  local function page()
    client.request(protocol.requests.session_events, { agentId = agent_id, afterSeq = history.last_seq, limit = limit }, function(result)
      local events = result and result.events or {}
      for _, event in ipairs(events) do
        history.last_seq = math.max(history.last_seq, tonumber(event.seq) or 0)
        local data = type(event.data) == 'table' and event.data or {}
        if event.type == 'tool/call' and data.name == 'exit_plan_mode' and type(data.arguments) == 'table' then
          table.insert(history.plans, { callId = data.callId, plan = data.arguments.plan })
        end
      end
      if #events >= limit then
        return page()
      end
      done(history.plans)
    end, 'read earlier plans')
  end
  page()
end

--- The plan before `question` among `plans` (pure): the one before the call the
--- question is about, else the last one whose text differs.
function M.previous_plan(plans, question)
  local call_id = type(question.id) == 'string' and question.id:match('^plan%-review%-(.+)$')
  for i = #plans, 1, -1 do
    if call_id and plans[i].callId == call_id then
      return plans[i - 1] and plans[i - 1].plan or nil
    end
  end
  for i = #plans, 1, -1 do
    if type(plans[i].plan) == 'string' and plans[i].plan ~= question.plan then
      return plans[i].plan
    end
  end
  return nil
end

--- A unified diff from `old` to `new` as lines (pure; empty when they are equal).
function M.diff_lines(old, new)
  local function ended(s)
    s = (s or ''):gsub('\r\n', '\n')
    return s:sub(-1) == '\n' and s or (s .. '\n')
  end
  local diff = (vim.text and vim.text.diff or vim.diff)(ended(old), ended(new), { result_type = 'unified', ctxlen = 3 })
  if type(diff) ~= 'string' or diff == '' then
    return {}
  end
  return M.split_lines(diff)
end

--- `d`: a float over the review with what changed since the previous plan: the one
--- the question names (`previous`, the plan sent back), else the one before in the log.
function M.show_changes(review)
  local agent_id = review.meta.agentId
  local session_id = review.meta.sessionId
  local notify = function(msg)
    require('dsh.errors').notify(msg, vim.log.levels.INFO)
  end
  local named = type(review.question.previous) == 'table' and review.question.previous.markdown or nil
  if type(named) == 'string' then
    return M.open_changes(review, named)
  end
  if not (agent_id and session_id) then
    return notify('no session to read earlier plans from')
  end
  M.read_plans(agent_id, session_id, function(plans)
    if review.done then
      return
    end
    local previous = M.previous_plan(plans, review.question)
    if not previous then
      return notify('this is the first plan of the session: nothing to compare it with')
    end
    M.open_changes(review, previous)
  end)
end

--- The float of `d`: the diff from `previous` to the plan under review.
function M.open_changes(review, previous)
  local notify = function(msg)
    require('dsh.errors').notify(msg, vim.log.levels.INFO)
  end
  local lines = M.diff_lines(previous, review.question.plan)
  if #lines == 0 then
    return notify('this plan is the same as the previous one')
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'diff'
  local win = float.open(buf, { title = 'Changes since the previous plan', keys = 'd or q back to the review', number = false })
  review.changes_win = win
  local function back()
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
    if review.win and vim.api.nvim_win_is_valid(review.win) then
      vim.api.nvim_set_current_win(review.win)
    end
  end
  for _, lhs in ipairs({ M.keys.diff, M.keys.close, '<Esc>' }) do
    vim.keymap.set('n', lhs, back, { buffer = buf, nowait = true, desc = 'dsh: back to the plan review' })
  end
end

--- The objective of a goal started from an approved plan (pure): it names the plan by
--- its heading, so the goal's rounds and every client say which plan they carry out.
function M.goal_objective(question)
  local title = vim.trim(tostring(question.title or ''))
  if title == '' then
    title = 'Plan'
  end
  return ('Carry out the approved plan "%s"'):format(title) -- the words of every client
end

-- Goals to start once their plan's approval is in the log: "<agentId>\n<callId>" ->
-- { start = fun(), timer }.
local goal_after = {}
M.goal_wait_ms = 30000

--- "Approve and start a goal", its second half: once the log holds the call's result and
--- it says approved (another client may have answered first), create the goal (M.start_goal).
function M.start_goal_when_approved(agent_id, question, max_rounds, max_tokens)
  local call_id = tostring(question.id):match('^plan%-review%-(.+)$')
  local key = tostring(agent_id) .. '\n' .. tostring(call_id)
  local timer = vim.defer_fn(function()
    if goal_after[key] then
      goal_after[key] = nil
      require('dsh.errors').notify('the approval was not recorded in time: no goal started (:Dsh goal create)', vim.log.levels.WARN)
    end
  end, M.goal_wait_ms)
  goal_after[key] = {
    start = function(outcome)
      if outcome == 'approved' then
        M.start_goal(agent_id, question, max_rounds, max_tokens)
      else
        require('dsh.errors').notify(
          ('the plan was not approved (%s): no goal started'):format(tostring(outcome)),
          vim.log.levels.WARN
        )
      end
    end,
    timer = timer,
  }
end

--- A committed event: the result of a plan call whose goal waits (see above).
function M.on_event(params)
  local event = type(params) == 'table' and params.event or nil
  if type(event) ~= 'table' or event.type ~= 'tool/result' or type(event.data) ~= 'table' then
    return
  end
  local key = tostring(params.agentId) .. '\n' .. tostring(event.data.callId)
  local waiting = goal_after[key]
  if waiting then
    goal_after[key] = nil
    pcall(function()
      waiting.timer:stop()
      waiting.timer:close()
    end)
    local review = type(event.data.review) == 'table' and event.data.review or {}
    waiting.start(review.outcome or (event.data.ok and 'approved' or 'not approved'))
  end
end

--- Create the goal whose objective names the approved plan, with the person's budgets.
function M.start_goal(agent_id, question, max_rounds, max_tokens)
  local objective = M.goal_objective(question)
  require('dsh.client').request(
    require('dsh.protocol').requests.goal_create,
    { agentId = agent_id, objective = objective, maxRounds = max_rounds, maxTokens = max_tokens },
    function(view)
      require('dsh.errors').notify(
        ('plan approved; goal started · %s'):format(require('dsh.statusline').usage(view)),
        vim.log.levels.INFO
      )
    end,
    'start a goal from the approved plan (the plan is approved)'
  )
end

--- The handler of the server request dsh/questions/ask. Runs in the coroutine
--- Neovim gives server requests; returns the result table when the person is done
--- (or RequestCancelled when it ended without their answer: see dsh.asks.serve).
function M.ask(params, ctx)
  local asks = require('dsh.asks')
  return asks.serve(ctx, function(request)
    return M.answer_all(params, request)
  end)
end

function M.answer_all(params, request)
  local answers = {}
  local questions = type(params) == 'table' and params.questions or {}
  for _, question in ipairs(questions) do
    if request and request.ended then
      break
    end
    if question.kind == 'plan-review' then
      local answer = require('dsh.asks').await('the plan review', function(done)
        M.open(question, { agentId = params.agentId, sessionId = params.sessionId, request = request }, done)
      end)
      if answer then
        table.insert(answers, answer)
      end
    else
      require('dsh.errors').notify(
        ('dshd asked a %q question this version of dsh.nvim cannot show; it was not answered (update dsh.nvim).'):format(
          tostring(question.kind)
        ),
        vim.log.levels.WARN
      )
    end
  end
  return { answers = answers }
end

--- The open reviews (for tests and :Dsh status).
function M.list()
  return vim.tbl_values(open_reviews)
end

--- Close every open review (of `agent_id`, when given) without approving.
function M.close_all(reason, agent_id)
  for _, review in pairs(open_reviews) do
    if agent_id == nil or review.meta.agentId == agent_id then
      review.close(reason)
    end
  end
end

return M
