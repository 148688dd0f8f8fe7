-- Status text (pure: values in, strings out). The goal's text is the same in both
-- editors; tests/fixtures/status/ holds the cases both suites check.
local M = {}

M.icon = '◎'
M.busy_mark = '⟳'

--- 950 -> "950", 12400 -> "12.4k", 12000 -> "12k", 1250000 -> "1.25M" (pure).
---@param n number
---@return string
function M.tokens(n)
  n = tonumber(n) or 0
  local function short(x, unit, decimals)
    local text = ('%.' .. decimals .. 'f'):format(x)
    text = text:gsub('%.?0+$', '')
    return text .. unit
  end
  if n < 1000 then
    return tostring(math.floor(n))
  elseif n < 1000000 then
    return short(math.floor(n / 100) / 10, 'k', 1)
  end
  return short(math.floor(n / 10000) / 100, 'M', 2)
end

--- The phase in a person's words: an active goal that nothing will continue (every
--- load starts that way) is "waiting for you to resume".
local function phase_words(view)
  if view.phase == 'active' and view.activation == 'disarmed' then
    return 'waiting for you to resume'
  elseif view.phase == 'blocked' and type(view.blockedReason) == 'table' and view.blockedReason.code then
    return 'blocked: ' .. tostring(view.blockedReason.code)
  end
  return tostring(view.phase or '?')
end

--- "12.4k tok", "12.4k/50k tok", or nil before any token was counted (pure).
local function token_part(view)
  local used = tonumber(view.tokensUsed)
  local max = tonumber(view.maxTokens)
  if max then
    return ('%s/%s tok'):format(M.tokens(used or 0), M.tokens(max))
  elseif used then
    return M.tokens(used) .. ' tok'
  end
  return nil
end

--- The goal's status text: `3/40 · 12.4k tok · active`, `40/40 · blocked: <code>`,
--- `3/40 · waiting for you to resume`, `no goal`. No revision: that is for details.
---@param view table? a GoalView
---@return string
function M.goal_text(view)
  if view == nil or view == vim.NIL then
    return 'no goal'
  end
  local parts = { ('%d/%d'):format(tonumber(view.roundsStarted) or 0, tonumber(view.maxRounds) or 0) }
  local tokens = token_part(view)
  if tokens then
    table.insert(parts, tokens)
  end
  table.insert(parts, phase_words(view))
  return table.concat(parts, ' · ')
end

--- The statusline text: `◎ 3/40 · active`, with `plan` while plan mode is on and a
--- busy mark while a turn (a prompt or a goal round) runs:
--- `◎ ⟳ plan · 3/40 · 12.4k tok · active`. `%` is escaped for 'statusline'.
---@param view table? GoalView
---@param opts table? {plan: boolean, busy: boolean}
---@return string
function M.format(view, opts)
  opts = opts or {}
  local head = M.icon .. (opts.busy and (' ' .. M.busy_mark) or '')
  local text = head .. ' ' .. (opts.plan and 'plan · ' or '') .. M.goal_text(view)
  return (text:gsub('%%', '%%%%'))
end

--- "3 of 40 rounds used", with ", 12.4k tokens" when counted (pure).
function M.usage(view)
  if view == nil or view == vim.NIL then
    return 'no goal'
  end
  local text = ('%d of %d rounds used'):format(tonumber(view.roundsStarted) or 0, tonumber(view.maxRounds) or 0)
  local tokens = token_part(view)
  if tokens then
    text = text .. ', ' .. tokens:gsub(' tok$', ' tokens')
  end
  return text
end

--- The goal in a sentence, for notices: "3 of 40 rounds used · active" (pure).
function M.describe(view)
  if view == nil or view == vim.NIL then
    return 'no goal'
  end
  return M.usage(view) .. ' · ' .. phase_words(view)
end

--- The highlight group that suits `view`: a warning while blocked, a hint while an
--- active goal waits for the person to resume it, nil otherwise.
---@param view table?
---@return string?
function M.highlight(view)
  if view == nil or view == vim.NIL then
    return nil
  end
  if view.phase == 'blocked' then
    return 'DiagnosticWarn'
  elseif view.phase == 'active' and view.activation == 'disarmed' then
    return 'DiagnosticHint'
  end
  return nil
end

return M
