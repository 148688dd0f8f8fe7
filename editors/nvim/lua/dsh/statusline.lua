-- Goal status in a person's words (pure: a GoalView in, strings out). The same text,
-- tooltip lines, severity and actions as the VS Code status bar and the daemon's own
-- words; tests/fixtures/status/goal-status.json holds the cases all three check.
local M = {}

M.icon = '◎'
M.busy_mark = '⟳'

local function int(v)
  return type(v) == 'number' and v == math.floor(v) and v or nil
end

--- Tokens are shown once some were counted, or beside a budget: every daemon sends
--- tokensUsed, and "0 tok" for a model that reports no usage says nothing (pure).
local function counted(used, max)
  return used ~= nil and (used > 0 or max ~= nil)
end

--- "12.5" from 125 tenths, "12" from 120 (pure).
local function tenths(n)
  if n % 10 == 0 then
    return tostring(n / 10)
  end
  return ('%d.%d'):format(math.floor(n / 10), n % 10)
end

--- A token count as people read it: 950, 12.4k, 182k, 1.3M. Halves round up, in
--- integer arithmetic like every other client (pure).
---@param n number
---@return string
function M.tokens(n)
  n = math.floor(tonumber(n) or 0)
  if n < 1000 then
    return tostring(n)
  elseif n < 100000 then
    return tenths(math.floor((n + 50) / 100)) .. 'k'
  end
  local thousands = math.floor((n + 500) / 1000)
  if thousands < 1000 then
    return thousands .. 'k'
  end
  return tenths(math.floor((n + 50000) / 100000)) .. 'M'
end

local ACTION_ORDER = { 'create', 'edit', 'pause', 'resume', 'complete', 'block', 'clear' }

--- The goal operations the daemon accepts now, in a fixed order: `resume` only with
--- rounds left (on an active goal, only while it waits for the person); a complete
--- goal offers `create` and `clear` (pure).
---@param view table? GoalView
---@return string[]
function M.actions(view)
  if view == nil or view == vim.NIL then
    return { 'create' }
  end
  local left = (int(view.roundsLeft) or 0) > 0
  local waiting = view.activation ~= 'armed'
  local allowed
  if view.phase == 'active' then
    allowed = { edit = true, pause = true, complete = true, block = true, clear = true, resume = waiting and left }
  elseif view.phase == 'paused' then
    allowed = { edit = true, complete = true, block = true, clear = true, resume = left }
  elseif view.phase == 'blocked' then
    allowed = { edit = true, complete = true, clear = true, resume = left }
  else
    allowed = { create = true, clear = true }
  end
  return vim.tbl_filter(function(a)
    return allowed[a] == true
  end, ACTION_ORDER)
end

--- The last part of the status text: the phase, or what the goal waits for (pure).
local function state_words(view)
  local reason = type(view.blockedReason) == 'table' and view.blockedReason or nil
  if view.phase == 'active' and view.activation ~= 'armed' then
    return (int(view.roundsLeft) or 0) > 0 and 'waiting for you to resume' or 'round budget spent'
  elseif view.phase == 'blocked' and reason then
    return 'blocked: ' .. tostring(reason.code)
  end
  return tostring(view.phase)
end

--- `{text, tooltip, severity, actions}` for a GoalView or nil (pure). `text` has no
--- icon: `3/40 · 12.4k tok · active`, `40/40 · blocked: <code>`, `no goal`. No
--- revision anywhere.
---@param view table?
---@return {text: string, tooltip: string[], severity: 'none'|'hint'|'warning', actions: string[]}
function M.status(view)
  if view == nil or view == vim.NIL then
    return { text = 'no goal', tooltip = { 'No goal in this session.', 'Actions: create' }, severity = 'none', actions = { 'create' } }
  end
  local used, max, left = int(view.roundsStarted) or 0, int(view.maxRounds) or 0, int(view.roundsLeft) or 0
  local waiting = view.phase == 'active' and view.activation ~= 'armed'
  local reason = type(view.blockedReason) == 'table' and view.blockedReason or nil
  local tokens_used, max_tokens = int(view.tokensUsed), int(view.maxTokens)
  local parts = { ('%d/%d'):format(used, max) }
  if counted(tokens_used, max_tokens) then
    table.insert(parts, max_tokens and ('%s/%s tok'):format(M.tokens(tokens_used), M.tokens(max_tokens)) or (M.tokens(tokens_used) .. ' tok'))
  end
  table.insert(parts, state_words(view))
  local state
  if view.phase == 'active' then
    if not waiting then
      state = 'Active: rounds continue on their own.'
    elseif left > 0 then
      state = 'Active, waiting for you to resume: nothing runs until you do.'
    else
      state = 'Active, but its round budget is spent: raise it (edit) to go on.'
    end
  elseif view.phase == 'paused' then
    state = 'Paused: nothing runs until you resume.'
  elseif view.phase == 'blocked' then
    state = reason and ('Blocked: %s (%s)'):format(tostring(reason.message), tostring(reason.code)) or 'Blocked.'
  else
    state = 'Complete.'
  end
  local tooltip = {
    'Goal: ' .. tostring(view.objective or ''),
    state,
    ('Rounds: %d of %d used, %d left'):format(used, max, left),
  }
  if counted(tokens_used, max_tokens) then
    table.insert(
      tooltip,
      max_tokens and ('Tokens: %s of %s used'):format(M.tokens(tokens_used), M.tokens(max_tokens))
        or ('Tokens: %s used'):format(M.tokens(tokens_used))
    )
  end
  local actions = M.actions(view)
  table.insert(tooltip, 'Actions: ' .. table.concat(actions, ', '))
  local severity = view.phase == 'blocked' and 'warning' or (waiting and 'hint' or 'none')
  return { text = table.concat(parts, ' · '), tooltip = tooltip, severity = severity, actions = actions }
end

--- The goal's status text (the shared words, no icon).
function M.goal_text(view)
  return M.status(view).text
end

M.activity_words = { working = 'working…', waiting = 'waiting for you', paused = 'paused' }

--- The statusline text: `◎ 3/40 · active`, with `plan` while plan mode is on, a busy
--- mark while a model request or a tool runs, and `waiting for you` while a question
--- (an approval, a plan review) is open:
--- `◎ ⟳ plan · 3/40 · 12.4k tok · active`, `◎ waiting for you · plan · no goal`.
--- `%` is escaped for 'statusline'.
---@param view table? GoalView
---@param opts table? {plan: boolean, activity: 'working'|'waiting'|'paused'|nil, busy: boolean}
---@return string
function M.format(view, opts)
  opts = opts or {}
  local activity = opts.activity or (opts.busy and 'working' or nil)
  local head = M.icon
  if activity == 'working' then
    head = head .. ' ' .. M.busy_mark
  elseif activity == 'waiting' then
    head = head .. ' ' .. M.activity_words.waiting .. ' ·'
  end
  local text = head .. ' ' .. (opts.plan and 'plan · ' or '') .. M.goal_text(view)
  return (text:gsub('%%', '%%%%'))
end

--- "3 of 40 rounds used", with ", 12.4k tokens" when counted, for notices (pure).
function M.usage(view)
  if view == nil or view == vim.NIL then
    return 'no goal'
  end
  local text = ('%d of %d rounds used'):format(int(view.roundsStarted) or 0, int(view.maxRounds) or 0)
  if counted(int(view.tokensUsed), int(view.maxTokens)) then
    text = text .. ', ' .. M.tokens(view.tokensUsed) .. ' tokens'
  end
  return text
end

--- The goal in a sentence, for notices: "3 of 40 rounds used · active" (pure).
function M.describe(view)
  if view == nil or view == vim.NIL then
    return 'no goal'
  end
  return M.usage(view) .. ' · ' .. state_words(view)
end

local SEVERITY_HL = { hint = 'DiagnosticHint', warning = 'DiagnosticWarn' }

--- The highlight group that suits `view`: a warning while blocked, a hint while an
--- active goal waits for the person, nil otherwise.
---@param view table?
---@return string?
function M.highlight(view)
  return SEVERITY_HL[M.status(view).severity]
end

return M
