-- One formatter per chat item kind. A formatter is pure: `format(item, prev)` returns
-- `{lines, fold?, hl?, virt?}` where `fold = {first, last}` (1-based, within `lines`) is the
-- part shown folded, `hl` maps a line number (within `lines`) to a highlight group and
-- `virt` a line number to `{text, group}` shown at the end of that line (a key's hint).
-- `prev` is the item shown before it (to continue a reply without a new heading).
-- The builder (dsh.chat.builder) is the only one that writes them into a buffer.
local M = {}

local by_kind = {}
for _, name in ipairs({ 'message', 'tool_call', 'plan_review', 'notice', 'turn_end' }) do
  local formatter = require('dsh.chat.formatters.' .. name)
  for _, kind in ipairs(formatter.kinds) do
    by_kind[kind] = formatter
  end
end

--- Whether a formatter knows `kind` (items of other kinds are not shown: a newer
--- daemon may send kinds this plugin does not know).
function M.knows(kind)
  return by_kind[kind] ~= nil
end

---@return {lines: string[], fold: integer[]?, hl: table<integer, string>?, virt: table<integer, string[]>?}?
function M.format(item, prev)
  local formatter = by_kind[item.kind]
  if not formatter then
    return nil
  end
  local out = formatter.format(item, prev)
  assert(#out.lines >= 1, 'a formatter returns at least one line')
  return out
end

return M
