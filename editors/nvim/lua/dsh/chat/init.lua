-- :Dsh chat: a conversation buffer per session that renders the daemon's chat items
-- (dsh/chat/get, then every dsh/chat/item upsert) and sends what the person types in
-- its prompt area. Nothing here derives text from log events: the items carry it.
local builder_mod = require('dsh.chat.builder')
local store_mod = require('dsh.chat.store')

local M = {}

M.keys = { answer = 'ga', rewind = require('dsh.chat.text').rewind_key }

-- sessionId -> { buf, agent_id, session_id, store, builder, loading, pending }
local views = {}

--- The view of a buffer (for tests and the input).
function M.view_of_buf(buf)
  for _, view in pairs(views) do
    if view.buf == buf then
      return view
    end
  end
end

function M.views()
  return views
end

-- Questions open now, by agent and tool call: what the chat says under the call
-- ("waiting for you"). Kept here, not in the item: the daemon's upserts replace items.
local waiting = {} ---@type table<string, table<string, string>>

--- `item` with the note of the question open for its tool call, if any (a copy when
--- the note changes).
local function with_note(view, item)
  local note = item.callId and (waiting[view.agent_id] or {})[item.callId]
  if note ~= item.waitingFor then
    item = vim.tbl_extend('force', {}, item)
    item.waitingFor = note
  end
  return item
end

--- Apply one upsert to `view` (its store and its buffer).
function M.show(view, item)
  item = with_note(view, item)
  local at = view.store:upsert(item)
  -- The formatter continues the item shown before it (same turn: no new heading).
  local prev = view.store:before(at)
  while prev and not require('dsh.chat.formatters').knows(prev.kind) do
    at = at - 1
    prev = view.store:before(at)
  end
  view.builder:upsert(item, prev)
end

-- A chat opens on its newest page: the daemon answers it from its chat marks without
-- reading the whole log, so a long session opens as fast as a short one. Earlier pages
-- come on demand (scrolling to the top, the line above the first item, :Dsh chat older).
M.page_size = 200
local NEWEST = 9007199254740991 -- 2^53-1: above any seq (dsh/chat/get beforeSeq)
local earlier_ns = vim.api.nvim_create_namespace('dsh.chat.earlier')
M.earlier_hint = '⋯ earlier messages: scroll up to here or :Dsh chat older ⋯'

-- What a page says about the one before it: the seq to ask below, or nil when the page
-- was short (nothing older is left). Items without a seq do not count toward the limit.
local function older_seq_of(items)
  local first, counted = nil, 0
  for _, item in ipairs(items) do
    if item.seq ~= nil then
      first = first or item.seq
      counted = counted + 1
    end
  end
  return counted >= M.page_size and first or nil
end

-- The line above the first item that says earlier messages can be loaded (a real line
-- of the buffer, so a window scrolled to the top shows it; the builder's items follow it).
local function drop_earlier(view)
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(view.buf, earlier_ns, 0, -1, {})) do
    vim.api.nvim_buf_del_extmark(view.buf, earlier_ns, mark[1])
    vim.api.nvim_buf_set_lines(view.buf, mark[2], mark[2] + 1, false, {})
  end
end

local function mark_earlier(view)
  if view.older_seq then
    vim.bo[view.buf].modifiable = true
    vim.api.nvim_buf_set_lines(view.buf, 0, 0, false, { M.earlier_hint })
    vim.api.nvim_buf_set_extmark(view.buf, earlier_ns, 0, 0, { hl_group = 'Comment', end_col = #M.earlier_hint })
    view.builder.folds = nil -- the items' lines moved down by one
  end
end

-- Lay the store out again. With `keep_place` (an earlier page went in front) every window
-- on the buffer keeps its place counted from the end: lines put in front move nothing the
-- person looks at or types in. Without it (a first read) the windows are left as the
-- builder leaves them (the cursor in the prompt area, the end in sight).
local function rebuild(view, keep_place)
  local buf = view.buf
  local before = vim.api.nvim_buf_line_count(buf)
  local places = {}
  for _, win in ipairs(keep_place and vim.fn.win_findbuf(buf) or {}) do
    local cursor = vim.api.nvim_win_get_cursor(win)
    local top = vim.api.nvim_win_call(win, function()
      return vim.fn.line('w0')
    end)
    places[win] = { before - cursor[1], cursor[2], before - top }
  end
  drop_earlier(view)
  view.builder:reset(view.store:items())
  mark_earlier(view)
  local after = vim.api.nvim_buf_line_count(buf)
  for win, place in pairs(places) do
    vim.api.nvim_win_call(win, function()
      vim.fn.winrestview({ topline = math.max(1, after - place[3]) })
    end)
    pcall(vim.api.nvim_win_set_cursor, win, { math.max(1, after - place[1]), place[2] })
  end
end

--- Read the agent's newest page and render it, then the upserts that arrived meanwhile
--- (an upsert of an id already read replaces it, as anywhere).
local function load(view)
  local client = require('dsh.client')
  local protocol = require('dsh.protocol')
  local agent_id = view.agent_id
  view.loading, view.pending, view.older_seq, view.loading_older = true, {}, nil, nil
  view.store = store_mod.new()
  local params = { agentId = agent_id, beforeSeq = NEWEST, limit = M.page_size }
  client.request(protocol.requests.chat_get, params, function(result)
    if view.agent_id ~= agent_id then
      return -- the session moved to another agent meanwhile
    end
    local got = result and result.items or {}
    -- (A question that opened while the page was read is noted under its call too.)
    for _, item in ipairs(got) do
      view.store:upsert(with_note(view, item))
    end
    for _, item in ipairs(view.pending) do
      view.store:upsert(with_note(view, item))
    end
    view.older_seq = older_seq_of(got)
    view.loading, view.pending = false, {}
    rebuild(view)
  end, 'read the conversation', function()
    view.loading = false
    return false -- still reported
  end)
end

--- Load the page before the first item shown, in front of it (`view`: the chat of the
--- current buffer, else of the current session). Live upserts go on meanwhile.
function M.older(view)
  view = view or M.view_of_buf(vim.api.nvim_get_current_buf()) or views[require('dsh.state').session_id or '']
  if not view then
    return require('dsh.errors').notify('no chat is open: :Dsh chat', vim.log.levels.INFO)
  end
  if view.loading or view.loading_older then
    return
  end
  if not view.older_seq then
    return require('dsh.errors').notify('the chat already shows the whole conversation', vim.log.levels.INFO)
  end
  local agent_id = view.agent_id
  view.loading_older = true
  local params = { agentId = agent_id, beforeSeq = view.older_seq, limit = M.page_size }
  require('dsh.client').request(require('dsh.protocol').requests.chat_get, params, function(result)
    view.loading_older = false
    if view.agent_id ~= agent_id or view.loading then
      return -- another agent's chat is being read instead
    end
    local got = result and result.items or {}
    view.older_seq = older_seq_of(got)
    view.store:prepend(got)
    rebuild(view, true)
  end, 'read earlier messages', function()
    view.loading_older = false
    return false
  end)
end

-- A chat window scrolled to its first line loads the page before it.
vim.api.nvim_create_autocmd('WinScrolled', {
  group = vim.api.nvim_create_augroup('dsh.chat.older', { clear = true }),
  callback = function()
    for key in pairs(vim.v.event) do
      local win = tonumber(key)
      if win and vim.api.nvim_win_is_valid(win) then
        local view = M.view_of_buf(vim.api.nvim_win_get_buf(win))
        if view and view.older_seq and not view.loading_older then
          local top = vim.api.nvim_win_call(win, function()
            return vim.fn.line('w0')
          end)
          if top == 1 then
            M.older(view)
          end
        end
      end
    end
  end,
})

local function set_window_options(win)
  vim.wo[win].foldmethod = 'expr'
  vim.wo[win].foldexpr = "v:lua.require'dsh.chat.builder'.foldexpr()"
  vim.wo[win].foldtext = "v:lua.require'dsh.chat.builder'.foldtext()"
  vim.wo[win].foldlevel = 0
  vim.wo[win].foldenable = true
  vim.wo[win].fillchars = 'fold: '
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].winbar = "%{%v:lua.require'dsh.chat'.winbar()%}"
end

local function new_view(agent_id, session_id)
  local view = require('dsh.session_buffer').create('chat', session_id, 'markdown', views, {
    agent_id = agent_id,
    session_id = session_id,
  })
  local buf = view.buf
  view.builder = builder_mod.attach(buf)
  require('dsh.chat.input').attach(buf, function()
    M.send(view)
  end)
  vim.keymap.set('n', M.keys.answer, function()
    if not require('dsh.asks').show_next() then
      require('dsh.errors').notify('nothing waits for your answer', vim.log.levels.INFO)
    end
  end, { buffer = buf, desc = 'dsh: go to the approval or plan review that waits for you' })
  vim.keymap.set('n', M.keys.rewind, function()
    require('dsh.rewind').at_cursor()
  end, { buffer = buf, desc = 'dsh: rewind to before the message or tool call under the cursor (shows the diff, then asks)' })
  vim.api.nvim_create_autocmd('BufWinEnter', {
    buffer = buf,
    callback = function()
      set_window_options(vim.api.nvim_get_current_win())
    end,
  })
  -- :e! and :edit on the chat read no file: Neovim empties the buffer, then asks this
  -- autocmd to read it; the chat is laid out again from the items it holds, with what
  -- the person had typed below them (kept as the buffer unloads).
  vim.api.nvim_create_autocmd('BufUnload', {
    buffer = buf,
    callback = function()
      local ok, prompt = pcall(view.builder.prompt_lines, view.builder)
      view.typed = ok and prompt or nil
    end,
  })
  vim.api.nvim_create_autocmd('BufReadCmd', {
    buffer = buf,
    callback = function()
      M.reread(view)
    end,
  })
  load(view)
  return view
end

--- Lay the chat of `view` out again after its buffer was emptied (:e!); a page still
--- being read is laid out when it arrives.
function M.reread(view)
  local typed = view.typed
  view.typed = nil
  vim.bo[view.buf].modifiable = true
  if view.loading or not view.store then
    return
  end
  rebuild(view)
  if typed and (#typed > 1 or typed[1] ~= '') then
    view.builder:set_prompt(typed)
  end
  local last = vim.api.nvim_buf_line_count(view.buf)
  for _, win in ipairs(vim.fn.win_findbuf(view.buf)) do
    vim.api.nvim_win_set_cursor(win, { last, 0 })
  end
end

--- The chat item under the cursor of the current window (on `view`'s buffer), or nil.
function M.item_at_cursor(view)
  if not view.store or view.loading then
    return nil
  end
  local id = view.builder:item_at(vim.api.nvim_win_get_cursor(0)[1] - 1)
  local at = id and view.store.index[id]
  return at and view.store:items()[at] or nil
end

--- Open the current session's chat: `where` is 'split' (default, a vertical split),
--- 'tab', or 'here' (the current window). Starts a session when none is open.
function M.open(where)
  require('dsh.commands').with_agent(function(agent_id)
    local state = require('dsh.state')
    local session_id = state.session_id
    local view = views[session_id]
    if view and view.agent_id ~= agent_id then
      view.agent_id = agent_id
      load(view)
    end
    view = view or new_view(agent_id, session_id)
    local wins = vim.fn.win_findbuf(view.buf)
    if #wins > 0 and where ~= 'tab' then
      vim.api.nvim_set_current_win(wins[1])
    else
      if where == 'tab' then
        vim.cmd('tabnew')
      elseif where ~= 'here' then
        vim.cmd('vsplit')
      end
      vim.api.nvim_win_set_buf(0, view.buf)
      set_window_options(vim.api.nvim_get_current_win())
    end
    -- Ready to type: the cursor at the end of the prompt area.
    local last = vim.api.nvim_buf_line_count(view.buf)
    vim.api.nvim_win_set_cursor(0, { last, 0 })
  end, true)
end

--- A question about tool call `call_id` of `agent_id` opened (`title`) or ended (nil):
--- its chat item says so, in every open chat of that agent.
function M.mark_waiting(agent_id, call_id, title)
  waiting[agent_id] = waiting[agent_id] or {}
  waiting[agent_id][call_id] = title
  for _, view in pairs(views) do
    if view.agent_id == agent_id and view.store and not view.loading then
      for _, item in ipairs(view.store:items()) do
        if item.callId == call_id then
          M.show(view, item)
        end
      end
    end
  end
end

--- dsh/chat/item: an upsert for the chat of that session, if one is open.
function M.on_item(params)
  if type(params) ~= 'table' or type(params.item) ~= 'table' or type(params.item.id) ~= 'string' then
    return
  end
  local view = views[params.sessionId]
  if not view or view.agent_id ~= params.agentId then
    return
  end
  if view.loading then
    table.insert(view.pending, params.item)
  else
    M.show(view, params.item)
  end
end

--- Another session became current: chat windows that show another session's chat
--- show this one's now (:Dsh session open switches the chat). Another agent became
--- current for a session with an open chat (reopened after a restart, reloaded): read
--- its items under the same ids.
function M.on_session_changed(agent_id, session_id)
  if not (agent_id and session_id) then
    return
  end
  local view = views[session_id]
  if view and view.agent_id ~= agent_id then
    view.agent_id = agent_id
    load(view)
  end
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local shown = M.view_of_buf(vim.api.nvim_win_get_buf(win))
    if shown and shown.session_id ~= session_id then
      view = view or new_view(agent_id, session_id)
      vim.api.nvim_win_set_buf(win, view.buf)
      set_window_options(win)
      local last = vim.api.nvim_buf_line_count(view.buf)
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

--- Send what the person typed: a prompt, or a steer while a turn runs.
function M.send(view)
  local input = require('dsh.chat.input')
  local text = input.text(view.builder:prompt_lines())
  if text == '' then
    return require('dsh.errors').notify('type your message below the conversation first', vim.log.levels.WARN)
  end
  local state = require('dsh.state')
  if view.agent_id ~= state.agent_id then
    state.set_current(view.agent_id, view.session_id)
  end
  view.builder:set_prompt({ '' })
  local actions = require('dsh.commands').actions
  if state.busy(view.agent_id) then
    actions.steer({ text = text })
  else
    actions.prompt({ text = text, quiet = true })
  end
end

--- The chat window's bar: what the agent does ("working…", "waiting for you",
--- "paused"), the session's title, who else is attached ("with VS Code"), and on the
--- right the goal as the statusline shows it.
function M.winbar()
  local view = M.view_of_buf(vim.api.nvim_get_current_buf())
  if not view then
    return ''
  end
  local state = require('dsh.state')
  local statusline = require('dsh.statusline')
  local title
  local first = view.store and view.store:items()[1]
  if first and first.kind == 'session' and type(first.title) == 'string' and first.title ~= '' then
    title = first.title
  end
  for _, s in ipairs(state.sessions or {}) do
    if not title and s.sessionId == view.session_id and type(s.title) == 'string' and s.title ~= '' then
      title = s.title
    end
  end
  if not title and view.store then
    -- As the daemon titles a session: the words of its first prompt.
    for _, item in ipairs(view.store:items()) do
      if item.kind == 'user-message' and item.sender == 'person' and type(item.text) == 'string' then
        title = require('dsh.errors').fit(vim.trim((item.text:gsub('%s+', ' '))), 50)
        break
      end
    end
  end
  local goal = ''
  if view.agent_id == state.agent_id then
    local plan = state.plan()
    goal = statusline.format(state.goal(), { plan = plan ~= nil and plan.active == true })
  end
  local activity = statusline.activity_words[state.activity(view.agent_id) or '']
  local others = statusline.others_text(state.others(view.agent_id))
  local left = (activity and (activity .. ' · ') or '') .. (title or 'new session') .. (others ~= '' and (' · ' .. others) or '')
  return (' %s%%<%%=%s '):format((left:gsub('%%', '%%%%')), goal)
end

return M
