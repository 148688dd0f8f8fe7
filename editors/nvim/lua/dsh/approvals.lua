-- Approvals: answers dsh/permission/ask in a float that shows the edit's diff or the
-- command and its folder. `a` allows once, `s` allows this tool for the session, `r`
-- rejects (with feedback for the agent, when given). Closing the float (`q` or any
-- other way) decides nothing: the approval stays open, shown in the chat and the
-- statusline, and :Dsh answer brings it back. A request the daemon withdraws (the turn
-- ended, its timeout) closes it, fail-closed.
local float = require('dsh.float')

local M = {}

M.keys = { allow = 'a', session = 's', reject = 'r', close = 'q' }

-- Open approvals by buffer: { buf, win, params, decide }.
local open = {}

--- The lines the float shows for `params` (pure): the diff, or the command and the
--- folder it runs in.
---@return string[] lines
---@return string filetype
function M.body(params)
  if type(params.diff) == 'string' and params.diff ~= '' then
    return require('dsh.review').split_lines(params.diff), 'diff'
  end
  local lines = {}
  if type(params.command) == 'string' then
    for i, line in ipairs(require('dsh.review').split_lines(params.command)) do
      table.insert(lines, (i == 1 and '$ ' or '  ') .. line)
    end
  end
  if type(params.cwd) == 'string' then
    table.insert(lines, '')
    table.insert(lines, 'in ' .. params.cwd)
  end
  if #lines == 0 then
    lines = { ('%s wants to run (%s).'):format(tostring(params.tool), tostring(params.mutability)) }
  end
  return lines, 'sh'
end

--- The answer (pure): feedback only with a reject, and only when there is some.
function M.answer(outcome, feedback)
  local result = { outcome = outcome }
  if outcome == 'reject' and type(feedback) == 'string' and vim.trim(feedback) ~= '' then
    result.feedback = feedback
  end
  return result
end

local function key_help(tool)
  local k = M.keys
  return ('%s allow · %s allow %s for this session · %s reject · %s later (stays open)'):format(
    k.allow,
    k.session,
    tostring(tool or 'it'),
    k.reject,
    k.close
  )
end

--- The one-line notice for an approval that opened without the focus (pure).
function M.waiting_notice(title)
  return ('%s waits for you: :Dsh answer (ga in the chat)'):format(title)
end

--- Open the float for `params`; `finish(result)` is called exactly once (nil when it
--- closed unanswered). `request` is the handle of the request it answers (dsh.asks.serve).
function M.open(params, finish, request)
  local lines, filetype = M.body(params)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'hide' -- survives its window: a closed float comes back
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = filetype
  pcall(vim.api.nvim_buf_set_name, buf, 'dsh://approve/' .. tostring(params.callId))
  local title = ('%s · allow?'):format(tostring(params.title or params.tool))
  local approval = { buf = buf, params = params, done = false, title = title }
  local ready = function()
    return false
  end

  --- Show the float (again); `focus` takes the focus whatever the person is doing.
  function approval.show(focus)
    if approval.done then
      return
    end
    if approval.win and vim.api.nvim_win_is_valid(approval.win) then
      float.focus(approval.win, title)
      return
    end
    local opts = { title = title, keys = key_help(params.tool), number = false }
    local entered
    if focus then
      approval.win = float.open(buf, opts)
      entered = true
      local shown_at = vim.uv.now()
      ready = function()
        return vim.uv.now() - shown_at >= float.guard_ms or float.guard_ms <= 0
      end
    else
      approval.win, ready, entered = float.open_question(buf, opts)
    end
    approval.shown = true
    if not entered then
      require('dsh.notices').tell_waiting(params.agentId, M.waiting_notice(title)) -- once per waiting spell
    end
  end

  local label = 'approval of ' .. tostring(params.title or params.tool)
  local unregister = require('dsh.asks').add(params.agentId, params.callId, function(reason, message)
    -- Unanswered: the request ends as cancelled (dsh.asks.serve), nothing decided here.
    -- A key meant for the approval, pressed as it closes, must not act on the window below.
    float.close_by_itself(approval.win, message or ('%s closed: %s'):format(label, reason or 'ended elsewhere'))
    approval.decide(nil)
    if message then
      require('dsh.errors').notify(message, vim.log.levels.INFO)
    elseif reason then
      require('dsh.errors').notify(('%s closed: %s.'):format(label, reason), vim.log.levels.WARN)
    end
  end, {
    title = title,
    label = label,
    kind = 'permission',
    question_id = params.callId,
    request = request,
    show = function()
      approval.show(true)
    end,
  })

  function approval.decide(result)
    if approval.done then
      return
    end
    approval.done = true
    unregister(result and result.outcome)
    open[buf] = nil
    if approval.win and vim.api.nvim_win_is_valid(approval.win) then
      vim.api.nvim_win_close(approval.win, true)
    end
    if vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_delete(buf, { force = true })
    end
    finish(result)
  end
  open[buf] = approval

  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, function()
      if ready() then
        fn()
      end
    end, { buffer = buf, nowait = true, desc = desc })
  end
  map(M.keys.allow, function()
    approval.decide(M.answer('allow-once'))
  end, 'dsh: allow this once')
  map(M.keys.session, function()
    approval.decide(M.answer('allow-session'))
  end, 'dsh: allow this tool for the session')
  map(M.keys.reject, function()
    vim.ui.input({ prompt = 'Reject. What should the agent do instead? (Enter: just reject) ', default = approval.feedback }, function(text)
      if text == nil then
        return -- cancelled: still asking
      end
      approval.decide(M.answer('reject', text))
    end)
  end, 'dsh: reject, with feedback for the agent')
  -- Closing decides nothing: the approval waits, in the chat and the statusline.
  vim.keymap.set('n', M.keys.close, function()
    if approval.win and vim.api.nvim_win_is_valid(approval.win) then
      vim.api.nvim_win_close(approval.win, true)
    end
  end, { buffer = buf, nowait = true, desc = 'dsh: close; the approval stays open (:Dsh answer)' })
  approval.show(false)
  return approval
end

--- The handler of the server request dsh/permission/ask (in Neovim's coroutine): the
--- person's answer, or RequestCancelled when it ended without one (dsh.asks.serve).
function M.ask(params, ctx)
  if type(params) ~= 'table' then
    return M.answer('reject')
  end
  local asks = require('dsh.asks')
  return asks.serve(ctx, function(request)
    return asks.await('the approval', function(done)
      M.open(params, done, request)
    end) or M.answer('reject')
  end)
end

function M.list()
  return vim.tbl_values(open)
end

return M
