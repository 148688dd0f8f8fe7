-- Floating windows for the things that ask a person (plan review, approvals): line
-- numbers, wrapping at word boundaries, and a footer that says when there is more to
-- scroll to. A question that opens by itself never takes keys meant for something else:
-- while the person is typing it opens beside what they type, without the focus (see
-- M.open_question), and no key answers it before it has been visible for M.guard_ms.
local M = {}

-- A question shown for less than this long takes no answer: keys already in flight
-- when it appeared were meant for something else.
M.guard_ms = 500
-- Keys typed this recently (or any mode but Normal) mean the person is typing.
M.typing_ms = 1000

-- A question that closes by itself (answered in another client, withdrawn) while the
-- person reads it leaves a notice in its place that takes every key for this long: a key
-- meant for the question (`a` to approve) must not start Insert mode in the window below.
M.closed_hold_ms = 1500

-- float window -> the window the person was in before it took the focus.
M.came_from = {}

local keys = require('dsh.keys')
keys.track() -- already tracking since startup (plugin/dsh.lua); here for a bare require

--- Whether the person is typing now: in Insert, Replace, the command line, a terminal,
--- or a key typed within M.typing_ms.
function M.typing()
  local mode = vim.api.nvim_get_mode()
  if mode.mode ~= 'n' or mode.blocking then
    return true -- Insert, the command line, a pending operator, a prompt waiting
  end
  return vim.uv.now() - keys.last_at < M.typing_ms
end

--- ` 1-20 of 45 ↓ ` while lines are out of view, else '' (pure).
---@param first integer first line shown
---@param last integer last line shown
---@param total integer
---@return string
function M.scroll_text(first, last, total)
  if first <= 1 and last >= total then
    return ''
  end
  local arrow = (first > 1 and last < total) and '↕' or (last < total and '↓' or '↑')
  return ('lines %d-%d of %d %s'):format(first, last, total, arrow)
end

local function footer_chunks(keys, scroll)
  local chunks = { { ' ' .. keys .. ' ', 'FloatFooter' } }
  if scroll ~= '' then
    table.insert(chunks, { '│ ' .. scroll .. ' ', 'WarningMsg' })
  end
  return chunks
end

--- Re-render the footer with the current scroll position of `win`.
function M.refresh_footer(win, keys)
  if not vim.api.nvim_win_is_valid(win) then
    return
  end
  local buf = vim.api.nvim_win_get_buf(win)
  local first = vim.fn.line('w0', win)
  local last = vim.fn.line('w$', win)
  local scroll = M.scroll_text(first, last, vim.api.nvim_buf_line_count(buf))
  local cfg = vim.api.nvim_win_get_config(win)
  cfg.footer = footer_chunks(keys, scroll)
  cfg.footer_pos = 'center'
  pcall(vim.api.nvim_win_set_config, win, cfg)
end

--- The rows a float may use (pure): the whole screen (centred) when it takes the focus,
--- else the larger part above or below the cursor's screen row, so what the person
--- types stays in view. Returns top row and the number of rows.
---@param lines integer screen lines (vim.o.lines)
---@param cursor_row integer? 1-based screen row of the cursor; nil: centred
---@return integer top, integer rows
function M.region(lines, cursor_row)
  local usable = lines - 2 -- the statusline and the command line
  if not cursor_row then
    return 0, usable
  end
  local above = cursor_row - 2 -- rows above the cursor's row, less one for the border gap
  local below = usable - cursor_row - 1
  if above >= below then
    return 0, math.max(3, above)
  end
  return cursor_row + 1, math.max(3, below)
end

--- Open `buf` in a float: `opts.title`, `opts.keys` (the footer's key help),
--- `opts.width` (max), `opts.number` (show line numbers), `opts.enter` (take the focus;
--- default true; without it the float keeps clear of the cursor's row).
--- Returns the window. Its footer follows scrolling.
function M.open(buf, opts)
  local enter = opts.enter ~= false
  local top, rows = M.region(vim.o.lines, not enter and vim.fn.screenrow() or nil)
  local max_width = opts.width or 100
  local width = math.min(max_width, math.max(40, vim.o.columns - 8))
  local max_height = math.max(1, enter and math.max(5, vim.o.lines - 8) or rows - 2)
  local lines = vim.api.nvim_buf_line_count(buf)
  local height = math.max(1, math.min(lines, max_height))
  local function row_for(h)
    if enter then
      return math.max(0, math.floor((vim.o.lines - h) / 2) - 1)
    end
    return top + math.max(0, math.floor((rows - h - 2) / 2))
  end
  local win_opts = {
    relative = 'editor',
    row = row_for(height),
    col = math.floor((vim.o.columns - width) / 2),
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. (opts.title or '') .. ' ',
    title_pos = 'center',
    footer = footer_chunks(opts.keys or '', ''),
    footer_pos = 'center',
  }
  local from = vim.api.nvim_get_current_win()
  local win = vim.api.nvim_open_win(buf, enter, win_opts)
  if enter then
    M.came_from[win] = from
  end
  -- `minimal` turns these off; a plan is read by its line numbers and in whole words.
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].breakindent = true
  vim.wo[win].number = opts.number ~= false
  vim.wo[win].cursorline = true
  vim.wo[win].conceallevel = opts.conceal or 0
  vim.wo[win].scrolloff = 0
  -- Wrapped lines take more rows than the buffer has lines: size to what is shown.
  local ok, text = pcall(vim.api.nvim_win_text_height, win, {})
  if ok and text and text.all then
    local fit = math.max(1, math.min(text.all, max_height))
    if fit ~= height then
      vim.api.nvim_win_set_config(win, {
        relative = 'editor',
        row = row_for(fit),
        col = win_opts.col,
        height = fit,
      })
    end
  end
  M.refresh_footer(win, opts.keys or '')
  local group = vim.api.nvim_create_augroup('dsh.float.' .. win, { clear = true })
  vim.api.nvim_create_autocmd({ 'WinScrolled', 'CursorMoved', 'WinResized' }, {
    group = group,
    buffer = buf,
    callback = function()
      M.refresh_footer(win, opts.keys or '')
    end,
  })
  vim.api.nvim_create_autocmd('WinClosed', {
    group = group,
    pattern = tostring(win),
    once = true,
    callback = function()
      pcall(vim.api.nvim_del_augroup_by_id, group)
      -- (after the closing code read it: M.close_by_itself)
      vim.schedule(function()
        M.came_from[win] = nil
      end)
    end,
  })
  return win
end

--- Open a question's float (`opts` as for M.open) the way a question that arrives by
--- itself must: with the focus only when the person is not typing (then they are told
--- where it is), and answerable only once visible for M.guard_ms. Returns the window
--- and `ready()`: whether an answer key may act now (it says "wait" when not).
---@return integer win
---@return fun(): boolean ready
function M.open_question(buf, opts)
  local enter = not M.typing()
  local shown = opts
  if not enter then
    -- Said where it is seen while typing: Insert mode's "-- INSERT --" covers notices.
    shown = vim.tbl_extend('force', opts, { title = (opts.title or '') .. ' · :Dsh answer or ga to answer' })
  end
  local win = M.open(buf, vim.tbl_extend('force', shown, { enter = enter }))
  local shown_at = vim.uv.now()
  local function ready()
    if vim.uv.now() - shown_at >= M.guard_ms then
      return true
    end
    vim.api.nvim_echo({ { 'dsh: just opened; press the key again to answer', 'WarningMsg' } }, false, {})
    return false
  end
  return win, ready, enter
end

--- Give a question's float the focus (:Dsh answer), with its own title again.
function M.focus(win, title)
  M.came_from[win] = M.came_from[win] or vim.api.nvim_get_current_win()
  vim.api.nvim_set_current_win(win)
  pcall(vim.api.nvim_win_set_config, win, { title = ' ' .. (title or '') .. ' ', title_pos = 'center' })
end

--- Close question float `win` that ends without the person's answer (another client
--- answered, dshd withdrew it), saying `text`. When the person was reading it (it had
--- the focus, in Normal mode) its place is taken for M.closed_hold_ms by a notice that
--- swallows every key (q, <Esc> or <CR> close it sooner), then the focus goes back to
--- the window the person was in before the question. Returns the notice's window, if any.
---@param win integer?
---@param text string
---@return integer?
function M.close_by_itself(win, text)
  if not (win and vim.api.nvim_win_is_valid(win)) then
    return nil
  end
  local focused = vim.api.nvim_get_current_win() == win
  local mode = vim.api.nvim_get_mode()
  local back_to = M.came_from[win]
  vim.api.nvim_win_close(win, true)
  if not focused or mode.mode ~= 'n' or mode.blocking then
    return nil -- the keys go where the person types (the command line, a prompt)
  end
  return M.hold(text, back_to)
end

--- The notice of M.close_by_itself: focused, keys swallowed until it closes.
function M.hold(text, back_to)
  local buf = vim.api.nvim_create_buf(false, true)
  local lines = vim.split(text, '\n', { plain = true })
  vim.list_extend(lines, { '', 'The keys you press now do nothing.' })
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  local win = M.open(buf, { title = 'Closed', keys = 'closes by itself · q closes now', number = false, width = 80 })
  vim.wo[win].cursorline = false
  local ns -- this notice's own on_key callback (two notices never drop each other's)
  local done = false
  local function finish()
    if done then
      return
    end
    done = true
    vim.on_key(nil, ns)
    if vim.api.nvim_win_is_valid(win) then
      local here = vim.api.nvim_get_current_win() == win
      vim.api.nvim_win_close(win, true)
      if here and back_to and vim.api.nvim_win_is_valid(back_to) then
        vim.api.nvim_set_current_win(back_to)
      end
    end
  end
  -- Every key is dropped before Neovim reads it (mappings included); one that means
  -- "dismiss" closes the notice sooner. Another window taking the focus ends the hold.
  ns = vim.on_key(function(_, typed)
    if done then
      return
    end
    if typed == 'q' or typed == '\27' or typed == '\r' then
      vim.schedule(finish)
    end
    return ''
  end)
  vim.api.nvim_create_autocmd('WinLeave', {
    buffer = buf,
    once = true,
    callback = function()
      vim.schedule(finish)
    end,
  })
  vim.defer_fn(finish, M.closed_hold_ms)
  return win
end

--- Ask which of `choices` (labels) to take, with vim.ui.select (the person's own picker,
--- or Neovim's numbered list). The first choice is the safe one: cancelling (<Esc>, an
--- empty answer) takes it, never a destructive one. `on_choice(index)` is 1-based.
function M.choose(prompt, choices, on_choice)
  vim.ui.select(choices, { prompt = prompt, kind = 'dsh.confirm' }, function(_, index)
    on_choice(index or 1)
  end)
end

return M
