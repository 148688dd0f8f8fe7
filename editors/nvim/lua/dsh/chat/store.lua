-- The chat items of one agent, in order, kept by id (pure): an upsert replaces the
-- item with the same id in place, or appends it. Exactly what dsh/chat/item asks.
local M = {}
M.__index = M

function M.new()
  return setmetatable({ order = {}, index = {} }, M)
end

--- Replace or append `item`; returns its position.
---@return integer position
function M:upsert(item)
  local at = self.index[item.id]
  if at then
    self.order[at] = item
    return at
  end
  table.insert(self.order, item)
  at = #self.order
  self.index[item.id] = at
  return at
end

--- Put `items` (an older page, in list order) in front of those held; an id already
--- held keeps its newer form.
function M:prepend(items)
  local older = vim.tbl_filter(function(item)
    return self.index[item.id] == nil
  end, items)
  if #older == 0 then
    return
  end
  vim.list_extend(older, self.order)
  self.order, self.index = older, {}
  for at, item in ipairs(older) do
    self.index[item.id] = at
  end
end

--- The item before position `at` (for formatters that continue the one before).
function M:before(at)
  return self.order[at - 1]
end

function M:items()
  return self.order
end

return M
