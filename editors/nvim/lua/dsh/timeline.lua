-- :Dsh goal timeline: the current goal's rounds as the daemon folds them from the log
-- (dsh/goal/rounds), one line each: when it started, how long it took, a bar of the
-- tokens it used (input, of it read from the provider's cache, output), its tool calls,
-- how long it waited for you, and how it ended. One buffer per session,
-- dsh://goal-timeline/<sessionId>; it is read again when the goal changes or a turn
-- ends while it is shown, and with `r`.
local M = {}

M.keys = { refresh = 'r', close = 'q' }
M.bar_cells = 16

local ns = vim.api.nvim_create_namespace('dsh.timeline')

-- How each round ended, in a person's words and colour.
M.outcomes = {
  ['end-turn'] = { 'done', 'DiagnosticOk' },
  running = { 'running…', 'DiagnosticInfo' },
  cancelled = { 'stopped', 'DiagnosticWarn' },
  ['max-steps'] = { 'step limit', 'DiagnosticWarn' },
  ['model-error'] = { 'model error', 'DiagnosticError' },
  error = { 'error', 'DiagnosticError' },
}

--- A token count as people read it, in the daemon's words (its goal status uses the
--- same): 950, 1.2k, 12.4k, 182k, 1.5M; halves round up, integer arithmetic (pure).
function M.tokens(n)
  n = math.floor(tonumber(n) or 0)
  local floor = math.floor
  local function tenths(t)
    return t % 10 == 0 and tostring(floor(t / 10)) or ('%d.%d'):format(floor(t / 10), t % 10)
  end
  if n < 1000 then
    return tostring(n)
  elseif n < 100000 then
    return tenths(floor((n + 50) / 100)) .. 'k'
  end
  local thousands = floor((n + 500) / 1000)
  if thousands < 1000 then
    return thousands .. 'k'
  end
  return tenths(floor((n + 50000) / 100000)) .. 'M'
end

--- A span of milliseconds: "—" for none, 850ms, 4.1s, 12s, 1m 20s, 2h 05m (pure).
function M.duration(ms)
  ms = tonumber(ms)
  if not ms or ms <= 0 then
    return '—'
  elseif ms < 1000 then
    return ('%dms'):format(math.floor(ms))
  elseif ms < 10000 then
    return ('%.1fs'):format(ms / 1000)
  elseif ms < 60000 then
    return ('%ds'):format(math.floor(ms / 1000))
  elseif ms < 3600000 then
    return ('%dm %02ds'):format(math.floor(ms / 60000), math.floor(ms / 1000) % 60)
  end
  return ('%dh %02dm'):format(math.floor(ms / 3600000), math.floor(ms / 60000) % 60)
end

--- Milliseconds since 1970 of an ISO 8601 time, fraction included, or nil (pure).
function M.epoch_ms(iso)
  local seconds = require('dsh.commands').epoch(iso)
  if not seconds then
    return nil
  end
  local fraction = iso:match('%d%d:%d%d:%d%d%.(%d+)')
  return seconds * 1000 + (fraction and math.floor(tonumber('0.' .. fraction) * 1000 + 0.5) or 0)
end

--- A bar of `cells` cells for `value` of `max`, in eighths (pure); at least a sliver
--- for any value above zero.
function M.bar(value, max, cells)
  cells = cells or M.bar_cells
  if not max or max <= 0 or not value or value <= 0 then
    return ''
  end
  local eighths = math.max(1, math.floor(value / max * cells * 8 + 0.5))
  local partial = { '▏', '▎', '▍', '▌', '▋', '▊', '▉' }
  local out = string.rep('█', math.floor(eighths / 8))
  if eighths % 8 > 0 then
    out = out .. partial[eighths % 8]
  end
  return out
end

local function pad(text, width, right)
  local gap = math.max(0, width - vim.fn.strdisplaywidth(text))
  return right and (string.rep(' ', gap) .. text) or (text .. string.rep(' ', gap))
end

local function round_tokens(record)
  local t = type(record.tokens) == 'table' and record.tokens or {}
  return tonumber(t.input) or 0, tonumber(t.cachedInput) or 0, tonumber(t.output) or 0
end

--- The timeline's lines and highlights (pure): `result` is dsh/goal/rounds' answer,
--- `goal` the GoalView (its words head the page; may be nil), `now_ms` the time a running
--- round is measured to. Returns lines, and highlights {line (0-based), col, end_col, group}.
function M.render(result, goal, now_ms)
  local lines, marks = {}, {}
  local rounds = type(result) == 'table' and type(result.rounds) == 'table' and result.rounds or {}
  local statusline = require('dsh.statusline')
  if type(goal) == 'table' then
    table.insert(lines, ('Goal: %s'):format(tostring(goal.objective or '')))
    table.insert(lines, ('%s %s'):format(statusline.icon, statusline.goal_text(goal)))
  elseif type(result) == 'table' and type(result.goalId) == 'string' then
    table.insert(lines, 'Goal ' .. result.goalId)
  end
  if type(result) ~= 'table' or result.goalId == nil or result.goalId == vim.NIL then
    table.insert(lines, 'No goal in this session: :Dsh goal create {objective} [rounds]')
    return lines, marks
  end
  if #rounds == 0 then
    table.insert(lines, 'No round has run yet.')
    return lines, marks
  end
  local max = 0
  for _, record in ipairs(rounds) do
    local input, _, output = round_tokens(record)
    max = math.max(max, input + output)
  end
  table.insert(lines, '')
  local head = ('%s %s  %s  %s  %s  %s  %s  %s'):format(
    pad('round', 5, true),
    pad('rev', 3, true),
    pad('started', 8),
    pad('took', 7, true),
    pad('tokens', M.bar_cells),
    pad('in (cached) / out', 22, true),
    pad('tools', 5, true),
    pad('waited', 7, true)
  ) .. '  outcome'
  table.insert(lines, head)
  table.insert(marks, { #lines - 1, 0, #head, 'Title' })
  local totals = { input = 0, cached = 0, output = 0, tools = 0, waited = 0, estimated = false }
  for _, record in ipairs(rounds) do
    local input, cached, output = round_tokens(record)
    local estimated = record.estimated == true
    local mark = estimated and '~' or ''
    totals.input, totals.cached, totals.output = totals.input + input, totals.cached + cached, totals.output + output
    totals.tools = totals.tools + (tonumber(record.toolCalls) or 0)
    totals.waited = totals.waited + (tonumber(record.waitedMs) or 0)
    totals.estimated = totals.estimated or estimated
    local started = M.epoch_ms(record.startedAt)
    local ended = M.epoch_ms(type(record.endedAt) == 'string' and record.endedAt or nil)
    local running = record.outcome == 'running'
    local took = started and (ended or (running and now_ms) or nil) and M.duration((ended or now_ms) - started) or '—'
    if running and took ~= '—' then
      took = took .. '…'
    end
    local clock = type(record.startedAt) == 'string' and record.startedAt:match('T(%d%d:%d%d:%d%d)') or '?'
    local figures = ('%s%s (%s) / %s%s'):format(mark, M.tokens(input), M.tokens(cached), mark, M.tokens(output))
    local outcome = M.outcomes[record.outcome] or { tostring(record.outcome or '?'), 'DiagnosticWarn' }
    local waited = M.duration(record.waitedMs)
    local row, line = #lines, ''
    local function add(text, group)
      local from = #line
      line = line .. text
      if group then
        table.insert(marks, { row, from, #line, group })
      end
    end
    add(('%s %s  %s  %s  '):format(
      pad(tostring(record.round or '?'), 5, true),
      pad(tostring(record.revision or ''), 3, true),
      pad(clock, 8),
      pad(took, 7, true)
    ))
    add(M.bar(input + output, max), estimated and 'DiagnosticHint' or 'DiagnosticInfo')
    add(string.rep(' ', M.bar_cells - vim.fn.strdisplaywidth(M.bar(input + output, max))))
    add(('  %s  %s  '):format(pad(figures, 22, true), pad(tostring(record.toolCalls or 0), 5, true)))
    add(pad(waited, 7, true), waited ~= '—' and 'DiagnosticHint' or nil)
    add('  ')
    add(outcome[1], outcome[2])
    table.insert(lines, line)
  end
  table.insert(lines, '')
  local mark = totals.estimated and '~' or ''
  table.insert(lines, ('%d round%s · %s%s in (%s cached) · %s%s out · %d tool call%s · waited for you %s'):format(
    #rounds,
    #rounds == 1 and '' or 's',
    mark,
    M.tokens(totals.input),
    M.tokens(totals.cached),
    mark,
    M.tokens(totals.output),
    totals.tools,
    totals.tools == 1 and '' or 's',
    M.duration(totals.waited) == '—' and 'never' or M.duration(totals.waited)
  ))
  if totals.estimated then
    table.insert(lines, '~ estimated: the provider reported no usage, so tokens are counted as characters/4')
  end
  return lines, marks
end

-- sessionId -> { buf, agent_id, pending }
local views = {}

local function fill(view, lines, marks)
  if not vim.api.nvim_buf_is_valid(view.buf) then
    return
  end
  vim.bo[view.buf].modifiable = true
  vim.api.nvim_buf_set_lines(view.buf, 0, -1, false, lines)
  vim.bo[view.buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(view.buf, ns, 0, -1)
  for _, m in ipairs(marks) do
    pcall(vim.api.nvim_buf_set_extmark, view.buf, ns, m[1], m[2], { end_col = m[3], hl_group = m[4] })
  end
end

--- Read the rounds again and show them in `view`'s buffer; then `done()`.
local function refresh(view, done)
  local protocol = require('dsh.protocol')
  require('dsh.client').request(protocol.requests.goal_rounds, { agentId = view.agent_id }, function(result)
    view.read_at = vim.uv.now()
    local goal = require('dsh.state').goal(view.agent_id)
    local seconds, micros = vim.uv.gettimeofday()
    local lines, marks = M.render(result, goal, seconds * 1000 + math.floor(micros / 1000))
    fill(view, lines, marks)
    if done then
      done()
    end
  end, 'read the rounds of the goal')
end

--- :Dsh goal timeline: open (or show again) the current session's timeline in a split.
function M.open()
  require('dsh.commands').with_agent(function(agent_id)
    local session_id = require('dsh.state').session_id
    local view = views[session_id]
    if not (view and vim.api.nvim_buf_is_valid(view.buf)) then
      view = require('dsh.session_buffer').create('goal-timeline', session_id, 'dshtimeline', views, { agent_id = agent_id })
      vim.bo[view.buf].modifiable = false
      local function map(lhs, fn, desc)
        vim.keymap.set('n', lhs, fn, { buffer = view.buf, nowait = true, desc = desc })
      end
      map(M.keys.refresh, function()
        refresh(view)
      end, 'dsh: read the rounds again')
      map(M.keys.close, function()
        vim.cmd(#vim.api.nvim_tabpage_list_wins(0) > 1 and 'close' or 'enew')
      end, 'dsh: close the timeline')
    end
    view.agent_id = agent_id
    local shown = vim.fn.win_findbuf(view.buf)
    if #shown > 0 then
      vim.api.nvim_set_current_win(shown[1])
    else
      vim.cmd('botright 14split')
      vim.api.nvim_win_set_buf(0, view.buf)
    end
    vim.wo.wrap = false
    vim.wo.number = false
    vim.wo.winbar = (' Goal timeline  │  %s read again · %s close'):format(M.keys.refresh, M.keys.close)
    refresh(view)
  end)
end

--- The goal changed, or a turn ended, for `agent_id`: a timeline shown for it is read
--- again (once, shortly after: a round's end brings several notifications).
function M.changed(agent_id)
  for _, view in pairs(views) do
    if view.agent_id == agent_id and not view.pending and #vim.fn.win_findbuf(view.buf) > 0 then
      view.pending = true
      vim.defer_fn(function()
        view.pending = false
        refresh(view)
      end, 150)
    end
  end
end

--- The timeline buffer of `session_id`, if one is open (for tests).
function M.buffer(session_id)
  local view = views[session_id]
  return view and vim.api.nvim_buf_is_valid(view.buf) and view.buf or nil
end

return M
