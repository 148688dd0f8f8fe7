-- The dshd wire protocol, version 1: every method name this plugin
-- sends or handles. tests/editors/nvim/test_nvim_protocol.py checks these lists against the
-- protocol's JSON Schema and against the method names used in the plugin's sources.
local M = {}

--- Requests the editor sends to the daemon.
M.requests = {
  session_create = 'dsh/session/create',
  session_list = 'dsh/session/list',
  session_open = 'dsh/session/open',
  session_fork = 'dsh/session/fork',
  session_close = 'dsh/session/close',
  session_events = 'dsh/session/events',
  agent_prompt = 'dsh/agent/prompt',
  agent_steer = 'dsh/agent/steer',
  agent_cancel = 'dsh/agent/cancel',
  plan_set = 'dsh/plan/set',
  plan_get = 'dsh/plan/get',
  plan_history = 'dsh/plan/history',
  goal_get = 'dsh/goal/get',
  goal_create = 'dsh/goal/create',
  goal_edit = 'dsh/goal/edit',
  goal_pause = 'dsh/goal/pause',
  goal_resume = 'dsh/goal/resume',
  goal_complete = 'dsh/goal/complete',
  goal_block = 'dsh/goal/block',
  goal_clear = 'dsh/goal/clear',
  goal_disarm = 'dsh/goal/disarm',
  goal_rounds = 'dsh/goal/rounds',
  permission_get = 'dsh/permission/get',
  permission_set = 'dsh/permission/set',
  chat_get = 'dsh/chat/get',
  config_get = 'dsh/config/get',
  checkpoint_list = 'dsh/checkpoint/list',
  checkpoint_diff = 'dsh/checkpoint/diff',
  checkpoint_restore = 'dsh/checkpoint/restore',
}

--- Notifications the daemon sends to the editor.
M.notifications = {
  goal_changed = 'dsh/goal/changed',
  plan_changed = 'dsh/plan/changed',
  session_event = 'dsh/session/event',
  chat_item = 'dsh/chat/item',
  agent_delta = 'dsh/agent/delta',
  agent_activity = 'dsh/agent/activity',
  session_clients = 'dsh/session/clients',
  question_resolved = 'dsh/question/resolved',
}

--- Requests the daemon sends to the editor (answered by a person).
M.server_requests = {
  questions_ask = 'dsh/questions/ask',
  permission_ask = 'dsh/permission/ask',
}

--- The client capabilities that tell the daemon this editor answers dsh/questions/ask
--- (plan reviews) and dsh/permission/ask (approvals).
M.client_capabilities = { experimental = { dsh = { questions = true, permissions = true } } }

return M
