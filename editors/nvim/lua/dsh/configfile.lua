-- `:Dsh config`: open the config file a bad key is in, at that key.
local M = {}

-- The last invalid-config error: { file?, key? }.
M.last_error = nil

--- The line (1-based) of `key` ("goals.maxRounds", "plugins") in TOML `lines`, or of
--- its table's header when the key itself is missing there, or nil (pure).
---@param lines string[]
---@param key string
---@return integer?
function M.find_key(lines, key)
  local parts = vim.split(key, '.', { plain = true })
  local name = parts[#parts]
  local table_name = #parts > 1 and table.concat(parts, '.', 1, #parts - 1) or nil
  local current = nil -- the table of the line being read (nil: the top level)
  local header = nil
  for i, line in ipairs(lines) do
    local t = line:match('^%s*%[%s*([^%]]-)%s*%]')
    if t then
      current = t
      if t == table_name then
        header = i
      end
    elseif current == table_name then
      local k = line:match('^%s*"?([%w_%-]+)"?%s*=')
      if k == name then
        return i
      end
    end
  end
  return header
end

--- The workspace this editor works in (the daemon's, else the one around the current
--- file, else the working directory) and its config file.
---@return string root
---@return string file
function M.workspace()
  local state = require('dsh.state')
  local cfg = require('dsh.config')
  local root = state.root_dir or cfg.find_root(cfg.start_path()) or vim.fn.getcwd()
  return root, require('dsh.trust').config_file(root)
end

--- The file of the last config error (or the workspace's .dsh/config.toml), opened at
--- its key.
function M.open()
  local last = M.last_error or {}
  local file = last.file or select(2, M.workspace())
  vim.cmd.edit(vim.fn.fnameescape(file))
  if last.key then
    local line = M.find_key(vim.api.nvim_buf_get_lines(0, 0, -1, false), last.key)
    if line then
      vim.api.nvim_win_set_cursor(0, { line, 0 })
    else
      require('dsh.errors').notify(
        ('%s is not in this file; add it, or look for it in the other config layers (:help dsh-model)'):format(last.key),
        vim.log.levels.WARN
      )
    end
  end
end

return M
