-- user-message and assistant-message: a heading per speaker, then the text as markdown.
local text = require('dsh.chat.text')

local M = { kinds = { 'user-message', 'assistant-message' } }

M.cursor = '▍' -- shown at the end of a reply that is still streaming

function M.format(item, prev)
  local lines, hl, virt = {}, {}, {}
  if item.kind == 'user-message' then
    table.insert(lines, '## ' .. tostring(item.label or 'You'))
    virt[#lines] = text.rewind_virt(item)
    for _, line in ipairs(text.split(item.text)) do
      table.insert(lines, line)
      if item.sender ~= 'person' then
        hl[#lines] = 'Comment' -- what a plugin or the goal told the model, not the person
      end
    end
  else
    if not text.continues(item, prev) then
      table.insert(lines, text.reply_heading)
    end
    local body = item.text or ''
    if body ~= '' or item.partial then
      for _, line in ipairs(text.split(body)) do
        table.insert(lines, line)
        if item.discarded then
          hl[#lines] = 'Comment'
        end
      end
      if item.partial then
        lines[#lines] = lines[#lines] .. M.cursor
      end
    end
    if item.discarded then
      table.insert(lines, '_(not kept: the turn ended before this reply was complete)_')
      hl[#lines] = 'Comment'
    end
  end
  table.insert(lines, '')
  return { lines = lines, hl = hl, virt = virt }
end

return M
