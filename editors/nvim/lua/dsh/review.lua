-- Plan review: answers dsh/questions/ask (kind "plan-review") in a floating window.
--
-- The daemon's request is handled inside the coroutine Neovim 0.10+ runs server
-- requests in: the handler opens the float and yields; the key the person presses
-- resumes it with the answer. Nothing polls and the editor stays usable meanwhile.
local M = {}

M.keys = { approve = 'a', revise = 'r', comment = 'c', close = 'q' }

-- Open reviews by buffer: { win, buf, finish = fn(answer|nil) }.
local open_reviews = {}

--- The answer for one question (pure). `comments` maps line -> text.
---@param question_id string
---@param choice 'approve'|'revise'
---@param feedback string?
---@param comments table<integer, string>?
---@return table
function M.build_answer(question_id, choice, feedback, comments)
  local answer = { id = question_id, choice = choice }
  if choice == 'revise' then
    if feedback and feedback ~= '' then
      answer.feedback = feedback
    end
    local lines = vim.tbl_keys(comments or {})
    table.sort(lines)
    if #lines > 0 then
      answer.comments = {}
      for _, line in ipairs(lines) do
        table.insert(answer.comments, { line = line, text = comments[line] })
      end
    end
  end
  return answer
end

local ns = vim.api.nvim_create_namespace('dsh.review')

local function show_comment(buf, line, text)
  vim.api.nvim_buf_clear_namespace(buf, ns, line - 1, line)
  if text then
    vim.api.nvim_buf_set_extmark(buf, ns, line - 1, 0, {
      virt_text = { { '  « ' .. text, 'DiagnosticVirtualTextInfo' } },
      virt_text_pos = 'eol',
    })
  end
end

local function split_lines(text)
  local lines = vim.split((text or ''):gsub('\r\n', '\n'), '\n', { plain = true })
  -- The newline that ends the last line does not start another one.
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- Open the float for `question`; `finish(answer)` is called exactly once, with nil
--- when the person closes it without deciding (fail-closed: plan mode stays on).
---@return integer buf
function M.open(question, meta, finish)
  local lines = split_lines(question.plan)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = 'markdown'
  pcall(vim.api.nvim_buf_set_name, buf, 'dsh://plan-review/' .. tostring(question.id))

  local width = math.min(100, math.max(40, vim.o.columns - 8))
  local height = math.min(#lines, math.max(5, vim.o.lines - 8))
  local win_opts = {
    relative = 'editor',
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. (question.title or 'Plan review') .. ' ',
    title_pos = 'center',
    footer = (' %s approve · %s keep planning · %s comment on line · %s close '):format(
      M.keys.approve,
      M.keys.revise,
      M.keys.comment,
      M.keys.close
    ),
    footer_pos = 'center',
  }
  -- The review takes the focus; leave insert mode so keys typed next reach the float.
  if vim.fn.mode():find('^[iR]') then
    vim.cmd('stopinsert')
  end
  local win = vim.api.nvim_open_win(buf, true, win_opts)
  vim.wo[win].wrap = true
  vim.wo[win].cursorline = true
  vim.wo[win].conceallevel = 2

  local comments = {} ---@type table<integer, string>
  local done = false
  local review = { win = win, buf = buf, question = question, meta = meta, comments = comments }

  local function decide(answer)
    if done then
      return
    end
    done = true
    open_reviews[buf] = nil
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
    finish(answer)
  end
  review.finish = decide
  open_reviews[buf] = review

  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map(M.keys.approve, function()
    decide(M.build_answer(question.id, 'approve'))
  end, 'dsh: approve the plan')
  map(M.keys.revise, function()
    vim.ui.input({ prompt = 'Keep planning. Feedback for the agent: ' }, function(feedback)
      if feedback == nil then
        return -- cancelled: the review stays open
      end
      decide(M.build_answer(question.id, 'revise', feedback, comments))
    end)
  end, 'dsh: keep planning, with feedback')
  map(M.keys.comment, function()
    local line = vim.api.nvim_win_get_cursor(0)[1]
    vim.ui.input({ prompt = ('Comment on line %d: '):format(line), default = comments[line] }, function(text)
      if text == nil or not vim.api.nvim_buf_is_valid(buf) then
        return
      end
      comments[line] = text ~= '' and text or nil
      show_comment(buf, line, comments[line])
    end)
  end, 'dsh: comment on the line under the cursor')
  map(M.keys.close, function()
    decide(nil)
  end, 'dsh: close without approving')

  -- Closing the window any other way (:q, <C-w>c) is the same as q: not approved.
  vim.api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(win),
    once = true,
    callback = function()
      vim.schedule(function()
        decide(nil)
      end)
    end,
  })
  return buf
end

--- The handler of the server request dsh/questions/ask. Runs in the coroutine
--- Neovim gives server requests; returns the result table when the person is done.
function M.ask(params)
  local co, is_main = coroutine.running()
  local answers = {}
  local questions = type(params) == 'table' and params.questions or {}
  if not co or is_main then
    -- No coroutine to wait in (should not happen on 0.10+): fail closed, loudly.
    require('dsh.errors').notify('cannot show the plan review here (no coroutine); plan mode stays on.')
    return { answers = answers }
  end
  for _, question in ipairs(questions) do
    if question.kind == 'plan-review' then
      M.open(question, { agentId = params.agentId, sessionId = params.sessionId }, function(answer)
        vim.schedule(function()
          local ok, err = coroutine.resume(co, answer)
          if not ok then
            require('dsh.errors').notify('plan review failed: ' .. tostring(err))
          end
        end)
      end)
      local answer = coroutine.yield()
      if answer then
        table.insert(answers, answer)
      end
    else
      require('dsh.errors').notify(
        ('the daemon asked a %q question this plugin does not know; it was not answered.'):format(
          tostring(question.kind)
        ),
        vim.log.levels.WARN
      )
    end
  end
  return { answers = answers }
end

--- The open reviews (for tests and :Dsh status).
function M.list()
  return vim.tbl_values(open_reviews)
end

--- Close every open review without approving (the daemon exited or withdrew it).
function M.close_all(reason, agent_id)
  for _, review in pairs(open_reviews) do
    if agent_id == nil or review.meta.agentId == agent_id then
      review.finish(nil)
      if reason then
        require('dsh.errors').notify('plan review closed: ' .. reason .. '.', vim.log.levels.WARN)
      end
    end
  end
end

--- A committed session event: a turn that closed while its review was open has
--- withdrawn the question (cancel, timeout), so the float goes too.
function M.on_event(params)
  local event = params and params.event
  if type(event) == 'table' and event.type == 'turn/close' then
    M.close_all('the turn ended before an answer', params.agentId)
  end
end

return M
