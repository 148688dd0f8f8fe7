-- Plans of record: every plan the agent presented in the session, as the daemon folds
-- them from the log (dsh/plan/history), oldest first. :Dsh plan history lists them and
-- reopens any one read-only: its markdown as it was presented, the comments it got
-- beside their lines, its outcome and feedback above it, and (`d`) what changed since
-- the plan before it. Nothing here is kept: each opening reads the daemon again.
local M = {}

M.keys = { diff = 'd', older = '[p', newer = ']p', close = 'q' }

-- The outcome in a person's words (the picker, the buffer's header).
M.outcome_words = {
  approved = 'approved',
  revise = 'sent back',
  failed = 'failed',
  pending = 'under review now',
}

local ns = vim.api.nvim_create_namespace('dsh.plans')

--- "2 comments", "1 comment", nil (pure).
local function count_comments(record)
  local n = type(record.comments) == 'table' and #record.comments or 0
  if n == 0 then
    return nil
  end
  return n == 1 and '1 comment' or (n .. ' comments')
end

local function title_of(record)
  local title = type(record.title) == 'string' and vim.trim(record.title) or ''
  return title ~= '' and title or 'Untitled plan'
end

--- One picker line for the `index`th plan (pure): `#3 Plan: retries · sent back ·
--- 2 comments, feedback · 5 min ago`. `now` in seconds since 1970.
function M.label(record, index, now)
  local parts = { ('#%d %s'):format(index, title_of(record)) }
  table.insert(parts, M.outcome_words[record.outcome] or tostring(record.outcome or '?'))
  local said = {}
  local comments = count_comments(record)
  if comments then
    table.insert(said, comments)
  end
  if type(record.feedback) == 'string' and vim.trim(record.feedback) ~= '' then
    table.insert(said, 'feedback')
  end
  if #said > 0 then
    table.insert(parts, table.concat(said, ', '))
  end
  local ago = require('dsh.commands').ago(record.at, now)
  if ago ~= '' then
    table.insert(parts, ago)
  end
  return table.concat(parts, ' · ')
end

--- The lines above the plan (pure): its place, outcome and time, then the feedback.
function M.header(record, index, total)
  local lines = {
    ('Plan %d of %d · %s · %s'):format(
      index,
      total,
      M.outcome_words[record.outcome] or tostring(record.outcome or '?'),
      tostring(record.at or ''):gsub('T', ' '):gsub('%.%d+', ''):gsub('Z$', ' UTC')
    ),
  }
  if type(record.feedback) == 'string' and vim.trim(record.feedback) ~= '' then
    table.insert(lines, 'Feedback: ' .. record.feedback:gsub('%s+', ' '))
  end
  local comments = count_comments(record)
  if comments then
    table.insert(lines, comments .. ', at the end of their lines («)')
  end
  return lines
end

--- The diff from the plan before `index` to it, as lines with a head that names both
--- (pure); {} for the first plan.
function M.diff_to_previous(plans, index)
  local before = plans[index - 1]
  if not before then
    return {}
  end
  local diff = require('dsh.review').diff_lines(before.markdown, plans[index].markdown)
  if #diff == 0 then
    return { ('Plan %d is the same as plan %d.'):format(index, index - 1) }
  end
  return vim.list_extend({
    ('--- plan %d: %s (%s)'):format(index - 1, title_of(before), M.outcome_words[before.outcome] or '?'),
    ('+++ plan %d: %s'):format(index, title_of(plans[index])),
  }, vim.list_slice(diff, (diff[1] or ''):match('^%-%-%-') and 3 or 1))
end

-- The window a plan of record is shown in: reused while it shows one.
local function plan_window()
  local current = vim.api.nvim_get_current_buf()
  if vim.b[current].dsh_plan_of_record then
    return vim.api.nvim_get_current_win()
  end
  vim.cmd('botright split')
  return vim.api.nvim_get_current_win()
end

local function scratch(name, lines, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = filetype
  vim.b[buf].dsh_plan_of_record = true
  -- A name already taken (the same plan opened twice) keeps the buffer unnamed.
  pcall(vim.api.nvim_buf_set_name, buf, name)
  return buf
end

local function key_help(index, total, as_diff)
  local parts = { M.keys.diff .. (as_diff and ' the plan itself' or ' changes since the plan before') }
  if index > 1 then
    table.insert(parts, M.keys.older .. ' older')
  end
  if index < total then
    table.insert(parts, M.keys.newer .. ' newer')
  end
  table.insert(parts, M.keys.close .. ' close')
  return table.concat(parts, ' · ')
end

--- Show plan `index` of `plans` (dsh/plan/history's records) in `win`, read-only; with
--- `as_diff`, its diff to the plan before instead. Returns the buffer.
function M.show(plans, index, session_id, win, as_diff)
  local record = plans[index]
  local total = #plans
  local buf
  local base = ('dsh://plan/%s/%d'):format(tostring(session_id or '?'), index)
  if as_diff then
    local lines = M.diff_to_previous(plans, index)
    if #lines == 0 then
      lines = { 'This is the first plan of the session: nothing to compare it with.' }
    end
    buf = scratch(base .. '/changes', lines, 'diff')
  else
    buf = scratch(base, require('dsh.review').split_lines(record.markdown), 'markdown')
    local header = {}
    for _, line in ipairs(M.header(record, index, total)) do
      table.insert(header, { { line, 'Comment' } })
    end
    vim.api.nvim_buf_set_extmark(buf, ns, 0, 0, { virt_lines = header, virt_lines_above = true })
    local line_count = vim.api.nvim_buf_line_count(buf)
    for _, comment in ipairs(type(record.comments) == 'table' and record.comments or {}) do
      local line = tonumber(comment.line)
      if line and line >= 1 and line <= line_count then
        vim.api.nvim_buf_set_extmark(buf, ns, line - 1, 0, {
          virt_text = { { '  « ' .. tostring(comment.text or ''), 'DiagnosticVirtualTextInfo' } },
          virt_text_pos = 'eol',
        })
      end
    end
  end
  vim.api.nvim_win_set_buf(win, buf)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = not as_diff
  vim.wo[win].winbar = (' %s%s  │  %s'):format(title_of(record), as_diff and ' · changes' or '', key_help(index, total, as_diff))
    :gsub('%%', '%%%%')
  if not as_diff then
    -- The header is virtual lines above line 1: shown only when the window starts above it.
    vim.api.nvim_win_call(win, function()
      vim.fn.winrestview({ topline = 1, topfill = #M.header(record, index, total), lnum = 1 })
    end)
  end
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map(M.keys.diff, function()
    M.show(plans, index, session_id, win, not as_diff)
  end, 'dsh: this plan / its changes since the plan before')
  map(M.keys.older, function()
    if plans[index - 1] then
      M.show(plans, index - 1, session_id, win, as_diff)
    end
  end, 'dsh: the plan before this one')
  map(M.keys.newer, function()
    if plans[index + 1] then
      M.show(plans, index + 1, session_id, win, as_diff)
    end
  end, 'dsh: the plan after this one')
  map(M.keys.close, function()
    if #vim.api.nvim_tabpage_list_wins(0) > 1 then
      vim.api.nvim_win_close(win, true)
    else
      vim.cmd('enew')
    end
  end, 'dsh: close the plan')
  return buf
end

--- The session's plans, oldest first, then `done(plans)` (dsh/plan/history).
function M.read(agent_id, done)
  local protocol = require('dsh.protocol')
  require('dsh.client').request(protocol.requests.plan_history, { agentId = agent_id }, function(result)
    done(type(result) == 'table' and type(result.plans) == 'table' and result.plans or {})
  end, 'read the plans of the session')
end

--- :Dsh plan history: choose a plan of the session; it opens read-only (M.show).
--- `index`, when given, opens that plan without asking (1 = the first).
function M.pick(index)
  require('dsh.commands').with_agent(function(agent_id)
    local session_id = require('dsh.state').session_id
    M.read(agent_id, function(plans)
      if #plans == 0 then
        return require('dsh.errors').notify('no plan yet in this session (plan mode: :Dsh plan on)', vim.log.levels.INFO)
      end
      if index then
        if index < 1 or index > #plans then
          return require('dsh.errors').notify(
            ('there is no plan %d: this session has %d'):format(index, #plans),
            vim.log.levels.WARN
          )
        end
        return M.show(plans, index, session_id, plan_window(), false)
      end
      local now = os.time()
      local items = {}
      for i = #plans, 1, -1 do -- newest first: the plan one looks for is most often the last
        table.insert(items, i)
      end
      vim.ui.select(items, {
        prompt = 'Plans of this session (newest first)',
        kind = 'dsh.plans',
        format_item = function(i)
          return M.label(plans[i], i, now)
        end,
      }, function(choice)
        if choice then
          M.show(plans, choice, session_id, plan_window(), false)
        end
      end)
    end)
  end)
end

return M
