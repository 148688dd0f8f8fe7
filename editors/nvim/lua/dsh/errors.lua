-- Daemon errors as messages that say what to do next (the protocol's error kinds).
local M = {}

-- Every notice in full, newest last (:Dsh messages shows them): what is shown is cut to
-- one line, since a message wider than the screen stops work with "Press ENTER".
M.history = {} ---@type {at: string, level: integer, text: string}[]
M.history_max = 200
-- A notice still shown this long after it was given is cleared: it is stale by then
-- (the chat and the statusline say what is true now).
M.clear_after_ms = 10000

--- `text` cut to `width` display cells, ending with "…" when cut (pure).
function M.fit(text, width)
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  local out = text
  local chars = vim.fn.strchars(text)
  while chars > 0 and vim.fn.strdisplaywidth(out) > width - 1 do
    chars = chars - 1
    out = vim.fn.strcharpart(text, 0, chars)
  end
  return out .. '…'
end

local function echo_width()
  local space = tonumber(vim.v.echospace) or 0
  return math.max(20, space > 0 and space or (vim.o.columns - 12))
end

local last_shown -- the text of the last notice shown
local notice_win -- the float that shows a notice too long for one line

local function close_notice_win()
  if notice_win and vim.api.nvim_win_is_valid(notice_win) then
    pcall(vim.api.nvim_win_close, notice_win, true)
  end
  notice_win = nil
end

--- A notice too long for the echo area, whole, in a small float at the bottom right that
--- takes no focus and no keys, gone after M.clear_after_ms (or when the next one comes).
local function show_whole(text, level)
  close_notice_win()
  local width = math.max(20, math.min(vim.o.columns - 4, 80))
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true }))
  vim.bo[buf].bufhidden = 'wipe'
  local ok, win = pcall(vim.api.nvim_open_win, buf, false, {
    relative = 'editor',
    width = width,
    height = 1,
    row = math.max(0, vim.o.lines - 4),
    col = math.max(0, vim.o.columns - width - 2),
    anchor = 'SW',
    style = 'minimal',
    border = 'rounded',
    focusable = false,
    zindex = 250,
    noautocmd = true,
  })
  if not ok then
    return
  end
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].winhighlight = 'Normal:' .. (level >= vim.log.levels.ERROR and 'ErrorMsg' or level >= vim.log.levels.WARN and 'WarningMsg' or 'NormalFloat')
  local fits, height = pcall(vim.api.nvim_win_text_height, win, {})
  vim.api.nvim_win_set_config(win, { height = math.max(1, math.min(fits and height.all or 3, 8)) })
  notice_win = win
  vim.defer_fn(function()
    if notice_win == win then
      close_notice_win()
    end
  end, M.clear_after_ms)
end

--- Tell the person `message` in one line (cut to fit; then shown whole for a while in a
--- float that takes no keys, and always kept whole for :Dsh messages).
--- Text with several lines (a command's answer, like :Dsh goal) is shown as it is.
function M.notify(message, level)
  level = level or vim.log.levels.ERROR
  local text = 'dsh: ' .. message
  table.insert(M.history, { at = os.date('%H:%M:%S'), level = level, text = text })
  if #M.history > M.history_max then
    table.remove(M.history, 1)
  end
  if not text:find('\n') then
    local full = text
    text = M.fit(text, echo_width())
    if text ~= full then
      text = M.fit(full, echo_width() - #' (:Dsh messages)') .. ' (:Dsh messages)'
      show_whole(full, level)
    end
  end
  vim.notify(text, level, { title = 'dsh' })
  last_shown = text
  local shown = text
  vim.defer_fn(function()
    -- Only when it is still the last message and nothing else is going on.
    if last_shown ~= shown or vim.api.nvim_get_mode().mode ~= 'n' then
      return
    end
    local ok, last = pcall(vim.fn.execute, '1messages')
    if ok and vim.trim(last) == shown then
      vim.api.nvim_echo({ { '' } }, false, {})
      last_shown = nil
    end
  end, M.clear_after_ms)
end

--- The notice on screen now, as far as this plugin knows (nil once it was cleared).
function M.showing()
  return last_shown
end

--- The float showing a long notice whole, while it is shown.
function M.notice_window()
  return notice_win and vim.api.nvim_win_is_valid(notice_win) and notice_win or nil
end

--- :Dsh messages: every notice of this Neovim in full, in a scratch buffer.
function M.show_history()
  local lines = {}
  for _, entry in ipairs(M.history) do
    for i, line in ipairs(vim.split(entry.text, '\n', { plain = true })) do
      table.insert(lines, (i == 1 and (entry.at .. '  ') or '          ') .. line)
    end
  end
  if #lines == 0 then
    lines = { 'no notices yet' }
  end
  vim.cmd('botright 12split')
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  pcall(vim.api.nvim_buf_set_name, buf, 'dsh://messages')
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = true
  vim.api.nvim_win_set_cursor(0, { #lines, 0 })
end

local function goal_line(view)
  if not view or view == vim.NIL then
    return 'the session now has no goal'
  end
  -- The daemon's words for the goal as it is now (GoalView.status).
  local status = require('dsh.statusline').status(view)
  return ('it is now %s, %s: %q'):format(status.short, status.usage, view.objective or '')
end

-- kind -> function(data, err, ctx) returning the message. `ctx.context` says what the
-- person asked for ("pause the goal").
local explain = {
  ['invalid-params'] = function(data, err)
    return ('dshd could not take that: %s. Check what you typed (:help dsh-commands).'):format(err.message or 'a value is not valid')
  end,
  ['unknown-agent'] = function()
    return 'this agent is unknown to the daemon (it may have restarted). Open the session again: :Dsh session open'
  end,
  ['stale-agent'] = function()
    return 'this session was reloaded elsewhere and this agent is stale. Open it again: :Dsh session open'
  end,
  ['stale-revision'] = function()
    return 'the goal changed meanwhile (another editor or the agent); read it again: check and retry.'
  end,
  ['invalid-transition'] = function(data, _, ctx)
    return ('cannot %s while the goal is %s. See :help dsh-goal for what each phase allows.'):format(
      ctx.context or 'do that',
      tostring(data.phase or 'in its current phase')
    )
  end,
  ['no-goal'] = function()
    return 'this session has no goal. Create one: :Dsh goal create {objective} [rounds]'
  end,
  ['budget-exhausted'] = function()
    return 'the goal has spent its round budget. Raise it with :Dsh goal edit {rounds}, or :Dsh goal complete.'
  end,
  ['plugin-not-loaded'] = function(data, err)
    -- The daemon names the plugin in data.plugin; one that does not (an older daemon) has
    -- said which in its message, so that is shown rather than a name guessed here.
    if type(data.plugin) ~= 'string' or data.plugin == '' then
      return ('%s (list it in `plugins` of .dsh/config.toml), then :Dsh restart.'):format(tostring(err.message or 'a plugin is off in this workspace'))
    end
    local names = { plan = 'plan mode', goals = 'goals', tools = 'the workspace tools', mcp = 'MCP', checkpoints = 'checkpoints (rewind)' }
    return ('%s is off in this workspace. Add "%s" to `plugins` in .dsh/config.toml, then :Dsh restart.'):format(
      names[data.plugin] or data.plugin,
      data.plugin
    )
  end,
  ['invalid-config'] = function(data, err)
    -- What to do first: a long reason would push it past the end of the line.
    local file = data.file and vim.fn.fnamemodify(tostring(data.file), ':~:.') or '.dsh/config.toml'
    require('dsh.configfile').last_error = { file = data.file, key = data.key }
    local why = tostring(err.message or ''):gsub('^invalid config:?%s*', '')
    if data.key then
      why = why:gsub('^' .. vim.pesc(tostring(data.key)) .. ':?%s*', '')
    end
    return ('invalid config: %s in %s; :Dsh config opens it there, then :Dsh restart (%s)'):format(
      tostring(data.key or 'a key'),
      file,
      why
    )
  end,
  ['replay-failed'] = function(data, err)
    return ('the session log is damaged at line %s (seq %s): %s. Nothing was changed; inspect it with `dshd log verify`.'):format(
      tostring(data.line or '?'),
      tostring(data.seq or '?'),
      tostring(data.reason or err.message or '')
    )
  end,
  ['session-locked'] = function(data)
    return ('another dshd (pid %s) holds this session. Close the editor that runs it, then open the session again.'):format(
      tostring(data.pid or '?')
    )
  end,
  ['unsafe-path'] = function(data, err)
    return ('dshd refused %s: %s. It never follows links under .dsh/; replace it with a plain file or folder.'):format(
      vim.fn.fnamemodify(tostring(data.path or '?'), ':~:.'),
      tostring(data.reason or err.message or 'not a plain file')
    )
  end,
  ['io-error'] = function(data, err)
    return ('%s. Nothing you were told was saved is lost.'):format(tostring(err.message or ('could not read or write ' .. tostring(data.path or 'a file'))))
  end,
  ['person-changed'] = function(data)
    local paths = type(data.paths) == 'table' and data.paths or {}
    return ('you changed %s since the agent\'s last step; nothing was rewound. Rewind again and press o to overwrite your changes.'):format(
      #paths > 0 and table.concat(vim.tbl_map(tostring, paths), ', ') or 'files to rewind'
    )
  end,
  ['turn-open'] = function()
    return 'a turn is running. Add to it with :Dsh steer {text}, or stop it with :Dsh cancel.'
  end,
}

--- A message for a JSON-RPC error `err` ({code, message, data}) from a request.
---@param err table
---@param ctx table? {method, params, context}
---@return string message
---@return string? kind
function M.describe(err, ctx)
  ctx = ctx or {}
  local data = type(err) == 'table' and type(err.data) == 'table' and err.data or {}
  local kind = data.kind
  local fn = kind and explain[kind]
  if fn then
    return fn(data, err, ctx), kind
  end
  local message = type(err) == 'table' and err.message or tostring(err)
  return ('%s failed: %s'):format(ctx.context or ctx.method or 'request', message), kind
end

--- Tell the person about `err`, and repair what the plugin can: a stale revision
--- re-reads the goal, a stale or unknown agent stops being the current one.
function M.report(err, ctx)
  ctx = ctx or {}
  local message, kind = M.describe(err, ctx)
  local state = require('dsh.state')
  local agent_id = ctx.params and ctx.params.agentId
  if kind == 'stale-revision' and agent_id then
    local protocol = require('dsh.protocol')
    require('dsh.client').request(protocol.requests.goal_get, { agentId = agent_id }, function(view)
      state.set_goal(agent_id, view, 'reread')
      M.notify(message .. ' Now: ' .. goal_line(view) .. '.', vim.log.levels.WARN)
    end, 're-read the goal')
    return
  end
  if (kind == 'stale-agent' or kind == 'unknown-agent') and agent_id then
    state.forget(agent_id)
  end
  M.notify(message)
end

return M
