-- dshd as an LSP client config, in the shape of nvim-lspconfig's `lsp/<name>.lua`.
-- On Neovim 0.11+ this file is merged into `vim.lsp.config.dsh`, so
-- `vim.lsp.config('dsh', { cmd = {...} })` overrides fields and
-- `vim.lsp.enable('dsh')` would attach it to buffers. The plugin itself starts the
-- client without attaching any buffer (see |dsh-setup|): the daemon serves a
-- workspace, not files.
---@type vim.lsp.Config
return {
  -- The workspace's shared daemon (started when there is none); `dshd serve` for one
  -- of this client's own. The plugin adds `--workspace <root>` (see |dsh-setup|).
  cmd = { 'dshd', 'connect' },
  root_markers = { '.dsh', '.git' },
  capabilities = require('dsh.protocol').client_capabilities,
  handlers = require('dsh.handlers').table(),
  on_init = function(client)
    require('dsh.client').on_init(client)
  end,
  on_error = function(code, err)
    require('dsh.client').on_error(code, err)
  end,
  on_exit = function(code, signal, client_id)
    require('dsh.client').on_exit(code, signal, client_id)
  end,
}
