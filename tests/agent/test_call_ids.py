"""Tool call ids a model reuses (inside one reply, across replies, across a reload): every
call gets an id of its own in the session, the model is sent its own ids back, and the
log replays strictly. A real Workspace, store and log; the model is a stream of events
with the ids a careless server sends."""

from __future__ import annotations

import json

from agent_support import events_of, make_workspace, replay_strict
from agent.test_agent_loop import add_echo

from dshd.models import Stop, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage
from dshd.models.interface import TextDelta
from dshd.agent.turn_end import TurnEnd


class ReusedIds:
    """Replies in order; each a list of (call id, text) echo calls (empty: a text reply)."""

    def __init__(self, replies: list[list[tuple[str, str]]]) -> None:
        self.replies = list(replies)
        self.requests: list = []

    async def stream(self, request):
        self.requests.append(request)
        calls = self.replies.pop(0) if self.replies else []
        if not calls:
            yield TextDelta("done")
        for index, (call_id, text) in enumerate(calls):
            yield ToolCallStart(index, call_id, "echo")
            yield ToolCallDelta(index, json.dumps({"text": text}))
            yield ToolCallEnd(index)
        yield Stop("tool-calls" if calls else "end-turn", Usage(None, None))


async def test_reused_call_ids_get_ids_of_their_own_and_the_model_its_own_back(tmp_path):
    ws = make_workspace(tmp_path, [], plugins=[])
    agent = ws.create_session("ids")
    add_echo(agent)
    agent.model = ReusedIds([[("call_0", "a"), ("call_0", "b")], [("call_0", "c")], []])
    deltas = []
    agent.add_delta_listener(deltas.append)
    assert await agent.prompt("echo") == TurnEnd(1, "end-turn")

    calls = [e.data for e in events_of(agent, "tool/call")]
    ids = [c.callId for c in calls]
    assert ids[0] == "call_0"  # control: an id new to the session is kept
    assert len(set(ids)) == 3
    assert [c.providerCallId for c in calls] == [None, "call_0", "call_0"]
    results = {e.data.callId: e.data.content for e in events_of(agent, "tool/result")}
    assert [results[i] for i in ids] == ["echo a", "echo b", "echo c"]
    # The live pieces named the ids the log holds.
    assert [d.call_id for d in deltas if d.kind == "tool-arguments"] == ids
    # The model is sent its own ids back, each call with its own result.
    last = agent.model.requests[-1].messages
    assert [c.call_id for m in last for c in m.tool_calls] == ["call_0", "call_0", "call_0"]
    assert [(m.call_id, m.text) for m in last if m.role == "tool"] == [("call_0", "echo a"), ("call_0", "echo b"), ("call_0", "echo c")]

    # After a reload the ids already used are read from the log.
    again = ws.open_session(agent.session_id, reload=True)
    add_echo(again)
    again.model = ReusedIds([[("call_0", "d"), (ids[1], "e")], []])
    assert (await again.prompt("more")).stop_reason == "end-turn"
    later = [e.data.callId for e in events_of(again, "tool/call")][3:]
    assert len(set(ids + later)) == 5
    assert replay_strict(again.store.path).turn.open is False
    await ws.shutdown()
