-- Centred floating windows for the things that ask a person (plan review, approvals):
-- line numbers, wrapping at word boundaries, and a footer that says when there is
-- more to scroll to.
local M = {}

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

--- Open `buf` in a centred float: `opts.title`, `opts.keys` (the footer's key help),
--- `opts.width` (max), `opts.number` (show line numbers). The float takes the focus.
--- Returns the window. Its footer follows scrolling.
function M.open(buf, opts)
  local max_width = opts.width or 100
  local width = math.min(max_width, math.max(40, vim.o.columns - 8))
  local max_height = math.max(5, vim.o.lines - 8)
  local lines = vim.api.nvim_buf_line_count(buf)
  local height = math.max(1, math.min(lines, max_height))
  local win_opts = {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
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
  -- The float takes the focus; leave insert mode so keys typed next reach it.
  if vim.fn.mode():find('^[iR]') then
    vim.cmd('stopinsert')
  end
  local win = vim.api.nvim_open_win(buf, true, win_opts)
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
        row = math.max(0, math.floor((vim.o.lines - fit) / 2) - 1),
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
    end,
  })
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
