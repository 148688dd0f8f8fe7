-- The chat items of the sessions this editor follows: dsh/chat/get (a page at a time)
-- fills a store per session, and every dsh/chat/item upsert keeps it current. The items
-- carry their words: nothing here derives text from log events. (The data side only: a
-- conversation buffer renders from these stores.)
local store_mod = require('dsh.chat.store')

local M = {}

-- sessionId -> { agent_id, store, loading, pending }
local followed = {}

M.PAGE = 500

--- Read the agent's items and follow its upserts; `done(store)` once they are all read.
function M.follow(agent_id, session_id, done)
  local client = require('dsh.client')
  local protocol = require('dsh.protocol')
  local entry = { agent_id = agent_id, store = store_mod.new(), loading = true, pending = {} }
  followed[session_id] = entry
  local function page(after_seq)
    local params = { agentId = agent_id, limit = M.PAGE }
    if after_seq then
      params.afterSeq = after_seq
    end
    client.request(protocol.requests.chat_get, params, function(result)
      if followed[session_id] ~= entry then
        return -- followed again meanwhile (another agent)
      end
      local items = result and result.items or {}
      local counted = 0
      for _, item in ipairs(items) do
        entry.store:upsert(item)
        if item.seq ~= nil then
          counted = counted + 1
        end
      end
      if counted >= M.PAGE then
        return page(result.nextSeq)
      end
      for _, item in ipairs(entry.pending) do
        entry.store:upsert(item)
      end
      entry.loading, entry.pending = false, {}
      if done then
        done(entry.store)
      end
    end, 'read the conversation')
  end
  page(nil)
  return entry.store
end

--- dsh/chat/item: an upsert for a followed session's store.
function M.on_item(params)
  if type(params) ~= 'table' or type(params.item) ~= 'table' or type(params.item.id) ~= 'string' then
    return
  end
  local entry = followed[params.sessionId]
  if not entry or entry.agent_id ~= params.agentId then
    return
  end
  if entry.loading then
    table.insert(entry.pending, params.item)
  else
    entry.store:upsert(params.item)
  end
end

--- The items of a followed session, in order (nil if it is not followed).
function M.items(session_id)
  local entry = followed[session_id]
  return entry and entry.store:items() or nil
end

return M
