-- A read-only buffer per session that shows its log events and follows
-- dsh/session/event as they are committed.
local M = {}

-- sessionId -> { buf, agent_id, last_seq }
local views = {}

local function one_line(value, limit)
  local text = type(value) == 'string' and value or vim.json.encode(value)
  text = text:gsub('%s+', ' ')
  limit = limit or 200
  if #text > limit then
    text = text:sub(1, limit - 1) .. '…'
  end
  return text
end

local function text_lines(prefix, text)
  local out = {}
  for i, line in ipairs(vim.split(text or '', '\n', { plain = true })) do
    table.insert(out, (i == 1 and prefix or string.rep(' ', vim.fn.strdisplaywidth(prefix))) .. line)
  end
  return out
end

--- The lines that show one log event (pure). `tool_name`, when known, is the name of
--- the call a tool/result answers.
---@param event table {seq, type, at, turn?, data}
---@param tool_name string?
---@return string[]
function M.render(event, tool_name)
  local data = type(event.data) == 'table' and event.data or {}
  local head = ('%4d '):format(tonumber(event.seq) or 0)
  local t = event.type
  if t == 'user/message' then
    local who = data.source == 'plugin' and ('[' .. tostring(data.plugin or 'plugin') .. '] ') or ''
    if type(data.goalRound) == 'table' then
      who = ('[goal round %s] '):format(tostring(data.goalRound.round))
    end
    return text_lines(head .. '> ' .. who, data.text)
  elseif t == 'assistant/message' then
    return text_lines(head .. '< ', data.text or one_line(data))
  elseif t == 'tool/call' then
    return { head .. ('→ %s %s'):format(tostring(data.name), one_line(data.arguments or {}, 160)) }
  elseif t == 'tool/result' then
    if tool_name == 'exit_plan_mode' then
      -- A plan kept in review is the person's answer, not a failure.
      return text_lines(head .. (data.ok and '← plan approved ' or '← plan not approved: '), one_line(data.content or '', 400))
    end
    return text_lines(head .. (data.ok and '← ok ' or '← failed '), one_line(data.content or '', 400))
  elseif t == 'turn/open' then
    return { head .. ('── turn %s (%s) ──'):format(tostring(data.turn), tostring(data.cause)) }
  elseif t == 'turn/close' then
    return { head .. ('── turn %s ended: %s ──'):format(tostring(data.turn), tostring(data.stopReason)) }
  elseif t == 'plan/mode' then
    return { head .. 'plan mode ' .. (data.active and 'on' or 'off') }
  elseif t == 'goal/change' then
    if data.op == 'clear' then
      return { head .. 'goal cleared' }
    end
    local g = type(data.goal) == 'table' and data.goal or {}
    return {
      head
        .. ('goal %s: %s, %s/%s rounds, %q'):format(
          tostring(data.op),
          tostring(g.phase),
          tostring(data.roundsStarted),
          tostring(g.maxRounds),
          tostring(g.objective)
        ),
    }
  elseif t == 'request/header' then
    return { head .. ('· step %s%s'):format(tostring(data.step), data.planActive and ' (planning)' or '') }
  elseif t == 'session/start' then
    return { head .. 'session ' .. tostring(data.sessionId) .. (data.title and (' "' .. data.title .. '"') or '') }
  end
  return { head .. tostring(t) .. ' ' .. one_line(data) }
end

local function append(view, events)
  local lines = {}
  for _, event in ipairs(events) do
    local seq = tonumber(event.seq) or 0
    if seq > view.last_seq then
      view.last_seq = seq
      local data = type(event.data) == 'table' and event.data or {}
      if event.type == 'tool/call' and data.callId then
        view.calls[data.callId] = data.name
      end
      vim.list_extend(lines, M.render(event, data.callId and view.calls[data.callId]))
    end
  end
  if #lines == 0 or not vim.api.nvim_buf_is_valid(view.buf) then
    return
  end
  -- Windows whose cursor is on the last line keep following the end.
  local followers = {}
  local line_count = vim.api.nvim_buf_line_count(view.buf)
  for _, win in ipairs(vim.fn.win_findbuf(view.buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= line_count then
      table.insert(followers, win)
    end
  end
  vim.bo[view.buf].modifiable = true
  local empty = line_count == 1 and vim.api.nvim_buf_get_lines(view.buf, 0, 1, false)[1] == ''
  vim.api.nvim_buf_set_lines(view.buf, empty and 0 or -1, -1, false, lines)
  vim.bo[view.buf].modifiable = false
  for _, win in ipairs(followers) do
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(view.buf), 0 })
  end
end

--- Open (or show) the transcript of the current session in the current window.
function M.open()
  local state = require('dsh.state')
  local client = require('dsh.client')
  local protocol = require('dsh.protocol')
  local agent_id, session_id = state.agent_id, state.session_id
  if not agent_id then
    require('dsh.errors').notify('no session. Start one: :Dsh session new, or :Dsh session open')
    return
  end
  local view = views[session_id]
  if view and vim.api.nvim_buf_is_valid(view.buf) then
    view.agent_id = agent_id
    vim.api.nvim_set_current_buf(view.buf)
    return view.buf
  end
  view = require('dsh.session_buffer').create('transcript', session_id, 'dshtranscript', views, {
    agent_id = agent_id,
    last_seq = 0,
    calls = {},
  })
  local buf = view.buf
  vim.bo[buf].modifiable = false
  vim.api.nvim_set_current_buf(buf)

  -- History first, a page at a time. Live events that arrive meanwhile wait in
  -- `pending` (a page may or may not hold them); append skips seqs already shown.
  view.loading = true
  view.pending = {}
  local limit = 500
  local function page(after_seq)
    client.request(protocol.requests.session_events, { agentId = agent_id, afterSeq = after_seq, limit = limit }, function(result)
      local events = result and result.events or {}
      append(view, events)
      if #events >= limit then
        return page(view.last_seq)
      end
      view.loading = false
      table.sort(view.pending, function(a, b)
        return (tonumber(a.seq) or 0) < (tonumber(b.seq) or 0)
      end)
      append(view, view.pending)
      view.pending = {}
    end, 'read the session log', function()
      view.loading = false
      append(view, view.pending)
      return false -- still reported
    end)
  end
  page(0)
  -- :e! and :edit read no file: Neovim empties the buffer; the log is read again.
  vim.api.nvim_create_autocmd('BufReadCmd', {
    buffer = buf,
    callback = function()
      view.last_seq, view.calls, view.loading, view.pending = 0, {}, true, {}
      page(0)
    end,
  })
  return buf
end

--- dsh/session/event: append to the session's transcript if one is open.
function M.on_event(params)
  local view = params and views[params.sessionId]
  if view and type(params.event) == 'table' then
    if view.loading then
      table.insert(view.pending, params.event)
    else
      append(view, { params.event })
    end
  end
end

return M
