-- Text helpers the chat formatters share (pure).
local M = {}

--- Text as buffer lines (no embedded newlines), trailing newline dropped (pure).
function M.split(text)
  local lines = vim.split(tostring(text or ''):gsub('\r\n', '\n'), '\n', { plain = true })
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- A fenced block around `text` whose fence no line of `text` can close (pure).
function M.fenced(text, lang, indent)
  indent = indent or ''
  local fence = '```'
  for _, line in ipairs(M.split(text)) do
    local run = line:match('^%s*(`+)')
    if run and #run >= #fence then
      fence = string.rep('`', #run + 1)
    end
  end
  local out = { indent .. fence .. (lang or '') }
  for _, line in ipairs(M.split(text)) do
    table.insert(out, indent .. line)
  end
  table.insert(out, indent .. fence)
  return out
end

--- Whether `item` continues the reply `prev` belongs to (same turn, after the model's
--- text, a tool call, a plan or a permission answer): then it needs no new heading.
function M.continues(item, prev)
  return prev ~= nil
    and prev.turn ~= nil
    and prev.turn == item.turn
    and (prev.kind == 'assistant-message' or prev.kind == 'tool-call' or prev.kind == 'plan-review' or prev.kind == 'permission')
end

M.reply_heading = '## dsh'

-- Beside a message or tool call that has a checkpoint (the chat's rewind key, R).
M.rewind_key = 'R'
M.rewind_hint = '  ⟲ ' .. M.rewind_key .. ' rewinds to here'

--- The end-of-line hint of an item that can rewind, or nil (pure).
function M.rewind_virt(item)
  if type(item.checkpoint) == 'number' then
    return { M.rewind_hint, 'Comment' }
  end
  return nil
end

return M
