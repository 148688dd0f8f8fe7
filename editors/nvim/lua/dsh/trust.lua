-- Workspace trust from Neovim's own trust database (:trust, vim.secure). A cloned
-- repository's .dsh/config.toml may only send your API key elsewhere or loosen the
-- sandbox when you trusted it: that file as it is now, or the workspace folder.
local M = {}

--- The trust database as { [path] = hash | 'directory' | '!' } (read, never written).
local function database()
  local out = {}
  local f = io.open(vim.fn.stdpath('state') .. '/trust', 'r')
  if not f then
    return out
  end
  for line in f:lines() do
    local hash, path = line:match('^(%S+) (.+)$')
    if hash then
      out[path] = hash
    end
  end
  f:close()
  return out
end

--- The workspace config file of `root`.
function M.config_file(root)
  return root .. '/.dsh/config.toml'
end

--- Whether the person trusts the workspace at `root`: its config file is trusted with
--- its present content, or the folder is trusted. Asks nothing.
---@param root string
---@return boolean
function M.trusted(root)
  local db = database()
  local dir = vim.uv.fs_realpath(root)
  if dir and db[dir] == 'directory' then
    return true
  end
  local file = vim.uv.fs_realpath(M.config_file(root))
  if not file or db[file] == nil or db[file] == '!' then
    return false
  end
  local f = io.open(file, 'r')
  if not f then
    return false
  end
  local contents = f:read('*a')
  f:close()
  return db[file] == vim.fn.sha256(contents)
end

--- :Dsh trust: ask about the workspace's config file (Neovim's own allow / deny /
--- view question), and restart the daemon when it is now trusted so it applies.
function M.ask()
  local state = require('dsh.state')
  local cfg = require('dsh.config')
  local root = state.root_dir or cfg.find_root(cfg.start_path()) or vim.fn.getcwd()
  local file = M.config_file(root)
  if not vim.uv.fs_stat(file) then
    return vim.notify(('dsh: %s has no .dsh/config.toml: nothing to trust'):format(root), vim.log.levels.INFO, { title = 'dsh' })
  end
  if M.trusted(root) then
    return vim.notify('dsh: this workspace is already trusted', vim.log.levels.INFO, { title = 'dsh' })
  end
  if vim.secure.read(file) == nil then
    return vim.notify('dsh: the workspace stays untrusted: its guarded settings stay ignored', vim.log.levels.INFO, { title = 'dsh' })
  end
  require('dsh.commands').run({ args = 'restart' })
end

return M
