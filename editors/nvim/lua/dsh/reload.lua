-- Files the agent changed come back into the buffers that show them: after a
-- write_file or edit_file call succeeds (or a command changed a file while it ran),
-- an open buffer of that file is read again,
-- unless it has changes of the person's own (then they are told, and nothing of theirs
-- is overwritten). A `:w` in a stale buffer would otherwise undo the agent's edit.
local M = {}

M.tools = { write_file = true, edit_file = true }

-- agentId -> callId -> the path the call writes (from its tool/call event).
local writing = {}
-- agentId -> callId -> { [file] = mtime } of the file buffers when a command started:
-- what a command changed is what changed on disk while it ran.
local running = {}
M.command_tools = { run_command = true }

--- The absolute path `path` (as the tool was given it) names in workspace `root` (pure).
function M.absolute(path, root)
  if type(path) ~= 'string' or path == '' then
    return nil
  end
  if path:sub(1, 1) ~= '/' and root then
    path = root .. '/' .. path
  end
  return vim.fs.normalize(path)
end

local function same_file(a, b)
  if a == b then
    return true
  end
  local ra, rb = vim.uv.fs_realpath(a), vim.uv.fs_realpath(b)
  return ra ~= nil and ra == rb
end

--- The loaded file buffers that show `file`.
function M.buffers_of(file)
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '' and name ~= '' then
      if same_file(vim.fs.normalize(vim.fn.fnamemodify(name, ':p')), file) then
        table.insert(out, buf)
      end
    end
  end
  return out
end

--- Read `file` again into the buffers that show it; a buffer with unsaved changes is
--- left alone and the person told.
function M.reload(file)
  for _, buf in ipairs(M.buffers_of(file)) do
    if vim.bo[buf].modified then
      require('dsh.errors').notify(
        ('the agent changed %s; your unsaved edits there are kept: :e! takes its version'):format(
          vim.fn.fnamemodify(file, ':~:.')
        ),
        vim.log.levels.WARN
      )
    else
      vim.api.nvim_buf_call(buf, function()
        -- An unmodified buffer: :edit reads the file again, keeping the cursor's line.
        vim.cmd('silent keepalt keepjumps edit')
      end)
    end
  end
end

local function mtime(file)
  local stat = vim.uv.fs_stat(file)
  return stat and (stat.mtime.sec * 1e9 + stat.mtime.nsec) or nil
end

--- The files of loaded, named file buffers, with their modification times now.
local function snapshot()
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '' and name ~= '' then
      local file = vim.fs.normalize(vim.fn.fnamemodify(name, ':p'))
      out[file] = mtime(file)
    end
  end
  return out
end

--- A committed event of the session: remember where write_file/edit_file calls write
--- (and the file times when a command starts), and reload what such a call changed.
function M.on_event(params)
  local event = params and params.event
  if type(event) ~= 'table' or type(event.data) ~= 'table' or not params.agentId then
    return
  end
  local data = event.data
  if event.type == 'tool/call' and M.command_tools[data.name] and data.callId then
    running[params.agentId] = running[params.agentId] or {}
    running[params.agentId][data.callId] = snapshot()
  elseif event.type == 'tool/result' and running[params.agentId] and running[params.agentId][data.callId] then
    local before = running[params.agentId][data.callId]
    running[params.agentId][data.callId] = nil
    for file, at in pairs(before) do
      local now = mtime(file)
      if now and now ~= at then
        M.reload(file)
      end
    end
  elseif event.type == 'tool/call' and M.tools[data.name] and type(data.arguments) == 'table' then
    writing[params.agentId] = writing[params.agentId] or {}
    writing[params.agentId][data.callId] = data.arguments.path
  elseif event.type == 'tool/result' and writing[params.agentId] and data.callId then
    local path = writing[params.agentId][data.callId]
    writing[params.agentId][data.callId] = nil
    if path and data.ok == true then
      local file = M.absolute(path, require('dsh.state').root_dir)
      if file then
        M.reload(file)
      end
    end
  elseif event.type == 'turn/close' then
    writing[params.agentId] = nil
    running[params.agentId] = nil
  end
end

return M
