-- dsh: Neovim client of the dshd editor daemon. See :help dsh.
local M = {}

--- Configure the plugin (optional; :Dsh works with the defaults). See :help dsh-setup.
function M.setup(opts)
  require('dsh.config').set(opts)
  if require('dsh.config').options.autostart then
    local function autostart()
      local cfg = require('dsh.config')
      local root = cfg.find_root(cfg.start_path())
      if root and vim.uv.fs_stat(root .. '/.dsh') and M.start() then
        -- Take up the workspace's last session, if it has one.
        require('dsh.client').with_client(function()
          if not require('dsh.state').agent_id then
            require('dsh.commands').reopen_last(nil, 'if-any')
          end
        end)
      end
    end
    if vim.v.vim_did_enter == 1 then
      autostart()
    else
      vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = autostart })
    end
  end
end

--- Start the daemon for the current workspace (no-op when it runs).
---@return integer? client_id
function M.start()
  local id, err = require('dsh.client').start()
  if not id then
    require('dsh.errors').notify(err)
  end
  return id
end

--- The goal budget and phase of the current session, e.g. `◎ 37/256 active`.
--- Empty before a session is open. Cheap: returns text built when the daemon last
--- sent dsh/goal/changed. Usable as a lualine component.
function M.statusline()
  return require('dsh.state').statusline()
end

--- The highlight group for the statusline text: `DiagnosticWarn` while the goal is
--- blocked, `DiagnosticHint` while an active goal is disarmed, else nil.
function M.statusline_highlight()
  return require('dsh.statusline').highlight(require('dsh.state').goal())
end

--- The goal phase of the current session (nil without a goal), for statusline colours.
function M.goal_phase()
  local view = require('dsh.state').goal()
  return view and view.phase or nil
end

--- Whether plan mode is on for the current session, as last announced.
function M.plan_active()
  local plan = require('dsh.state').plan()
  return plan ~= nil and plan.active == true
end

--- The current agent and session ids (nil, nil when none is open).
function M.current()
  local state = require('dsh.state')
  return state.agent_id, state.session_id
end

--- Run a :Dsh subcommand from Lua: require('dsh').command('goal pause').
function M.command(args, bang)
  return require('dsh.commands').run({ args = args, bang = bang })
end

return M
