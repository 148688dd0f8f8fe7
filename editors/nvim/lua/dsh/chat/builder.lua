-- The one writer of a chat buffer. It lays out the conversation (each chat item as its
-- formatter renders it, in the daemon's order) above a prompt area where the person
-- types, keeps an extmark at the first line of every item so an upsert rewrites just
-- that item (a streaming reply changes only its last lines), answers the folds the
-- formatters ask for ('foldexpr'). Lines go in above the prompt area, so a window whose
-- cursor is there (where the person types) keeps showing the end without scrolling it.
local formatters = require('dsh.chat.formatters')

local M = {}

local ns = vim.api.nvim_create_namespace('dsh.chat')
local hl_ns = vim.api.nvim_create_namespace('dsh.chat.hl')

M.prompt_hint = '── your message · <CR> sends (normal mode) · <C-s> sends · :Dsh stop ──'

---@class dsh.ChatBuilder
---@field buf integer
---@field entries table<string, {mark: integer, count: integer, fold: integer[]?}>
---@field order string[] item ids in buffer order
---@field prompt_mark integer
---@field folds integer[][]? cached {first, last} line numbers, nil when stale
local Builder = {}
Builder.__index = Builder

local builders = {} ---@type table<integer, dsh.ChatBuilder>

local function row_of(buf, mark)
  return vim.api.nvim_buf_get_extmark_by_id(buf, ns, mark, {})[1]
end

--- The builder of `buf`, making `buf` a chat buffer on first use (prompt area only).
---@return dsh.ChatBuilder
function M.attach(buf)
  if builders[buf] then
    return builders[buf]
  end
  local self = setmetatable({ buf = buf, entries = {}, order = {}, folds = nil }, Builder)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '' })
  self:place_prompt(0)
  builders[buf] = self
  -- The person's own edits move lines too: read the ranges from the marks again.
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    buffer = buf,
    callback = function()
      self.folds = nil
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      builders[buf] = nil
    end,
  })
  return self
end

function M.get(buf)
  return builders[buf]
end

--- Put the prompt area's mark (and the hint above it) at `row`. Setting a mark by id
--- replaces all its options, so they are all given every time.
function Builder:place_prompt(row)
  self.prompt_mark = vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {
    id = self.prompt_mark,
    right_gravity = false, -- typing at the start of the prompt never pushes it down
    virt_lines = { { { M.prompt_hint, 'Comment' } } },
    virt_lines_above = true,
  })
end

--- The first line (0-based) of the prompt area.
function Builder:prompt_row()
  return row_of(self.buf, self.prompt_mark)
end

local function set_lines(self, first, last, lines)
  vim.bo[self.buf].modifiable = true
  vim.api.nvim_buf_set_lines(self.buf, first, last, false, lines)
end

local function same_fold(a, b)
  return (a == nil and b == nil) or (a ~= nil and b ~= nil and a[1] == b[1] and a[2] == b[2])
end

--- The fold ranges as they will be once item `id` (at `row`, now `fold`, grown by
--- `delta` lines) is written. Neovim evaluates 'foldexpr' for the changed lines while
--- the buffer is written, so the ranges must be right before the write, not after.
local function ranges_after(self, id, row, fold, delta)
  local out = {}
  local placed = false
  for _, r in ipairs(self:fold_ranges()) do
    if r.id ~= id then
      if r[1] > row then
        if not placed and fold then
          table.insert(out, { row + fold[1], row + fold[2], id = id })
          placed = true
        end
        table.insert(out, { r[1] + delta, r[2] + delta, id = r.id })
      else
        table.insert(out, r)
      end
    end
  end
  if not placed and fold then
    table.insert(out, { row + fold[1], row + fold[2], id = id })
  end
  return out
end

local function paint(self, row, out)
  local count = #out.lines
  vim.api.nvim_buf_clear_namespace(self.buf, hl_ns, row, row + count)
  for line, group in pairs(out.hl or {}) do
    if line >= 1 and line <= count then
      vim.api.nvim_buf_set_extmark(self.buf, hl_ns, row + line - 1, 0, { line_hl_group = group, priority = 90 })
    end
  end
  -- Hints at the end of a line (what a key does there): shown, never part of the text.
  for line, chunk in pairs(out.virt or {}) do
    if line >= 1 and line <= count then
      vim.api.nvim_buf_set_extmark(self.buf, hl_ns, row + line - 1, 0, {
        virt_text = { { chunk[1], chunk[2] or 'Comment' } },
        virt_text_pos = 'eol',
      })
    end
  end
end

--- Show `item` (at position `at` of the list, after `prev`): rewrite its lines, or
--- add them above the prompt area when it is new. Items of kinds no formatter knows
--- are not shown.
function Builder:upsert(item, prev)
  local out = formatters.format(item, prev)
  if not out then
    return
  end
  local entry = self.entries[item.id]
  if entry then
    local first = row_of(self.buf, entry.mark)
    local old = vim.api.nvim_buf_get_lines(self.buf, first, first + entry.count, false)
    -- Only from the first changed line: a streaming reply rewrites its tail. A fold
    -- that changes shape is rewritten whole, so Neovim folds all of its lines again.
    local same = 0
    if same_fold(entry.fold, out.fold) then
      while same < #old and same < #out.lines and old[same + 1] == out.lines[same + 1] do
        same = same + 1
      end
    end
    if same < #old or same < #out.lines then
      local prompt = self:prompt_row()
      self.folds = ranges_after(self, item.id, first, out.fold, #out.lines - entry.count)
      -- Its marks go first: a mark on a replaced line would be pushed below the new lines,
      -- onto the next item (or the prompt area), out of the range paint() clears.
      vim.api.nvim_buf_clear_namespace(self.buf, hl_ns, first, first + entry.count)
      entry.count, entry.fold = #out.lines, out.fold
      set_lines(self, first + same, first + #old, vim.list_slice(out.lines, same + 1))
      -- The prompt's mark holds on to its row: move it by what the item grew.
      self:place_prompt(prompt + #out.lines - #old)
    end
    vim.api.nvim_buf_set_extmark(self.buf, ns, first, 0, { id = entry.mark })
    paint(self, first, out)
  else
    local at = self:prompt_row()
    self.folds = ranges_after(self, item.id, at, out.fold, #out.lines)
    set_lines(self, at, at, out.lines)
    self:place_prompt(at + #out.lines)
    local mark = vim.api.nvim_buf_set_extmark(self.buf, ns, at, 0, {})
    self.entries[item.id] = { mark = mark, count = #out.lines, fold = out.fold }
    table.insert(self.order, item.id)
    paint(self, at, out)
  end
end

--- Start over with `items` (a reload, another agent for the same session). The
--- prompt area keeps what the person typed.
function Builder:reset(items)
  local prompt = self:prompt_lines()
  for _, entry in pairs(self.entries) do
    vim.api.nvim_buf_del_extmark(self.buf, ns, entry.mark)
  end
  self.entries, self.order, self.folds = {}, {}, {}
  set_lines(self, 0, self:prompt_row(), {})
  vim.api.nvim_buf_clear_namespace(self.buf, hl_ns, 0, -1)
  self:place_prompt(0)
  self:set_prompt(prompt)
  local prev
  for _, item in ipairs(items) do
    self:upsert(item, prev)
    if formatters.knows(item.kind) then
      prev = item
    end
  end
end

--- The id of the item whose lines hold `row` (0-based), or nil (the prompt area, a
--- line above the first item).
function Builder:item_at(row)
  for _, id in ipairs(self.order) do
    local entry = self.entries[id]
    local first = row_of(self.buf, entry.mark)
    if row >= first and row < first + entry.count then
      return id
    end
  end
  return nil
end

--- What the person typed in the prompt area, as lines.
function Builder:prompt_lines()
  return vim.api.nvim_buf_get_lines(self.buf, self:prompt_row(), -1, false)
end

--- Replace the prompt area (`{''}` empties it after a send).
function Builder:set_prompt(lines)
  local row = self:prompt_row()
  local typing = vim.tbl_filter(function(win)
    return vim.api.nvim_win_get_cursor(win)[1] - 1 >= row
  end, vim.fn.win_findbuf(self.buf))
  set_lines(self, row, -1, #lines > 0 and lines or { '' })
  self:place_prompt(row)
  -- Who was typing there stays there (the lines under the cursor were replaced).
  for _, win in ipairs(typing) do
    vim.api.nvim_win_set_cursor(win, { row + 1, 0 })
  end
end

--- The folded ranges, `{first, last}` line numbers in buffer order.
function Builder:fold_ranges()
  if self.folds then
    return self.folds
  end
  local ranges = {}
  for _, id in ipairs(self.order) do
    local entry = self.entries[id]
    if entry.fold then
      local row = row_of(self.buf, entry.mark)
      table.insert(ranges, { row + entry.fold[1], row + entry.fold[2], id = id })
    end
  end
  self.folds = ranges
  return ranges
end

--- 'foldexpr' of chat windows: each range a formatter asked for is one closed fold.
function M.foldexpr(lnum)
  local self = builders[vim.api.nvim_get_current_buf()]
  lnum = lnum or vim.v.lnum
  if not self then
    return '0'
  end
  local ranges = self:fold_ranges()
  local lo, hi = 1, #ranges
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local r = ranges[mid]
    if lnum < r[1] then
      hi = mid - 1
    elseif lnum > r[2] then
      lo = mid + 1
    else
      return lnum == r[1] and '>1' or '1'
    end
  end
  return '0'
end

--- 'foldtext' of chat windows.
function M.foldtext()
  local count = vim.v.foldend - vim.v.foldstart + 1
  return ('    ⋯ %d more line%s (za opens)'):format(count, count == 1 and '' or 's')
end

return M
