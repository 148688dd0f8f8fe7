-- The buffer a session's view lives in (the chat, the transcript): a listed scratch
-- buffer named dsh://<kind>/<session>, one per session, forgotten when it is wiped.
local M = {}

--- A new `filetype` buffer for session `session_id`, kept as `views[session_id] = view`
--- until the buffer is wiped; `view` gets its `buf`. Returns `view`.
---@param kind string 'chat' | 'transcript'
---@param views table<string, table>
---@return table view
function M.create(kind, session_id, filetype, views, view)
  local buf = vim.api.nvim_create_buf(true, true)
  pcall(vim.api.nvim_buf_set_name, buf, ('dsh://%s/%s'):format(kind, session_id))
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = filetype
  view.buf = buf
  views[session_id] = view
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      views[session_id] = nil
    end,
  })
  return view
end

return M
