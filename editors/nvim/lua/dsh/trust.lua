-- Workspace trust from Neovim's own trust database (:trust, vim.secure). A cloned
-- repository's .dsh/config.toml may only send your API key elsewhere or loosen the
-- sandbox when you trusted it: that file as it is now, or the workspace folder.
local M = {}

local notify = require('dsh.errors').notify

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
  local root, file = require('dsh.configfile').workspace()
  if not vim.uv.fs_stat(file) then
    return notify(('%s has no .dsh/config.toml: nothing to trust'):format(root), vim.log.levels.INFO)
  end
  if M.trusted(root) then
    return notify('this workspace is already trusted', vim.log.levels.INFO)
  end
  if vim.secure.read(file) == nil then
    return notify('the workspace stays untrusted: its guarded settings stay ignored', vim.log.levels.INFO)
  end
  require('dsh.commands').run({ args = 'restart' })
end

--- Whether the daemon left `item` out because the workspace is not trusted (its own
--- reason says so), not for another reason (a script the chosen provider never reads).
local function for_trust(item)
  return type(item.why) == 'string' and item.why:find('not trusted', 1, true) ~= nil
end

--- The notice for keys the daemon left out (pure): one short line (a wider one waits for
--- Enter) naming the first key and why, with what to do; nil when nothing was left out.
--- Trust is named only for keys the daemon left out for want of it. :checkhealth dsh
--- lists them all.
---@param ignored {file: string, key: string, why: string}[]
---@return string?
function M.notice(ignored)
  if type(ignored) ~= 'table' or #ignored == 0 then
    return nil
  end
  local untrusted = vim.tbl_filter(for_trust, ignored)
  local others = vim.tbl_filter(function(item)
    return not for_trust(item)
  end, ignored)
  local function keys(items)
    local what = tostring(items[1].key)
    if #items > 1 then
      what = ('%s and %d more setting%s'):format(what, #items - 1, #items > 2 and 's' or '')
    end
    return what
  end
  if #untrusted > 0 then
    return ('untrusted workspace: %s ignored; :Dsh trust uses them'):format(keys(untrusted))
  end
  return ('%s ignored: %s'):format(keys(others), tostring(others[1].why))
end

--- window/showMessage from the daemon. The one it sends about keys it ignored (once per
--- start) is said in Neovim's words, with the command that trusts the folder; anything
--- else is passed on as it is.
function M.on_show_message(err, params, ctx)
  local client = require('dsh.client')
  local protocol = require('dsh.protocol')
  local levels = vim.log.levels
  local level = ({ levels.ERROR, levels.WARN, levels.INFO, levels.DEBUG })[params and params.type or 3] or levels.INFO
  local function pass_on()
    notify(tostring(params and params.message or ''), level)
  end
  if type(params) == 'table' and type(params.message) == 'string'
    and vim.startswith(params.message, "The workspace's dshd daemon is restarting") then
    client.restart_announced = vim.uv.now() -- its end is then no crash (dsh.client.on_exit)
  end
  if type(params) ~= 'table' or params.type ~= 2 then
    return pass_on()
  end
  if type(params.message) == 'string' and vim.startswith(params.message, 'Your settings are not in force') then
    return pass_on() -- the shared daemon runs with another client's settings: said as it is
  end
  client.request(protocol.requests.config_get, vim.empty_dict(), function(result)
    local notice = M.notice(type(result) == 'table' and result.ignored or nil)
    if notice then
      notify(notice, vim.log.levels.WARN)
    else
      pass_on()
    end
  end, 'read the config', function()
    pass_on()
    return true
  end)
end

return M
