-- turn-end: a rule that marks where a turn ended and why (the daemon's words).
local M = { kinds = { 'turn-end' } }

function M.format(item)
  local hl = 'Comment'
  if item.error ~= nil or item.stopReason == 'model-error' or item.stopReason == 'error' then
    hl = 'DiagnosticError'
  elseif item.stopReason ~= 'end-turn' then
    hl = 'DiagnosticWarn'
  end
  return { lines = { ('─── %s ───'):format(tostring(item.text or ('Turn ' .. tostring(item.turn)))), '' }, hl = { [1] = hl } }
end

return M
