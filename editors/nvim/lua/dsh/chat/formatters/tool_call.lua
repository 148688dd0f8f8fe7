-- tool-call: one line that says what the tool does and how it went; its arguments and
-- result below it, folded.
local text = require('dsh.chat.text')

local M = { kinds = { 'tool-call' } }

M.marks = { running = '⋯', ok = '✓', failed = '✗' }
local status_hl = { running = 'DiagnosticInfo', failed = 'DiagnosticError' }

-- Results that are diffs read better highlighted as one.
local result_lang = { edit_file = 'diff', write_file = 'diff' }

local function argument_lines(arguments)
  local out = {}
  local keys = vim.tbl_keys(arguments)
  table.sort(keys)
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

function M.format(item)
  local head = ('▸ %s %s'):format(tostring(item.title or item.name), M.marks[item.status] or '')
  if item.discarded then
    head = head .. ' (not run: the turn ended first)'
  end
  local lines = { head }
  local hl = { [1] = item.discarded and 'Comment' or status_hl[item.status] }
  if type(item.arguments) == 'table' and next(item.arguments) ~= nil then
    vim.list_extend(lines, argument_lines(item.arguments))
  elseif type(item.argumentsText) == 'string' and item.argumentsText ~= '' then
    table.insert(lines, '  arguments so far: ' .. item.argumentsText:gsub('\n', ' '))
  end
  if type(item.result) == 'string' then
    table.insert(lines, '  result:')
    vim.list_extend(lines, text.fenced(item.result, result_lang[item.name], '  '))
  end
  local fold = #lines > 1 and { 2, #lines } or nil
  table.insert(lines, '')
  return { lines = lines, fold = fold, hl = hl }
end

return M
