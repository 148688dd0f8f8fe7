-- Statusline text for a goal (pure: a GoalView in, a string out).
local M = {}

M.icon = '◎'

--- `◎ 37/256 active`; `◎ 37/256 active · disarmed` while nothing will continue it;
--- `◎ 37/256 blocked: <code>`; `◎ no goal`. `view` is a GoalView (SPEC 6) or nil.
---@param view table?
---@return string
function M.format(view)
  if view == nil or view == vim.NIL then
    return M.icon .. ' no goal'
  end
  local text = ('%s %d/%d %s'):format(
    M.icon,
    tonumber(view.roundsStarted) or 0,
    tonumber(view.maxRounds) or 0,
    tostring(view.phase or '?')
  )
  if view.phase == 'blocked' and type(view.blockedReason) == 'table' and view.blockedReason.code then
    text = text .. ': ' .. tostring(view.blockedReason.code)
  elseif view.phase == 'active' and view.activation == 'disarmed' then
    text = text .. ' · disarmed'
  end
  -- A statusline expression treats % as an item; no field should hold one, but be safe.
  return (text:gsub('%%', '%%%%'))
end

--- The highlight group that suits `view`: a warning while blocked, a hint while an
--- active goal is disarmed (nothing will continue it), nil otherwise.
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
