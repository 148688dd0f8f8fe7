-- plan-review: the plan the model proposed, quoted, with the person's verdict. Shown
-- open while it waits for the review; folded once decided.
local text = require('dsh.chat.text')

local M = { kinds = { 'plan-review' } }

local outcome_hl = {
  pending = 'DiagnosticInfo',
  approved = 'DiagnosticOk',
  ['sent-back'] = 'DiagnosticWarn',
  ['not-reviewed'] = 'Comment',
}

function M.format(item, prev)
  local lines, hl = {}, {}
  if not text.continues(item, prev) then
    table.insert(lines, text.reply_heading)
  end
  -- While the plan is still arriving nobody can review it yet.
  local outcome = item.partial and 'being written…' or tostring(item.outcomeText or item.outcome or '')
  table.insert(lines, ('### %s · %s'):format(tostring(item.title or 'Plan'), outcome))
  hl[#lines] = outcome_hl[item.outcome]
  local first = #lines + 1
  for _, line in ipairs(text.split(item.plan)) do
    table.insert(lines, line == '' and '>' or ('> ' .. line))
  end
  if item.partial then
    lines[#lines] = lines[#lines] .. require('dsh.chat.formatters.message').cursor
  end
  local last = #lines
  if type(item.feedback) == 'string' and item.feedback ~= '' then
    for i, line in ipairs(text.split(item.feedback)) do
      table.insert(lines, (i == 1 and '↳ ' or '  ') .. line)
      hl[#lines] = 'DiagnosticWarn'
    end
  end
  if type(item.detail) == 'string' and item.detail ~= '' then
    table.insert(lines, 'Not reviewed: ' .. item.detail)
    hl[#lines] = 'Comment'
  end
  if item.outcome == 'pending' and not item.partial then
    table.insert(lines, '_(waiting for your review: ga or :Dsh answer opens it · a approve · g approve and start a goal · r keep planning)_')
    hl[#lines] = 'Comment'
  end
  local fold = (item.outcome ~= 'pending' and not item.partial and last >= first) and { first, last } or nil
  table.insert(lines, '')
  return { lines = lines, fold = fold, hl = hl }
end

return M
