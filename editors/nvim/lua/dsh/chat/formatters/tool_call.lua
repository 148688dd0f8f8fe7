-- tool-call: one line that says what the tool does and how it went; its arguments and
-- result below it, folded.
local text = require('dsh.chat.text')

local M = { kinds = { 'tool-call' } }

-- waiting: its approval is open, nothing runs until the person decides.
M.marks = { running = '⋯', waiting = '⏸ waiting for you', ok = '✓', failed = '✗' }
local status_hl = { running = 'DiagnosticInfo', waiting = 'DiagnosticWarn', failed = 'DiagnosticError' }

-- What the call is about first (the path, the command), the bulk after.
local key_rank = { path = 1, pattern = 2, command = 3, cwd = 4, oldText = 5, newText = 6, content = 7 }

local function argument_lines(arguments)
  local out = {}
  local keys = vim.tbl_keys(arguments)
  table.sort(keys, function(a, b)
    local ra, rb = key_rank[a] or 50, key_rank[b] or 50
    if ra ~= rb then
      return ra < rb
    end
    return a < b
  end)
  for _, key in ipairs(keys) do
    local value = arguments[key]
    if type(value) == 'string' and value:find('\n') then
      table.insert(out, '  ' .. key .. ':')
      vim.list_extend(out, text.fenced(value, nil, '  '))
    else
      local shown = type(value) == 'string' and value or vim.json.encode(value)
      table.insert(out, ('  %s: %s'):format(key, shown))
    end
  end
  return out
end

function M.format(item, prev)
  local mark = M.marks[item.status] or ''
  if item.status == 'waiting' and type(item.waitingFor) == 'string' then
    mark = '⏸' -- the line below says it in words, with how to answer
  end
  local head = ('▸ %s %s'):format(tostring(item.title or item.name), mark)
  if item.discarded then
    head = head .. ' (not run: the turn ended first)'
  end
  local lines, hl = {}, {}
  if not text.continues(item, prev) then
    table.insert(lines, text.reply_heading)
  end
  table.insert(lines, head)
  hl[#lines] = item.discarded and 'Comment' or status_hl[item.status]
  local virt = { [#lines] = text.rewind_virt(item) }
  if type(item.waitingFor) == 'string' then
    -- Not folded: the person must see it. The float may have been closed (q).
    table.insert(lines, ('  ⏸ waiting for you: %s · ga or :Dsh answer opens it'):format(item.waitingFor))
    hl[#lines] = 'DiagnosticWarn'
  end
  local head_at = #lines
  if type(item.arguments) == 'table' and next(item.arguments) ~= nil then
    vim.list_extend(lines, argument_lines(item.arguments))
  elseif type(item.argumentsText) == 'string' and item.argumentsText ~= '' then
    table.insert(lines, '  arguments so far: ' .. item.argumentsText:gsub('\n', ' '))
  end
  if type(item.result) == 'string' then
    table.insert(lines, '  result:')
    -- An edit's result is a unified diff: highlight it as one.
    local lang = (item.result:match('^%-%-%- ') or item.result:match('^@@')) and 'diff' or nil
    vim.list_extend(lines, text.fenced(item.result, lang, '  '))
  end
  local fold = #lines > head_at and { head_at + 1, #lines } or nil
  table.insert(lines, '')
  return { lines = lines, fold = fold, hl = hl, virt = virt }
end

return M
