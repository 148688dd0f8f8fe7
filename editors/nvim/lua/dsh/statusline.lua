-- Goal status in a person's words: the daemon's. Every GoalView it sends carries `status`
-- ({text, short, tone, usage, detail}) and `actions` ([{id, label}]); this module shows
-- them as they are and works out no word, tone or allowed action of its own.
local M = {}

M.icon = '◎'
M.busy_mark = '⟳'

-- With no goal the daemon has nothing to describe: the only words of our own.
local NO_GOAL = { text = 'no goal', short = 'no goal', tone = 'none', usage = 'no goal', detail = { 'No goal in this session.' } }

local function present(view)
  return type(view) == 'table'
end

--- The daemon's words for a GoalView (or the no-goal words for nil) (pure).
---@param view table? GoalView
---@return {text: string, short: string, tone: 'none'|'hint'|'warning', usage: string, detail: string[]}
function M.status(view)
  if present(view) and type(view.status) == 'table' then
    return view.status
  end
  return NO_GOAL
end

--- The goal operations the daemon accepts now, as it sent them (ids, in its order);
--- with no goal, only `create` (pure).
---@param view table? GoalView
---@return string[]
function M.actions(view)
  if not present(view) then
    return { 'create' }
  end
  local ids = {}
  for _, action in ipairs(type(view.actions) == 'table' and view.actions or {}) do
    if type(action) == 'table' and type(action.id) == 'string' then
      table.insert(ids, action.id)
    end
  end
  return ids
end

--- The goal's status text (the daemon's words, no icon).
function M.goal_text(view)
  return M.status(view).text
end

M.activity_words = { working = 'working…', waiting = 'waiting for you', paused = 'paused' }

--- Who else is attached to the session, in a few words (pure): '' alone,
--- `with VS Code`, `with VS Code and Neovim`, `with VS Code and 2 others`.
---@param others string[]? the other clients' names
---@return string
function M.others_text(others)
  others = others or {}
  if #others == 0 then
    return ''
  elseif #others == 1 then
    return 'with ' .. others[1]
  elseif #others == 2 then
    return ('with %s and %s'):format(others[1], others[2])
  end
  return ('with %s and %d others'):format(others[1], #others - 1)
end

--- The statusline text: `◎ 3/40 · active`, with `plan` while plan mode is on, a busy
--- mark while a model request or a tool runs, `waiting for you` while a question
--- (an approval, a plan review) is open, and who else is attached to the session:
--- `◎ ⟳ plan · 3/40 · 12.4k tok · active`, `◎ waiting for you · plan · no goal`,
--- `◎ 3/40 · active · with VS Code`. `%` is escaped for 'statusline'.
---@param view table? GoalView
---@param opts table? {plan: boolean, activity: 'working'|'waiting'|'paused'|nil, busy: boolean, others: string[]?}
---@return string
function M.format(view, opts)
  opts = opts or {}
  local activity = opts.activity or (opts.busy and 'working' or nil)
  local head = M.icon
  if activity == 'working' then
    head = head .. ' ' .. M.busy_mark
  elseif activity == 'waiting' and M.status(view).short ~= M.activity_words.waiting then
    -- (A goal that waits says so itself, at the end: `◎ 3/40 · waiting for you`.)
    head = head .. ' ' .. M.activity_words.waiting .. ' ·'
  end
  local text = head .. ' ' .. (opts.plan and 'plan · ' or '') .. M.goal_text(view)
  local others = M.others_text(opts.others)
  if others ~= '' then
    text = text .. ' · ' .. others
  end
  return (text:gsub('%%', '%%%%'))
end

--- "3 of 40 rounds used", with the tokens once counted, for notices: the daemon's
--- usage words (pure).
function M.usage(view)
  return M.status(view).usage
end

--- The goal in a sentence, for notices: "3 of 40 rounds used · active" (pure).
function M.describe(view)
  if not present(view) then
    return 'no goal'
  end
  return M.usage(view) .. ' · ' .. M.status(view).short
end

local SEVERITY_HL = { hint = 'DiagnosticHint', warning = 'DiagnosticWarn' }

--- The highlight group of the daemon's tone: a warning (blocked), a hint (the goal
--- waits for the person), nil otherwise.
---@param view table?
---@return string?
function M.highlight(view)
  return SEVERITY_HL[M.status(view).tone]
end

return M
