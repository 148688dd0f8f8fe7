-- :Dsh and nothing else at startup; the rest loads on first use.
if vim.g.loaded_dsh then
  return
end
vim.g.loaded_dsh = true

if vim.fn.has('nvim-0.10') ~= 1 then
  vim.notify('dsh needs Neovim 0.10 or newer', vim.log.levels.ERROR)
  return
end

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
