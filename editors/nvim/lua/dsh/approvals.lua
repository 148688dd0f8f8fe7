-- Approvals: answers dsh/permission/ask in a float that shows the edit's diff or the
-- command and its folder. `a` allows once, `s` allows this tool for the session, `r`
-- rejects with feedback for the agent; closing the float any other way rejects
-- (fail-closed). A request the daemon withdraws (the turn ended, its timeout) closes
-- its float.
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
  return ('%s allow · %s allow %s for this session · %s reject with feedback · %s reject'):format(
    k.allow,
    k.session,
    tostring(tool or 'it'),
    k.reject,
    k.close
  )
end

--- Open the float for `params`; `finish(result)` is called exactly once.
function M.open(params, finish)
  local lines, filetype = M.body(params)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = filetype
  pcall(vim.api.nvim_buf_set_name, buf, 'dsh://approve/' .. tostring(params.callId))
  local approval = { buf = buf, params = params, done = false, feedback = nil }
  approval.win = float.open(buf, {
    title = ('%s · allow?'):format(tostring(params.title or params.tool)),
    keys = key_help(params.tool),
    number = false,
  })

  local unregister = require('dsh.asks').add(params.agentId, params.callId, function(reason)
    approval.decide(M.answer('reject'))
    if reason then
      require('dsh.errors').notify(
        ('approval of %s closed: %s.'):format(tostring(params.title or params.tool), reason),
        vim.log.levels.WARN
      )
    end
  end)

  function approval.decide(result)
    if approval.done then
      return
    end
    approval.done = true
    unregister()
    open[buf] = nil
    if vim.api.nvim_win_is_valid(approval.win) then
      vim.api.nvim_win_close(approval.win, true)
    end
    finish(result)
  end
  open[buf] = approval

  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map(M.keys.allow, function()
    approval.decide(M.answer('allow-once'))
  end, 'dsh: allow this once')
  map(M.keys.session, function()
    approval.decide(M.answer('allow-session'))
  end, 'dsh: allow this tool for the session')
  map(M.keys.reject, function()
    vim.ui.input({ prompt = 'Reject. What should the agent do instead? ', default = approval.feedback }, function(text)
      if text == nil then
        return -- cancelled: still asking
      end
      approval.decide(M.answer('reject', text))
    end)
  end, 'dsh: reject, with feedback for the agent')
  map(M.keys.close, function()
    approval.decide(M.answer('reject'))
  end, 'dsh: reject')
  -- Closing the window any other way rejects too (fail-closed).
  vim.api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(approval.win),
    once = true,
    callback = function()
      vim.schedule(function()
        approval.decide(M.answer('reject'))
      end)
    end,
  })
  return approval
end

--- The handler of the server request dsh/permission/ask (in Neovim's coroutine).
function M.ask(params)
  if type(params) ~= 'table' then
    return M.answer('reject')
  end
  return require('dsh.asks').await('the approval', function(done)
    M.open(params, done)
  end) or M.answer('reject')
end

function M.list()
  return vim.tbl_values(open)
end

return M
