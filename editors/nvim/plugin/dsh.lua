-- :Dsh (and a key-time tracker) at startup; the rest loads on first use.
if vim.g.loaded_dsh then
  return
end
vim.g.loaded_dsh = true

if vim.fn.has('nvim-0.10') ~= 1 then
  vim.notify('dsh needs Neovim 0.10 or newer', vim.log.levels.ERROR)
  return
end

-- :help dsh works without a step of its own: the help tags are made next to the help
-- file the first time (and again after the help changed). doc/tags is ignored by git,
-- so a checkout stays clean; a read-only install is left alone.
do
  local doc = vim.fs.joinpath(vim.fs.dirname(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2))), 'doc')
  local help, tags = vim.uv.fs_stat(doc .. '/dsh.txt'), vim.uv.fs_stat(doc .. '/tags')
  if help and (not tags or tags.mtime.sec < help.mtime.sec) then
    pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
  end
end

-- When the person last typed: a question that arrives while they type must not take
-- their keys (see dsh.float), even the first one.
require('dsh.keys').track()

vim.api.nvim_create_user_command('Dsh', function(opts)
  require('dsh.commands').run(opts)
end, {
  nargs = '*',
  bang = true,
  desc = 'dshd agent sessions, plan mode and goals (:help dsh-commands)',
  complete = function(arglead, cmdline, cursorpos)
    return require('dsh.commands').complete(arglead, cmdline, cursorpos)
  end,
})
