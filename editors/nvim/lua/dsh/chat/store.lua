-- The chat items of one agent, in order, kept by id (pure): an upsert replaces the
-- item with the same id in place, or appends it. Exactly what dsh/chat/item asks.
local M = {}
M.__index = M

function M.new()
  return setmetatable({ order = {}, by_id = {}, index = {} }, M)
end

--- Replace or append `item`; returns its position and whether it is new.
---@return integer position
---@return boolean added
function M:upsert(item)
  local at = self.index[item.id]
  if at then
    self.order[at] = item
    self.by_id[item.id] = item
    return at, false
  end
  table.insert(self.order, item)
  at = #self.order
  self.index[item.id] = at
  self.by_id[item.id] = item
  return at, true
end

--- The item before position `at` (for formatters that continue the one before).
function M:before(at)
  return self.order[at - 1]
end

function M:get(id)
  return self.by_id[id]
end

function M:items()
  return self.order
end

return M
