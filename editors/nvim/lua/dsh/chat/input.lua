-- The prompt area of a chat buffer: the keys that send what the person typed there.
local M = {}

M.keys = { send_normal = '<CR>', send = '<C-s>' }

--- The text of the prompt area (pure): lines joined, blank lines at both ends dropped.
---@param lines string[]
---@return string
function M.text(lines)
  return vim.trim(table.concat(lines, '\n'))
end

--- Set up `buf`'s keys: <CR> in normal mode and <C-s> in normal and insert mode call
--- `send()`; starting insert mode above the prompt area moves to its end.
---@param buf integer
---@param send fun()
function M.attach(buf, send)
  local function map(modes, lhs, desc)
    vim.keymap.set(modes, lhs, function()
      if vim.fn.mode() ~= 'n' then
        vim.cmd('stopinsert')
      end
      send()
    end, { buffer = buf, desc = desc })
  end
  map('n', M.keys.send_normal, 'dsh: send the message (steer while a turn runs)')
  map({ 'n', 'i' }, M.keys.send, 'dsh: send the message (steer while a turn runs)')
  vim.api.nvim_create_autocmd('InsertEnter', {
    buffer = buf,
    callback = function()
      local builder = require('dsh.chat.builder').get(buf)
      local win = vim.api.nvim_get_current_win()
      if builder and vim.api.nvim_win_get_cursor(win)[1] - 1 < builder:prompt_row() then
        -- The conversation is the daemon's; what the person types goes below it.
        local last = vim.api.nvim_buf_line_count(buf)
        local line = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
        vim.api.nvim_win_set_cursor(win, { last, #line })
      end
    end,
  })
end

return M
