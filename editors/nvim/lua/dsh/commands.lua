-- :Dsh {subcommand} — parsing (pure), completion and execution.
local M = {}

local levels = vim.log.levels

-- Subcommands and their words, for completion and for the help text.
M.tree = {
  session = { 'new', 'open', 'list', 'fork', 'close' },
  prompt = {},
  steer = {},
  cancel = {},
  plan = { 'on', 'off', 'history' },
  goal = { 'create', 'edit', 'raise', 'pause', 'resume', 'complete', 'clear', 'disarm', 'block', 'timeline' },
  chat = { 'split', 'tab', 'here', 'older' },
  rewind = { 'list' },
  config = {},
  sandbox = { 'read-only', 'workspace-write', 'full-access' },
  approve = { 'none', 'write', 'exec', 'read' },
  trust = {},
  stop = {},
  answer = {},
  messages = {},
  transcript = {},
  restart = {},
}

local function trim(s)
  return (s:gsub('^%s+', ''):gsub('%s+$', ''))
end

--- First word of `s` and the rest (trimmed).
local function word(s)
  s = trim(s or '')
  local first, rest = s:match('^(%S+)%s*(.*)$')
  return first, rest or ''
end

--- "fix the tests 40" -> "fix the tests", 40. A trailing whole number is the budget.
local function positive(n, what)
  if not n or n < 1 or n ~= math.floor(n) then
    return nil, what .. ' must be a positive whole number'
  end
  return n
end

--- "{objective} [rounds]" -> objective, rounds (nil when absent), or nil, nil, error.
local function objective_and_rounds(s)
  local objective, rounds = s:match('^(.-)%s+(%d+)$')
  if not (objective and objective ~= '') then
    return s, nil
  end
  local err
  rounds, err = positive(tonumber(rounds), 'rounds')
  if not rounds then
    return nil, nil, err
  end
  return trim(objective), rounds
end

--- "{rest} 200k tokens" -> rest, 200000 (tokens nil when there is no "… tokens" at the
--- end), or nil, nil, error. `k` and `M` mean thousands and millions (pure).
local function token_budget(s)
  local rest, number, unit = s:match('^(.-)%s*(%d+%.?%d*)([kKmM]?)%s+tok%a*$')
  if not number then
    return s, nil
  end
  local scale = ({ k = 1000, K = 1000, m = 1000000, M = 1000000 })[unit] or 1
  local tokens, err = positive(math.floor(tonumber(number) * scale + 0.5), 'the token budget')
  if not tokens then
    return nil, nil, err
  end
  return trim(rest), tokens
end

--- Parse the arguments of :Dsh into an action table, or nil and an error message.
---@param args string everything after :Dsh
---@param bang boolean? :Dsh! (session open: reload)
---@return table? action
---@return string? error
function M.parse(args, bang)
  local sub, rest = word(args)
  if not sub then
    return { action = 'status' }
  end
  if sub == 'session' then
    local verb, arg = word(rest)
    if verb == 'new' then
      return { action = 'session.new', title = arg ~= '' and arg or nil }
    elseif verb == 'open' then
      return { action = 'session.open', session_id = arg ~= '' and arg or nil, reload = bang == true }
    elseif verb == 'list' and arg == '' then
      return { action = 'session.list' }
    elseif verb == 'fork' then
      if arg == '' then
        return { action = 'session.fork' }
      end
      local seq, err = positive(tonumber(arg:match('^%d+$')), 'the seq to fork at')
      if not seq then
        return nil, err .. ': :Dsh session fork [seq]'
      end
      return { action = 'session.fork', at_seq = seq }
    elseif verb == 'close' and arg == '' then
      return { action = 'session.close' }
    end
    return nil, 'usage: :Dsh session new [title] | open [id] | list | fork [seq] | close'
  elseif sub == 'prompt' or sub == 'steer' then
    if rest == '' then
      return nil, ('usage: :Dsh %s {text}'):format(sub)
    end
    return { action = sub, text = rest }
  elseif sub == 'chat' then
    if rest == 'older' then
      return { action = 'chat.older' }
    end
    if rest == '' or rest == 'split' or rest == 'tab' or rest == 'here' then
      return { action = 'chat', where = rest ~= '' and rest or 'split' }
    end
    return nil, 'usage: :Dsh chat [split|tab|here|older]'
  elseif sub == 'rewind' then
    if rest == '' then
      return { action = 'rewind' } -- the chat item under the cursor
    elseif rest == 'list' then
      return { action = 'rewind.list' }
    end
    return nil, 'usage: :Dsh rewind (in the chat, on a message or tool call marked ⟲) | rewind list'
  elseif sub == 'sandbox' then
    if rest == '' then
      return { action = 'permission.show' }
    elseif vim.tbl_contains(M.tree.sandbox, rest) then
      return { action = 'permission.set', sandbox = rest }
    end
    return nil, 'usage: :Dsh sandbox [read-only|workspace-write|full-access]'
  elseif sub == 'approve' then
    if rest == '' then
      return { action = 'permission.show' }
    elseif rest == 'none' then
      return { action = 'permission.set', approve = {} }
    end
    local classes, seen = {}, {}
    for class in rest:gmatch('[^%s,]+') do
      if not vim.tbl_contains({ 'read', 'write', 'exec' }, class) or seen[class] then
        return nil, 'usage: :Dsh approve [none | {write|exec|read} ...] (each class once)'
      end
      seen[class] = true
      table.insert(classes, class)
    end
    return { action = 'permission.set', approve = classes }
  elseif sub == 'stop' then
    if rest ~= '' then
      return nil, 'usage: :Dsh stop (no arguments)'
    end
    return { action = 'cancel' }
  elseif vim.tbl_contains({ 'cancel', 'transcript', 'restart', 'config', 'trust', 'answer', 'messages' }, sub) then
    if rest ~= '' then
      return nil, ('usage: :Dsh %s (no arguments)'):format(sub)
    end
    return { action = sub }
  elseif sub == 'plan' then
    if rest == '' then
      return { action = 'plan.show' }
    elseif rest == 'on' or rest == 'off' then
      return { action = 'plan.set', active = rest == 'on' }
    end
    local verb, arg = word(rest)
    if verb == 'history' then
      if arg == '' then
        return { action = 'plan.history' }
      end
      local index, err = positive(tonumber(arg:match('^%d+$')), 'the plan number')
      if not index then
        return nil, err .. ': :Dsh plan history [n]'
      end
      return { action = 'plan.history', index = index }
    end
    return nil, 'usage: :Dsh plan [on|off|history [n]]'
  elseif sub == 'goal' then
    local verb, arg = word(rest)
    if not verb then
      return { action = 'goal.show' }
    elseif verb == 'create' then
      local rest, tokens, terr = token_budget(arg)
      if terr then
        return nil, terr
      end
      if rest == '' and not tokens then
        return { action = 'goal.create' } -- asks for the objective and the budgets
      end
      local objective, rounds, err = objective_and_rounds(rest)
      if err then
        return nil, err
      elseif objective == '' then
        return nil, 'usage: :Dsh goal create [{objective} [rounds] [{n} tokens]]'
      end
      return { action = 'goal.create', objective = objective, max_rounds = rounds, max_tokens = tokens }
    elseif verb == 'edit' then
      if arg == '' then
        return { action = 'goal.edit' } -- asks for the new values
      end
      local rest, tokens, terr = token_budget(arg)
      if terr then
        return nil, terr
      end
      if rest == '' then
        return { action = 'goal.edit', max_tokens = tokens }
      end
      if rest:match('^%d+$') then
        local rounds, err = positive(tonumber(rest), 'rounds')
        if not rounds then
          return nil, err
        end
        return { action = 'goal.edit', max_rounds = rounds, max_tokens = tokens }
      end
      local objective, rounds, err = objective_and_rounds(rest)
      if err then
        return nil, err
      end
      return { action = 'goal.edit', objective = objective, max_rounds = rounds, max_tokens = tokens }
    elseif verb == 'raise' then
      if arg == '' then
        return { action = 'goal.raise' } -- asks for the new budget
      end
      local rest, tokens, terr = token_budget(arg)
      if terr then
        return nil, terr
      end
      local rounds
      if rest ~= '' then
        local err
        rounds, err = positive(tonumber(rest:match('^%d+$')), 'rounds')
        if not rounds then
          return nil, err .. ': :Dsh goal raise [rounds] [{n} tokens]'
        end
      end
      return { action = 'goal.raise', max_rounds = rounds, max_tokens = tokens }
    elseif verb == 'timeline' then
      if arg ~= '' then
        return nil, 'usage: :Dsh goal timeline (no arguments)'
      end
      return { action = 'goal.timeline' }
    elseif verb == 'block' then
      local code, message = word(arg)
      if not code or message == '' then
        return nil, 'usage: :Dsh goal block {code} {message}'
      end
      local kebab = code:match('^[a-z0-9%-]+$') and not code:find('^%-') and not code:find('%-$') and not code:find('%-%-')
      if not kebab then
        return nil, ('the block code %q must be lowercase-kebab-case, like waiting-for-review'):format(code)
      end
      return { action = 'goal.block', code = code, message = message }
    elseif vim.tbl_contains({ 'pause', 'resume', 'complete', 'clear', 'disarm' }, verb) then
      if arg ~= '' then
        return nil, ('usage: :Dsh goal %s (no arguments)'):format(verb)
      end
      return { action = 'goal.' .. verb }
    end
    return nil, 'usage: :Dsh goal [create [{objective} [rounds] [{n} tokens]] | edit [{objective}] [rounds] [{n} tokens] | raise [rounds] [{n} tokens] | pause | resume | complete | clear | disarm | block {code} {message} | timeline]'
  end
  return nil, ('unknown subcommand %q; try :Dsh <Tab> or :help dsh-commands'):format(sub)
end

--- Completion for :Dsh (the -complete=customlist function).
function M.complete(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  local words = vim.split(trim(before:gsub('^%s*%S+', '', 1)), '%s+', { trimempty = true })
  if arglead ~= '' then
    table.remove(words) -- the word being completed
  end
  local candidates
  if #words == 0 then
    candidates = vim.tbl_keys(M.tree)
    table.sort(candidates)
  elseif #words == 1 and words[1] == 'goal' and require('dsh.state').agent_id then
    candidates = M.goal_verbs(require('dsh.state').goal())
    table.insert(candidates, 'timeline') -- a read, whatever the phase
  elseif #words == 1 and M.tree[words[1]] then
    candidates = M.tree[words[1]]
  elseif #words == 2 and words[1] == 'session' and words[2] == 'open' then
    candidates = vim.tbl_map(function(s)
      return s.sessionId
    end, require('dsh.state').sessions)
  else
    candidates = {}
  end
  return vim.tbl_filter(function(c)
    return vim.startswith(c, arglead)
  end, candidates)
end

-- Execution ---------------------------------------------------------------------

local function requests()
  return require('dsh.protocol').requests
end
local function request(...)
  return require('dsh.client').request(...)
end
local function notify(message, level)
  require('dsh.errors').notify(message, level or levels.INFO)
end
-- The round budget a person typed, when it is a positive whole number; else nil.
local function whole_rounds(text)
  local n = tonumber(text)
  if n and n >= 1 and n == math.floor(n) then
    return n
  end
  return nil
end

local function fail(message)
  require('dsh.errors').notify(message)
end

local function become(agent_id, session_id)
  require('dsh.state').set_current(agent_id, session_id)
end

--- Seconds since 1970 of an ISO 8601 time in UTC or with an offset
--- (`2026-12-01T14:05:00.123Z`, `…+02:00`), or nil (pure; no time zone of this machine).
function M.epoch(iso)
  if type(iso) ~= 'string' then
    return nil
  end
  local y, mo, d, h, mi, sec, rest = iso:match('^(%d%d%d%d)%-(%d%d)%-(%d%d)[T ](%d%d):(%d%d):(%d%d)(.*)$')
  if not y then
    return nil
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  -- Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
  local yy = mo <= 2 and y - 1 or y
  local era = math.floor(yy / 400)
  local yoe = yy - era * 400
  local doy = math.floor((153 * (mo + (mo > 2 and -3 or 9)) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  local offset = 0
  local sign, oh, om = rest:match('([+-])(%d%d):?(%d%d)$')
  if sign then
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == '+' and 1 or -1)
  end
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec) - offset
end

--- How long ago `iso` was, in a person's words: "just now", "5 min ago", "2 h ago",
--- "3 days ago", else the date (pure; `now` in seconds since 1970).
function M.ago(iso, now)
  local at = M.epoch(iso)
  if not at then
    return ''
  end
  local s = math.max(0, now - at)
  if s < 60 then
    return 'just now'
  elseif s < 3600 then
    return ('%d min ago'):format(math.floor(s / 60))
  elseif s < 86400 then
    return ('%d h ago'):format(math.floor(s / 3600))
  elseif s < 2 * 86400 then
    return 'yesterday'
  elseif s < 30 * 86400 then
    return ('%d days ago'):format(math.floor(s / 86400))
  end
  return 'on ' .. iso:sub(1, 10)
end

local LISTED_QUESTION = { ['plan-review'] = 'plan review', approval = 'approval' }

--- What a listed session's live agent does (loaded in this daemon by any editor), or ''.
function M.listed_activity(s)
  if s.activity == 'waiting' then
    local what = type(s.question) == 'string' and (LISTED_QUESTION[s.question] or s.question) or nil
    return what and ('waiting for you: ' .. what) or 'waiting for you'
  end
  return s.activity == 'working' and 'working' or ''
end

--- A session as the pickers show it: title, when, what its live agent does, the goal's
--- status (pure).
function M.session_label(s, now)
  local title = (type(s.title) == 'string' and s.title ~= '') and s.title or 'Untitled session'
  local parts = { title, M.ago(s.updatedAt, now), M.listed_activity(s) }
  if type(s.goal) == 'table' then
    table.insert(parts, 'goal ' .. require('dsh.statusline').goal_text(s.goal))
  end
  return table.concat(vim.tbl_filter(function(p)
    return p ~= ''
  end, parts), '  ·  ')
end

--- The sessions newest first (pure).
function M.newest_first(sessions)
  local out = vim.list_extend({}, sessions or {})
  table.sort(out, function(a, b)
    local ea, eb = M.epoch(a.updatedAt) or 0, M.epoch(b.updatedAt) or 0
    if ea ~= eb then
      return ea > eb
    end
    return tostring(a.sessionId) > tostring(b.sessionId)
  end)
  return out
end

--- Make the workspace's last session current (the one changed most lately); when it has
--- none, `create` says what to do: true makes one, false says so, 'if-any' does nothing.
--- Then `fn(agent_id)`. Neovim takes up where it was left.
function M.reopen_last(fn, create)
  request(requests().session_list, vim.empty_dict(), function(result)
    local state = require('dsh.state')
    if state.agent_id then
      return fn and fn(state.agent_id) -- another command chose a session meanwhile
    end
    local sessions = M.newest_first(result and result.sessions or {})
    state.sessions = sessions
    if sessions[1] then
      return M.open_session(sessions[1].sessionId, false, 'last', fn)
    elseif create == 'if-any' then
      return -- at start: a workspace without sessions gets none until one is needed
    elseif create == false then
      return fail('no session yet. Start one: :Dsh session new, or :Dsh chat')
    end
    request(requests().session_create, vim.empty_dict(), function(created)
      local st = require('dsh.state')
      st.goals[created.agentId] = false
      become(created.agentId, created.sessionId)
      if fn then
        fn(created.agentId)
      end
    end, 'create a session')
  end, 'list sessions')
end

--- Call `fn(agent_id)` with the current agent. When none is current, the workspace's
--- last session becomes current; without any, `create` starts one.
function M.with_agent(fn, create)
  local state = require('dsh.state')
  if state.agent_id then
    return fn(state.agent_id)
  end
  M.reopen_last(fn, create == true)
end
local with_agent = M.with_agent

--- Call `fn(agent_id, ref, view)` with the goal as last announced (read it if unknown).
local function with_goal(fn)
  with_agent(function(agent_id)
    local state = require('dsh.state')
    local view = state.goal(agent_id)
    if view then
      return fn(agent_id, { id = view.id, revision = view.revision }, view)
    end
    request(requests().goal_get, { agentId = agent_id }, function(current)
      if current == nil or current == vim.NIL then
        return fail('this session has no goal. Create one: :Dsh goal create {objective} [rounds]')
      end
      state.set_goal(agent_id, current, 'read')
      fn(agent_id, { id = current.id, revision = current.revision }, current)
    end, 'read the goal')
  end)
end

--- The goal in detail (for :Dsh goal): the daemon's detail lines (objective, state,
--- rounds, tokens), then the actions it accepts (each a :Dsh goal verb).
local function describe_goal(view)
  if not view or view == vim.NIL then
    return 'no goal. Create one: :Dsh goal create {objective} [rounds]'
  end
  local statusline = require('dsh.statusline')
  local lines = vim.list_extend({}, statusline.status(view).detail or {})
  table.insert(lines, 'Actions: ' .. table.concat(statusline.actions(view), ', '))
  return table.concat(lines, '\n')
end
M.describe_goal = describe_goal

--- What :Dsh goal <Tab> offers: the actions the daemon sent with the goal, and
--- `disarm` while rounds run on their own.
---@param view table? GoalView
---@return string[]
function M.goal_verbs(view)
  local verbs = require('dsh.statusline').actions(view)
  if view and view ~= vim.NIL and view.phase == 'active' and view.activation == 'armed' then
    table.insert(verbs, 'disarm')
  end
  return verbs
end

-- Success notices stay short: a message wider than the screen makes Neovim wait for Enter.
local function short_goal(view)
  return require('dsh.statusline').usage(view)
end

--- Open (or reopen) a session and make it current, then `fn(agent_id)`. `how` words
--- the notice: 'open' by default, 'reopened' after the daemon restarted, 'last' for the
--- workspace's last session taken up at start.
function M.open_session(session_id, reload, how, fn)
  local params = { sessionId = session_id }
  if reload then
    params.reload = true
  end
  request(requests().session_open, params, function(result)
    local state = require('dsh.state')
    if reload then
      -- The daemon replaced the session's agent: the old ids are stale now.
      for agent_id, sid in pairs(vim.deepcopy(state.session_of)) do
        if sid == result.sessionId and agent_id ~= result.agentId then
          state.forget(agent_id)
        end
      end
    end
    -- The open result seeds what the session holds; notifications keep it current.
    state.goals[result.agentId] = (result.goal ~= vim.NIL and result.goal) or false
    if type(result.plan) == 'table' then
      state.plans[result.agentId] = { active = result.plan.active == true, pending = result.plan.pending }
    end
    if type(result.activity) == 'string' then
      state.activities[result.agentId] = { activity = result.activity, question = result.question ~= vim.NIL and result.question or nil }
    end
    if type(result.clients) == 'table' then
      state.clients[result.agentId] = result.clients -- who else is attached (a shared daemon)
    end
    become(result.agentId, result.sessionId)
    -- The id only on a plain open (the one chosen); one line either way.
    local label = ({ reopened = 'reopened', last = 'continued (the last one of this workspace)' })[how]
    notify(('session %s · %s'):format(
      label or (result.sessionId .. ' open'),
      require('dsh.statusline').describe(result.goal ~= vim.NIL and result.goal or nil)
    ))
    if fn then
      fn(result.agentId)
    end
  end, (how == 'reopened' and 'reopen' or 'open') .. ' the session')
end
local open_session = M.open_session

--- A fork (`handle`: {agentId, sessionId}, from dsh/session/fork or a rewind of the
--- conversation) becomes the current session, then `fn()`.
function M.became_fork(handle, fn)
  local state = require('dsh.state')
  state.goals[handle.agentId] = false
  become(handle.agentId, handle.sessionId)
  -- A fork inherits goal and plan through its log: read them once to seed the display.
  request(requests().goal_get, { agentId = handle.agentId }, function(view)
    state.set_goal(handle.agentId, view, 'read')
  end, 'read the forked goal')
  request(requests().plan_get, { agentId = handle.agentId }, function(plan)
    state.set_plan(handle.agentId, plan)
  end, 'read the forked plan mode')
  if fn then
    fn()
  end
end

local function pick_session(prompt, on_choice)
  request(requests().session_list, vim.empty_dict(), function(result)
    local sessions = M.newest_first(result and result.sessions or {})
    require('dsh.state').sessions = sessions
    if #sessions == 0 then
      return notify('no sessions in this workspace yet: :Dsh session new')
    end
    local now = os.time()
    vim.ui.select(sessions, {
      prompt = prompt,
      format_item = function(s)
        return M.session_label(s, now)
      end,
    }, function(choice)
      if choice then
        on_choice(choice)
      end
    end)
  end, 'list sessions')
end

--- A goal write naming the ref last announced. `done` is the notice ("goal paused"),
--- `attempt` what the person asked for, for error messages ("pause the goal").
local function goal_write(method, done, attempt, extra)
  with_goal(function(agent_id, ref)
    local params = vim.tbl_extend('force', { agentId = agent_id, ref = ref }, extra or {})
    -- The change's own notification is not told again (this notice says it).
    local op = method:match('([^/]+)$')
    local notices = require('dsh.notices')
    notices.own_write(agent_id, op, 1)
    request(method, params, function(view)
      notices.own_write(agent_id, op, -1)
      notify(('%s · %s'):format(done, short_goal(view)))
    end, attempt, function()
      notices.own_write(agent_id, op, -1)
      return false
    end)
  end)
end

M.actions = {
  status = function()
    local state = require('dsh.state')
    if not state.agent_id then
      return notify('no session. :Dsh session new, :Dsh session open')
    end
    local plan = state.plan() or {}
    local activity = require('dsh.statusline').activity_words[state.activity() or '']
    local others = require('dsh.statusline').others_text(state.others())
    notify(('session %s · plan mode %s%s%s · %s%s'):format(
      state.session_id,
      plan.active and 'on' or 'off',
      plan.pending ~= nil and (' (pending ' .. (plan.pending and 'on' or 'off') .. ')') or '',
      activity and (' · ' .. activity) or '',
      describe_goal(state.goal()),
      others ~= '' and (' · ' .. others) or ''
    ))
  end,
  ['session.new'] = function(a)
    request(requests().session_create, a.title and { title = a.title } or vim.empty_dict(), function(result)
      local state = require('dsh.state')
      state.goals[result.agentId] = false
      state.plans[result.agentId] = { active = false }
      become(result.agentId, result.sessionId)
      notify('new session ' .. result.sessionId)
    end, 'create a session')
  end,
  ['session.open'] = function(a)
    if a.session_id then
      return open_session(a.session_id, a.reload)
    end
    pick_session('Open session', function(s)
      open_session(s.sessionId, a.reload)
    end)
  end,
  ['session.list'] = function()
    pick_session('Sessions (choose one to open)', function(s)
      open_session(s.sessionId, false)
    end)
  end,
  ['session.fork'] = function(a)
    with_agent(function(agent_id)
      request(requests().session_fork, { agentId = agent_id, atSeq = a.at_seq }, function(result)
        M.became_fork(result)
        notify('forked into session ' .. result.sessionId)
      end, 'fork the session')
    end)
  end,
  rewind = function()
    require('dsh.rewind').at_cursor()
  end,
  ['rewind.list'] = function()
    with_agent(function(agent_id)
      require('dsh.rewind').pick(agent_id)
    end)
  end,
  ['session.close'] = function()
    with_agent(function(agent_id)
      request(requests().session_close, { agentId = agent_id }, function()
        require('dsh.state').forget(agent_id)
        notify('session closed')
      end, 'close the session')
    end)
  end,
  prompt = function(a)
    with_agent(function(agent_id)
      local state = require('dsh.state')
      state.count_prompt(agent_id, 1)
      local function done(result, err)
        state.count_prompt(agent_id, -1)
        vim.api.nvim_exec_autocmds('User', {
          pattern = 'DshTurnEnded',
          modeline = false,
          data = { agentId = agent_id, result = result, error = err },
        })
      end
      request(requests().agent_prompt, { agentId = agent_id, text = a.text }, function(result)
        done(result)
        if require('dsh.config').options.notify_turns and result and not a.quiet then
          if result.turn == nil or result.turn == vim.NIL then
            notify(('%s: done'):format(a.text:match('^%S+'))) -- a /command that opened no turn
          elseif result.stopReason ~= 'model-error' and result.stopReason ~= 'error' then -- told by dsh.notices
            local words = { ['end-turn'] = 'finished', cancelled = 'stopped' }
            notify(('turn %s %s'):format(tostring(result.turn), words[result.stopReason] or ('ended: ' .. tostring(result.stopReason))))
          end
        end
      end, 'send the prompt', function(err)
        done(nil, err)
        return false
      end)
    end, true)
  end,
  steer = function(a)
    with_agent(function(agent_id)
      request(requests().agent_steer, { agentId = agent_id, text = a.text }, function(result)
        if result and result.queued then
          notify('steer queued for the next step')
        else
          notify('nothing to steer (no turn is running); use :Dsh prompt {text}', levels.WARN)
        end
      end, 'steer')
    end)
  end,
  cancel = function()
    with_agent(function(agent_id)
      request(requests().agent_cancel, { agentId = agent_id }, function()
        notify('cancelled')
      end, 'cancel')
    end)
  end,
  ['plan.show'] = function()
    with_agent(function(agent_id)
      request(requests().plan_get, { agentId = agent_id }, function(plan)
        notify(('plan mode %s%s'):format(
          plan.active and 'on' or 'off',
          plan.pending ~= nil and (' (switching ' .. (plan.pending and 'on' or 'off') .. ' at the next step)') or ''
        ))
      end, 'read plan mode')
    end)
  end,
  ['plan.set'] = function(a)
    with_agent(function(agent_id)
      request(requests().plan_set, { agentId = agent_id, active = a.active }, function(result)
        local what = a.active and 'on' or 'off'
        local outcome = result and result.outcome
        local messages = {
          committed = 'plan mode ' .. what,
          queued = 'plan mode ' .. what .. ' at the next step of the running turn',
          cancelled = 'plan mode stays ' .. what .. ' (the opposite pending choice was dropped)',
          noop = 'plan mode is already ' .. what,
        }
        notify(messages[outcome] or ('plan mode: ' .. tostring(outcome)))
      end, 'set plan mode')
    end, true)
  end,
  ['plan.history'] = function(a)
    require('dsh.plans').pick(a.index)
  end,
  ['goal.timeline'] = function()
    require('dsh.timeline').open()
  end,
  ['goal.raise'] = function(a)
    M.raise(a)
  end,
  ['goal.show'] = function()
    with_agent(function(agent_id)
      request(requests().goal_get, { agentId = agent_id }, function(view)
        notify(describe_goal(view))
      end, 'read the goal')
    end)
  end,
  ['goal.create'] = function(a)
    if not a.objective then
      return M.ask_goal(function(asked)
        M.actions['goal.create'](asked)
      end)
    end
    with_agent(function(agent_id)
      request(
        requests().goal_create,
        { agentId = agent_id, objective = a.objective, maxRounds = a.max_rounds, maxTokens = a.max_tokens },
        function(view)
          notify(('goal created · %s'):format(short_goal(view)))
        end,
        'create a goal'
      )
    end, true)
  end,
  ['goal.edit'] = function(a)
    if a.objective or a.max_rounds or a.max_tokens then
      return goal_write(
        requests().goal_edit,
        'goal edited',
        'edit the goal',
        { objective = a.objective, maxRounds = a.max_rounds, maxTokens = a.max_tokens }
      )
    end
    with_goal(function(_, _, view)
      vim.ui.input({ prompt = 'Goal objective: ', default = view.objective }, function(objective)
        if objective == nil then
          return
        end
        vim.ui.input({ prompt = 'Round budget: ', default = tostring(view.maxRounds) }, function(rounds)
          if rounds == nil then
            return
          end
          local max_rounds = whole_rounds(rounds)
          if not max_rounds then
            return fail(('%q is not a positive whole number of rounds'):format(rounds))
          end
          local changes = {}
          if objective ~= view.objective then
            changes.objective = objective
          end
          if max_rounds ~= view.maxRounds then
            changes.maxRounds = max_rounds
          end
          if vim.tbl_isempty(changes) then
            return notify('goal unchanged')
          end
          goal_write(requests().goal_edit, 'goal edited', 'edit the goal', changes)
        end)
      end)
    end)
  end,
  ['goal.pause'] = function()
    goal_write(requests().goal_pause, 'goal paused', 'pause the goal')
  end,
  ['goal.resume'] = function()
    goal_write(requests().goal_resume, 'goal resumed', 'resume the goal')
  end,
  ['goal.complete'] = function()
    goal_write(requests().goal_complete, 'goal completed', 'complete the goal')
  end,
  ['goal.block'] = function(a)
    goal_write(requests().goal_block, 'goal blocked', 'block the goal', { reason = { code = a.code, message = a.message } })
  end,
  ['goal.clear'] = function()
    with_goal(function(agent_id, ref)
      request(requests().goal_clear, { agentId = agent_id, ref = ref }, function()
        notify('goal cleared')
      end, 'clear the goal')
    end)
  end,
  ['goal.disarm'] = function()
    with_agent(function(agent_id)
      request(requests().goal_disarm, { agentId = agent_id }, function(view)
        notify(('goal waits for you · %s; nothing continues it until :Dsh goal resume'):format(short_goal(view)))
      end, 'disarm the goal')
    end)
  end,
  transcript = function()
    require('dsh.transcript').open()
  end,
  answer = function()
    if not require('dsh.asks').show_next() then
      notify('nothing waits for your answer')
    end
  end,
  messages = function()
    require('dsh.errors').show_history()
  end,
  chat = function(a)
    require('dsh.chat').open(a.where)
  end,
  ['chat.older'] = function()
    require('dsh.chat').older()
  end,
  config = function()
    require('dsh.configfile').open()
  end,
  trust = function()
    require('dsh.trust').ask()
  end,
  ['permission.show'] = function()
    with_agent(function(agent_id)
      request(requests().permission_get, { agentId = agent_id }, function(policy)
        notify(M.describe_policy(policy))
      end, 'read the sandbox and approval policy')
    end)
  end,
  ['permission.set'] = function(a)
    with_agent(function(agent_id)
      request(requests().permission_set, { agentId = agent_id, sandbox = a.sandbox, approve = a.approve }, function(policy)
        notify(M.describe_policy(policy) .. ' (for this session, until it is reloaded)')
      end, 'change the sandbox and approval policy')
    end)
  end,
  restart = function()
    local client = require('dsh.client')
    local session_id = require('dsh.state').session_id
    local running = client.get()
    local function started()
      if session_id then
        open_session(session_id, false, 'reopened')
      else
        notify(running and 'dshd restarted' or 'dshd started')
      end
    end
    if not running then
      return client.with_client(started)
    end
    local id = running.id
    if client.shared and client.argv then
      -- The workspace's shared daemon: `dshd daemon restart` stops it (every client is
      -- told) and starts the next; each editor on it, this one too, reattaches.
      return client.restart_shared(running, function()
        client.with_client(started)
      end, function(ok, said)
        if not ok then
          return notify('dshd daemon restart failed: ' .. said, vim.log.levels.ERROR)
        end
        notify(said, vim.log.levels.INFO)
      end)
    end
    client.stop()
    -- Wait for the old process to go (it writes checkpoints on shutdown), then start
    -- and reopen the session it had.
    local timer = vim.uv.new_timer()
    local waited = 0
    timer:start(50, 50, vim.schedule_wrap(function()
      waited = waited + 50
      if vim.lsp.get_client_by_id(id) == nil or waited > 5000 then
        timer:stop()
        timer:close()
        client.with_client(started)
      end
    end))
  end,
}

--- A token budget typed by a person: "200k", "1.5M", "50000", "200k tokens" -> the
--- number; '' -> false (no budget); anything else -> nil (pure).
function M.parse_tokens(text)
  text = trim(text or '')
  if text == '' then
    return false
  end
  local _, tokens = token_budget('x ' .. (text:find('tok') and text or (text .. ' tokens')))
  return tokens
end

--- Ask for a goal's budgets: rounds (your config's default offered), then tokens
--- (none unless given); then `done(max_rounds, max_tokens?)`. Nothing when cancelled.
function M.ask_budgets(done)
  request(requests().config_get, vim.empty_dict(), function(config)
    local goals = type(config) == 'table' and type(config.effective) == 'table' and config.effective.goals or {}
    local default_rounds = type(goals) == 'table' and goals.maxRounds or nil
    vim.ui.input({ prompt = 'Round budget: ', default = default_rounds and tostring(default_rounds) or nil }, function(rounds)
      if rounds == nil then
        return
      end
      local max_rounds = whole_rounds(rounds)
      if not max_rounds then
        return fail(('%q is not a positive whole number of rounds'):format(rounds))
      end
      vim.ui.input({ prompt = 'Token budget (like 200k; empty: none): ' }, function(tokens)
        if tokens == nil then
          return
        end
        local max_tokens = M.parse_tokens(tokens)
        if max_tokens == nil then
          return fail(('%q is not a token budget; write it like 200k or 1.5M'):format(tokens))
        end
        done(max_rounds, max_tokens or nil)
      end)
    end)
  end, 'read the default round budget')
end

--- :Dsh goal create without arguments: ask for the objective, then the budgets
--- (M.ask_budgets); then `done(action)`.
function M.ask_goal(done)
  vim.ui.input({ prompt = 'Goal objective: ' }, function(objective)
    if objective == nil or trim(objective) == '' then
      return
    end
    M.ask_budgets(function(max_rounds, max_tokens)
      done({ action = 'goal.create', objective = trim(objective), max_rounds = max_rounds, max_tokens = max_tokens })
    end)
  end)
end

--- The budget a raise offers (pure): the spent one once more on top of what is used
--- (as VS Code offers), so the goal gets as many rounds (or tokens) again as it had.
function M.raise_default(view)
  local reason = type(view.blockedReason) == 'table' and view.blockedReason.code or nil
  if reason == 'token-budget-exhausted' and tonumber(view.maxTokens) then
    return 'tokens', (tonumber(view.tokensUsed) or 0) + tonumber(view.maxTokens)
  end
  return 'rounds', (tonumber(view.roundsStarted) or 0) + (tonumber(view.maxRounds) or 1)
end

--- 200000 -> "200k", 1500000 -> "1.5M", 1234 -> "1234" (pure): how a token budget is offered.
function M.tokens_text(n)
  if n >= 1000000 and n % 100000 == 0 then
    return (('%.1fM'):format(n / 1000000):gsub('%.0M$', 'M'))
  elseif n >= 1000 and n % 100 == 0 then
    return (('%.1fk'):format(n / 1000):gsub('%.0k$', 'k'))
  end
  return tostring(n)
end

--- The "raise" action of a goal blocked for its budget: an edit that raises the budget,
--- then a resume naming the edit's new revision. Without budgets in `a`, asks for the
--- spent one (twice it offered).
function M.raise(a)
  with_goal(function(agent_id, ref, view)
    if not vim.tbl_contains(require('dsh.statusline').actions(view), 'raise') then
      return fail(('the goal was not stopped by its budget (%s): :Dsh goal edit changes budgets'):format(
        require('dsh.statusline').status(view).short
      ))
    end
    local function send(changes)
      local notices = require('dsh.notices')
      notices.own_write(agent_id, 'edit', 1)
      notices.own_write(agent_id, 'resume', 1)
      local function settle()
        notices.own_write(agent_id, 'edit', -1)
        notices.own_write(agent_id, 'resume', -1)
        return false
      end
      request(requests().goal_edit, vim.tbl_extend('force', { agentId = agent_id, ref = ref }, changes), function(edited)
        local new_ref = { id = edited.id, revision = edited.revision }
        request(requests().goal_resume, { agentId = agent_id, ref = new_ref }, function(resumed)
          settle()
          local raised = {}
          if changes.maxRounds then
            table.insert(raised, changes.maxRounds .. ' rounds')
          end
          if changes.maxTokens then
            table.insert(raised, M.tokens_text(changes.maxTokens) .. ' tokens')
          end
          notify(('budget raised to %s; goal resumed · %s'):format(table.concat(raised, ' and '), short_goal(resumed)))
        end, 'resume the goal after raising its budget', settle)
      end, 'raise the goal budget', settle)
    end
    if a.max_rounds or a.max_tokens then
      return send({ maxRounds = a.max_rounds, maxTokens = a.max_tokens })
    end
    local which, offered = M.raise_default(view)
    if which == 'tokens' then
      vim.ui.input({
        prompt = ('Token budget (%s used of %s) raised to: '):format(require('dsh.timeline').tokens(view.tokensUsed), M.tokens_text(view.maxTokens)),
        default = M.tokens_text(offered),
      }, function(text)
        if text == nil then
          return
        end
        local tokens = M.parse_tokens(text)
        if not tokens then
          return fail(('%q is not a token budget; write it like 200k or 1.5M'):format(text))
        end
        send({ maxTokens = tokens })
      end)
    else
      vim.ui.input({
        prompt = ('Round budget (%d of %d used) raised to: '):format(tonumber(view.roundsStarted) or 0, tonumber(view.maxRounds) or 0),
        default = tostring(offered),
      }, function(text)
        if text == nil then
          return
        end
        local rounds = whole_rounds(text)
        if not rounds then
          return fail(('%q is not a positive whole number of rounds'):format(text))
        end
        send({ maxRounds = rounds })
      end)
    end
  end)
end

--- "commands run in workspace-write, network off; asks before write, exec" (pure).
function M.describe_policy(policy)
  policy = type(policy) == 'table' and policy or {}
  local approve = type(policy.approve) == 'table' and policy.approve or {}
  return ('commands run in %s, network %s; %s'):format(
    tostring(policy.sandbox or '?'),
    policy.network and 'on' or 'off',
    #approve > 0 and ('asks before ' .. table.concat(approve, ', ')) or 'asks before nothing'
  )
end

--- The :Dsh command.
function M.run(opts)
  local action, err = M.parse(opts.args or '', opts.bang)
  if not action then
    return fail(err)
  end
  return M.actions[action.action](action)
end

return M
