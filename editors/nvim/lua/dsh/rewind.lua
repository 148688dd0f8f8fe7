-- "Rewind to here": put the workspace's files (and, if asked, the conversation) back as
-- they were before a step of the agent ran, from the checkpoint the daemon took then.
--
-- The person sees what would change first: dsh/checkpoint/diff opens in a tab of its own,
-- "now" on the left and "after rewind" on the right (two scratch buffers under :diffthis),
-- or one unified diff when there are many files or some have no text diff. Then a float
-- asks and reads one key: `f` files, `c` files and conversation; `q`, <Esc> and every
-- other key cancel, so a stray key never rewinds anything. A file the person changed
-- since the agent's last step needs a second, different key (`o`) to be overwritten.
local float = require('dsh.float')

local M = {}

M.keys = { files = 'f', conversation = 'c', overwrite = 'o', cancel = 'q', again = 'R' }

-- The two-sided view shows at most this many files (and lines): past it a unified diff
-- reads better than two long columns scrolled together.
M.split_max_files = 8
M.split_max_lines = 3000

M.person_mark = '✎'

-- What the rewind does to a file, in words (the wire's status: now -> then).
M.status_words = { modified = 'put back', added = 're-create', deleted = 'delete' }

-- A path or word from the daemon as one buffer line: a control character (a newline in a
-- hostile file name) would split or break the line, so it is shown as `?`.
local function clean(text)
  return (tostring(text):gsub('%c', '?'))
end

-- Text as buffer lines: the chat's own splitter (one rule for both).
local lines_of = require('dsh.chat.text').split

--- One file's unified diff as its two sides (pure): `now` holds the context and the
--- removed lines, `after` the context and the added lines; each hunk starts with the same
--- `⋯ @@ … @@` line on both sides, so :diffthis lines them up. nil when `diff` has no hunk.
---@param diff string
---@return string[]? now
---@return string[]? after
function M.sides_of(diff)
  local now, after = {}, {}
  local in_hunk = false
  for _, line in ipairs(lines_of(diff)) do
    if line:match('^@@ ') then
      in_hunk = true
      table.insert(now, '⋯ ' .. line)
      table.insert(after, '⋯ ' .. line)
    elseif in_hunk then
      local sign, rest = line:sub(1, 1), line:sub(2)
      if sign == ' ' or line == '' then
        table.insert(now, rest)
        table.insert(after, rest)
      elseif sign == '-' then
        table.insert(now, rest)
      elseif sign == '+' then
        table.insert(after, rest)
      end -- '\ No newline at end of file' and anything else: not a line of the file
    end
  end
  if not in_hunk then
    return nil
  end
  return now, after
end

--- The header line of a file in either view (pure).
function M.file_header(file)
  local words = M.status_words[file.status] or tostring(file.status)
  local head = ('── %s · %s'):format(clean(file.path), clean(words))
  if file.changedByPerson then
    head = ('%s · %s changed by you since'):format(head, M.person_mark)
  end
  return head .. ' ──'
end

--- Which view the diff opens in (pure): 'split' (now | after rewind, :diffthis) while
--- there are few files and each has a text diff, else 'unified' (one diff buffer), and why.
---@return 'split'|'unified' layout
---@return string? reason
function M.layout(files)
  if #files > M.split_max_files then
    return 'unified', ('%d files: one unified diff'):format(#files)
  end
  local total = 0
  for _, file in ipairs(files) do
    if file.binary or type(file.diff) ~= 'string' or not M.sides_of(file.diff) then
      return 'unified', ('%s has no text diff: one unified diff'):format(clean(file.path))
    end
    total = total + #lines_of(file.diff)
  end
  if total > M.split_max_lines then
    return 'unified', ('%d diff lines: one unified diff'):format(total)
  end
  return 'split'
end

--- The two sides of every file, one after the other under identical headers (pure).
---@return string[] now
---@return string[] after
function M.split_lines(files)
  local now, after = {}, {}
  for i, file in ipairs(files) do
    if i > 1 then
      table.insert(now, '')
      table.insert(after, '')
    end
    local head = M.file_header(file)
    table.insert(now, head)
    table.insert(after, head)
    local a, b = M.sides_of(file.diff or '')
    vim.list_extend(now, a or {})
    vim.list_extend(after, b or {})
  end
  return now, after
end

--- Every file's diff in one buffer (pure): its header, then its unified diff, or a line
--- that says why there is none.
function M.unified_lines(files)
  local out = {}
  for i, file in ipairs(files) do
    if i > 1 then
      table.insert(out, '')
    end
    table.insert(out, M.file_header(file))
    if file.binary then
      table.insert(out, ('Binary file %s differs'):format(clean(file.path)))
    elseif type(file.diff) ~= 'string' or file.diff == '' then
      table.insert(out, '(too large to show here)')
    else
      vim.list_extend(out, lines_of(file.diff))
    end
  end
  return out
end

--- The paths of `files` the person changed since the agent's last step (pure).
function M.person_changed(files)
  local out = {}
  for _, file in ipairs(files) do
    if file.changedByPerson then
      table.insert(out, tostring(file.path))
    end
  end
  return out
end

--- What the rewind is about, in words (pure): "turn 2, step 1" from the chat item.
function M.point_words(point)
  point = point or {}
  local where = {}
  if type(point.turn) == 'number' then
    table.insert(where, 'turn ' .. point.turn)
  end
  if type(point.step) == 'number' then
    table.insert(where, 'step ' .. point.step)
  end
  if #where == 0 then
    return ('checkpoint %s'):format(tostring(point.seq))
  end
  return table.concat(where, ', ')
end

--- The confirm float's text (pure): what goes back, each file marked when the person
--- changed it. Returns the lines and the footer's key help.
function M.confirm_lines(point, files)
  local lines = {}
  if #files == 0 then
    table.insert(lines, ('The files are as they were before %s: no file changes.'):format(M.point_words(point)))
    table.insert(lines, 'Only the conversation can go back to there.')
    return lines, ('%s rewind the conversation · %s or any other key cancels'):format(M.keys.conversation, M.keys.cancel)
  end
  table.insert(lines, ('Rewind to before %s? %d file%s go%s back:'):format(
    M.point_words(point), #files, #files == 1 and '' or 's', #files == 1 and 'es' or ''))
  for _, file in ipairs(files) do
    table.insert(lines, ('  %s %-9s %s'):format(
      file.changedByPerson and M.person_mark or ' ',
      clean(M.status_words[file.status] or file.status),
      clean(file.path)))
  end
  local mine = M.person_changed(files)
  if #mine > 0 then
    table.insert(lines, '')
    table.insert(lines, ('%s changed by you since the agent\'s last step: overwriting %s asks once more.'):format(
      M.person_mark, #mine == 1 and 'it' or 'them'))
  end
  return lines, ('%s rewind files · %s files and conversation · %s or any other key cancels'):format(
    M.keys.files, M.keys.conversation, M.keys.cancel)
end

--- The second question, before overwriting what the person changed (pure).
function M.force_lines(paths)
  local lines = { ('You changed %s since the agent\'s last step:'):format(#paths == 1 and 'this file' or ('these %d files'):format(#paths)) }
  for _, path in ipairs(paths) do
    table.insert(lines, ('  %s %s'):format(M.person_mark, clean(path)))
  end
  table.insert(lines, ('Rewinding puts %s back as %s then: your changes are lost.'):format(
    #paths == 1 and 'it' or 'them', #paths == 1 and 'it was' or 'they were'))
  return lines, ('%s overwrite my changes and rewind · %s or any other key cancels'):format(M.keys.overwrite, M.keys.cancel)
end

--- What a finished rewind says (pure).
function M.outcome_words(result, conversation)
  local restored = type(result) == 'table' and type(result.restored) == 'table' and result.restored or {}
  local forced = type(result) == 'table' and type(result.forced) == 'table' and result.forced or {}
  local text
  if #restored == 0 then
    text = 'no file needed to change'
  else
    local shown = vim.tbl_map(clean, vim.list_slice(restored, 1, 3))
    text = ('rewound %d file%s: %s%s'):format(#restored, #restored == 1 and '' or 's',
      table.concat(shown, ', '), #restored > #shown and (', +' .. (#restored - #shown)) or '')
  end
  if #forced > 0 then
    text = text .. (' (your changes to %s overwritten)'):format(table.concat(vim.tbl_map(clean, forced), ', '))
  end
  if conversation then
    local agent = type(result) == 'table' and type(result.agent) == 'table' and result.agent or nil
    text = text .. (agent and ('; the conversation goes on from there in session %s'):format(clean(agent.sessionId))
      or '; the conversation was not forked')
  end
  return text
end

--- Why the rewind key does nothing on `item` (pure), or nil when it can rewind.
function M.why_not(item)
  if type(item) ~= 'table' then
    return 'put the cursor on your message or a tool call marked ⟲ to rewind to before it'
  end
  if type(item.checkpoint) == 'number' then
    return nil
  end
  if item.kind == 'user-message' then
    return 'nothing to rewind to from this message: no step of its turn could change files'
      .. ' (or checkpoints are off, or its first one is not taken yet)'
  elseif item.kind == 'tool-call' then
    return 'nothing to rewind to from this tool call: its step could only read, so no checkpoint was'
      .. ' taken (or checkpoints are off)'
  end
  return 'only your messages and tool calls marked ⟲ can rewind; put the cursor on one'
end

-- The rewind in progress (one at a time): { seq, agent_id, point, files, tab, float_win, ... }.
local current

function M.current()
  return current
end

local function close_float(rw)
  if rw.float_win and vim.api.nvim_win_is_valid(rw.float_win) then
    pcall(vim.api.nvim_win_close, rw.float_win, true)
  end
  rw.float_win, rw.asking = nil, nil
end

--- Close the diff tab (and its float): the rewind is over, done or not.
local function finish(rw)
  close_float(rw)
  if rw.tab and vim.api.nvim_tabpage_is_valid(rw.tab) and #vim.api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd.tabclose, vim.api.nvim_tabpage_get_number(rw.tab))
  end
  for _, buf in ipairs(rw.bufs or {}) do
    if vim.api.nvim_buf_is_valid(buf) then
      pcall(vim.api.nvim_buf_delete, buf, { force = true })
    end
  end
  if current == rw then
    current = nil
  end
end

local function scratch(name, lines, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  pcall(vim.api.nvim_buf_set_name, buf, name)
  return buf
end

local function winbar_text(text)
  return ' ' .. text:gsub('%%', '%%%%') .. ' '
end

--- The diff tab: now | after rewind under :diffthis, or one unified diff.
local function open_tab(rw)
  local layout, reason = M.layout(rw.files)
  rw.layout, rw.layout_reason = layout, reason
  local base = ('dsh://rewind/%s/'):format(tostring(rw.seq))
  vim.cmd('tabnew')
  rw.tab = vim.api.nvim_get_current_tabpage()
  local placeholder = vim.api.nvim_get_current_buf()
  local hint = ('%s asks again · q closes'):format(M.keys.again)
  if layout == 'split' then
    local now, after = M.split_lines(rw.files)
    local left = scratch(base .. 'now', now)
    local right = scratch(base .. 'after rewind', after)
    rw.bufs = { left, right }
    vim.api.nvim_win_set_buf(0, left)
    vim.wo.winbar = winbar_text('now · ' .. M.point_words(rw.point))
    vim.cmd('diffthis')
    vim.cmd('rightbelow vsplit')
    vim.api.nvim_win_set_buf(0, right)
    vim.wo.winbar = winbar_text('after rewind · ' .. hint)
    vim.cmd('diffthis')
    for _, win in ipairs(vim.api.nvim_tabpage_list_wins(rw.tab)) do
      -- The buffers hold only the changed parts: show all of them, unfolded.
      vim.wo[win].foldenable = false
      vim.wo[win].wrap = false
    end
  else
    local buf = scratch(base .. 'diff', M.unified_lines(rw.files), 'diff')
    rw.bufs = { buf }
    vim.api.nvim_win_set_buf(0, buf)
    vim.wo.winbar = winbar_text(('now → after rewind · %s (%s) · %s'):format(M.point_words(rw.point), reason, hint))
  end
  if vim.api.nvim_buf_is_valid(placeholder) and placeholder ~= vim.api.nvim_get_current_buf() then
    pcall(vim.api.nvim_buf_delete, placeholder, { force = true })
  end
  for _, buf in ipairs(rw.bufs) do
    vim.keymap.set('n', 'q', function()
      finish(rw)
    end, { buffer = buf, nowait = true, desc = 'dsh: close the rewind diff; nothing is rewound' })
    vim.keymap.set('n', M.keys.again, function()
      M.ask(rw)
    end, { buffer = buf, nowait = true, desc = 'dsh: ask again whether to rewind' })
  end
  vim.api.nvim_set_current_win(vim.api.nvim_tabpage_list_wins(rw.tab)[1])
end

-- Keys that are not a person's answer (focus changes, fake keys).
local not_answers = { ['<FocusGained>'] = true, ['<FocusLost>'] = true, ['<Ignore>'] = true,
  ['<MouseMove>'] = true, ['<CursorHold>'] = true, [''] = true }

local function cancelled(rw)
  local tab_open = rw.tab and vim.api.nvim_tabpage_is_valid(rw.tab)
  if not tab_open and current == rw then
    current = nil
  end
  require('dsh.errors').notify(tab_open and ('not rewound; the diff stays open: %s asks again, q closes it'):format(M.keys.again)
    or 'not rewound', vim.log.levels.INFO)
  vim.api.nvim_exec_autocmds('User', { pattern = 'DshRewindCancelled', modeline = false, data = { seq = rw.seq } })
end

--- Show a question in a float: `lines`, footer `keys_help`, and `choices` (key -> fn),
--- then read ONE key: a choice runs it; q, <Esc>, <C-c> and every other key cancel. The
--- key is read here (getcharstr, which keeps serving the daemon's messages meanwhile), so a
--- stray key is swallowed whole: it is the "no", it never reaches a buffer or starts an
--- operator. A choice typed before the float was shown for M.guard_ms (keys in flight)
--- is not taken: it says so and waits for the key again.
local function question(rw, title, lines, keys_help, choices)
  close_float(rw)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  local win = float.open(buf, { title = title, keys = keys_help, number = false, width = 90 })
  -- At the bottom: the diff stays in sight above it.
  local cfg = vim.api.nvim_win_get_config(win)
  local height = cfg.height or #lines
  pcall(vim.api.nvim_win_set_config, win, { relative = 'editor', row = math.max(0, vim.o.lines - height - 4), col = cfg.col })
  vim.wo[win].cursorline = false
  vim.fn.matchadd('DiagnosticWarn', M.person_mark .. '.*', 10, -1, { window = win })
  rw.float_win, rw.asking = win, title
  local shown_at = vim.uv.now()
  local chosen
  while true do
    vim.cmd('redraw')
    local ok, key = pcall(vim.fn.getcharstr)
    local name = ok and vim.fn.keytrans(key) or '<C-c>'
    if not vim.api.nvim_win_is_valid(win) or rw.float_win ~= win then
      return -- closed meanwhile (the rewind was finished by another): nothing to answer
    end
    if not not_answers[name] then
      if choices[name] and vim.uv.now() - shown_at < float.guard_ms then
        vim.api.nvim_echo({ { 'dsh: just opened; press the key again to answer', 'WarningMsg' } }, false, {})
      else
        chosen = choices[name]
        break
      end
    end
  end
  close_float(rw)
  if chosen then
    chosen()
  else
    cancelled(rw)
  end
end

--- Ask the daemon to rewind; `force` after the person's second, explicit key.
local function restore(rw, conversation, force)
  local params = { agentId = rw.agent_id, seq = rw.seq, files = true, conversation = conversation, force = force }
  require('dsh.client').request(require('dsh.protocol').requests.checkpoint_restore, params, function(result)
    finish(rw)
    require('dsh.errors').notify(M.outcome_words(result, conversation), vim.log.levels.INFO)
    vim.api.nvim_exec_autocmds('User', { pattern = 'DshRewound', modeline = false,
      data = { seq = rw.seq, result = result, conversation = conversation } })
    local agent = type(result) == 'table' and type(result.agent) == 'table' and result.agent or nil
    if agent and agent.agentId and agent.sessionId then
      require('dsh.commands').became_fork(agent, function()
        require('dsh.chat').open()
      end)
    end
  end, 'rewind', function(err)
    local data = type(err) == 'table' and type(err.data) == 'table' and err.data or {}
    if data.kind == 'person-changed' and not force then
      -- Changed since the diff was read: ask about exactly the files the daemon names.
      local paths = type(data.paths) == 'table' and data.paths or {}
      M.ask_force(rw, conversation, paths)
      return true
    end
    return false -- reported as any error; the diff stays open to try again
  end)
end

function M.ask_force(rw, conversation, paths)
  local lines, help = M.force_lines(paths)
  question(rw, 'Overwrite your changes?', lines, help, {
    [M.keys.overwrite] = function()
      restore(rw, conversation, true)
    end,
  })
end

local function choose(rw, conversation)
  local mine = M.person_changed(rw.files)
  if #mine > 0 then
    return M.ask_force(rw, conversation, mine)
  end
  restore(rw, conversation, false)
end

--- (Again) the confirm float of the rewind `rw`, over its diff tab.
function M.ask(rw)
  rw = rw or current
  if not rw then
    return
  end
  current = rw
  if rw.tab and vim.api.nvim_tabpage_is_valid(rw.tab) then
    vim.api.nvim_set_current_tabpage(rw.tab)
  end
  local lines, help = M.confirm_lines(rw.point, rw.files)
  local choices = {
    [M.keys.conversation] = function()
      choose(rw, true)
    end,
  }
  if #rw.files > 0 then
    choices[M.keys.files] = function()
      choose(rw, false)
    end
  end
  question(rw, 'Rewind to here?', lines, help, choices)
end

--- Rewind to checkpoint `seq` of `agent_id`: read what it would change, show it, ask.
--- `point`: where it is, for the words ({turn, step}).
function M.start(agent_id, seq, point)
  if current then
    finish(current) -- one rewind at a time: the newer ask wins
  end
  local rw = { agent_id = agent_id, seq = seq, point = vim.tbl_extend('force', { seq = seq }, point or {}) }
  current = rw
  require('dsh.client').request(require('dsh.protocol').requests.checkpoint_diff, { agentId = agent_id, seq = seq }, function(result)
    if current ~= rw then
      return
    end
    rw.files = type(result) == 'table' and type(result.files) == 'table' and result.files or {}
    if #rw.files > 0 then
      open_tab(rw)
    end
    vim.schedule(function()
      if current == rw then
        M.ask(rw) -- reads a key: outside the response's handler
      end
    end)
  end, 'read what the rewind would change', function()
    if current == rw then
      current = nil
    end
    return false
  end)
end

--- The rewind key and :Dsh rewind in a chat: the item under the cursor.
function M.at_cursor()
  local chat = require('dsh.chat')
  local view = chat.view_of_buf(vim.api.nvim_get_current_buf())
  if not view then
    return require('dsh.errors').notify('open the chat (:Dsh chat), put the cursor on a message or tool call marked ⟲,'
      .. ' then :Dsh rewind (or ' .. chat.keys.rewind .. '); :Dsh rewind list lists every checkpoint', vim.log.levels.INFO)
  end
  local item = chat.item_at_cursor(view)
  local why = M.why_not(item)
  if why then
    return require('dsh.errors').notify(why, vim.log.levels.INFO)
  end
  M.start(view.agent_id, item.checkpoint, { turn = item.turn, step = item.step })
end

--- A checkpoint as one line of the list (pure).
function M.list_label(checkpoint)
  local files = type(checkpoint.files) == 'table' and checkpoint.files or {}
  local shown = vim.tbl_map(clean, vim.list_slice(files, 1, 3))
  return ('turn %s, step %s · %s · %s'):format(tostring(checkpoint.turn), tostring(checkpoint.step),
    tostring(checkpoint.at or ''):gsub('^%d+%-%d+%-%d+T(%d+:%d+):.*$', '%1'),
    #files == 0 and 'no file changed' or (table.concat(shown, ', ') .. (#files > #shown and (', +' .. (#files - #shown)) or '')))
end

--- :Dsh rewind list: every checkpoint of the session, newest first; the one chosen rewinds.
function M.pick(agent_id)
  require('dsh.client').request(require('dsh.protocol').requests.checkpoint_list, { agentId = agent_id }, function(result)
    local checkpoints = type(result) == 'table' and type(result.checkpoints) == 'table' and result.checkpoints or {}
    if #checkpoints == 0 then
      return require('dsh.errors').notify('no checkpoints in this session yet: one is taken before each step that can change files',
        vim.log.levels.INFO)
    end
    local newest_first = {}
    for i = #checkpoints, 1, -1 do
      table.insert(newest_first, checkpoints[i])
    end
    vim.ui.select(newest_first, { prompt = 'Rewind to before', format_item = M.list_label, kind = 'dsh.rewind' }, function(choice)
      if choice then
        M.start(agent_id, choice.seq, { turn = choice.turn, step = choice.step })
      end
    end)
  end, 'list the checkpoints')
end

return M
