-- When the person last typed a key, tracked from startup (plugin/dsh.lua): a question
-- that arrives moments after a key was typed must not take the keys that follow it.
local M = {}

M.last_at = 0 -- vim.uv.now() of the last key typed

local tracking = false

function M.track()
  if tracking then
    return
  end
  tracking = true
  vim.on_key(function()
    M.last_at = vim.uv.now()
  end, vim.api.nvim_create_namespace('dsh.keys'))
end

return M
