-- One-line notices whose words the daemon wrote (`item.text`): the session, goal
-- changes, plan mode, permission answers, compaction, retries, and dshd's notices about
-- the item before (a reply that wrote a tool call as text).
local text = require('dsh.chat.text')

local M = { kinds = { 'session', 'goal', 'plan-mode', 'permission', 'compaction', 'retry', 'notice' } }

local goal_hl = { block = 'DiagnosticWarn', complete = 'DiagnosticOk' }

function M.format(item)
  local words = tostring(item.text or '')
  if item.kind == 'session' then
    return { lines = { '# ' .. words, '' } }
  elseif item.kind == 'goal' then
    return { lines = { '◎ ' .. words, '' }, hl = { [1] = goal_hl[item.op] or 'DiagnosticHint' } }
  elseif item.kind == 'plan-mode' then
    return { lines = { '◇ ' .. words, '' }, hl = { [1] = 'Comment' } }
  elseif item.kind == 'permission' then
    return { lines = { '  ↳ ' .. words, '' }, hl = { [1] = item.outcome == 'reject' and 'DiagnosticWarn' or 'DiagnosticOk' } }
  elseif item.kind == 'retry' then
    return { lines = { '↻ ' .. words, '' }, hl = { [1] = 'DiagnosticWarn' } }
  elseif item.kind == 'notice' then
    return { lines = { '⚠ ' .. words, '' }, hl = { [1] = 'DiagnosticWarn' } }
  end
  -- compaction: what the model now sees instead of the earlier events, folded
  local lines = { '⇣ ' .. words }
  for _, line in ipairs(text.split(item.summary)) do
    table.insert(lines, '> ' .. line)
  end
  local fold = #lines > 1 and { 2, #lines } or nil
  table.insert(lines, '')
  return { lines = lines, fold = fold, hl = { [1] = 'Comment' } }
end

return M
