"""The hub (dshd.api.hub) on a real Workspace and agent: what a door receives, and a chat
subscriber that arrives in the middle of a streamed reply.

The deltas are handed to the agent's real delta seam (``Agent._emit_delta``), as the
model-call path does when a provider streams."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import in_model_call, make_workspace, until

from dshd.agent.deltas import AgentDelta
from dshd.daemon.to_wire import chat_item as to_json
from dshd.api.hub import Hub


class Door:
    def __init__(self) -> None:
        self.got: list[tuple[str, object]] = []

    def agent_event(self, agent, event):
        self.got.append(("event", event["type"]))

    def agent_delta(self, agent, delta):
        self.got.append(("delta", delta.kind))

    def plan_changed(self, agent, view):
        self.got.append(("plan", view.active))

    def goal_changed(self, agent, notice):
        self.got.append(("goal", notice.op))

    def chat_item(self, agent, item):
        self.got.append(("item", to_json(item)))

    def items(self) -> list[dict]:
        return [value for kind, value in self.got if kind == "item"]


async def test_a_late_subscriber_sees_the_text_streamed_so_far(tmp_path):
    workspace = make_workspace(tmp_path, [{"text": "Hello there.", "delayMs": 400}])
    agent = workspace.create_session("hub")
    door = Door()
    hub = Hub(door)
    hub.attach(agent)
    task = asyncio.ensure_future(agent.prompt("hi"))
    await in_model_call(agent)
    agent._emit_delta(AgentDelta(turn=1, step=1, kind="text", text="Hello "))
    assert ("delta", "text") in door.got and not door.items()  # nobody subscribed to the chat yet

    items, _ = hub.chat(agent)
    assert [to_json(i) for i in items][-1] == {
        "kind": "assistant-message", "id": "assistant-1.1", "turn": 1, "step": 1, "text": "Hello ", "partial": True,
    }  # fmt: skip
    agent._emit_delta(AgentDelta(turn=1, step=1, kind="text", text="there."))
    await until(lambda: door.items() and door.items()[-1]["text"] == "Hello there.")  # after the throttle's window
    assert door.items()[-1]["partial"] is True
    await task
    durable = [i for i in door.items() if i["id"] == "assistant-1.1"][-1]
    assert durable["partial"] is False and durable["seq"] and durable["text"] == "Hello there."
    assert door.items()[-1]["kind"] == "turn-end"
    items, _ = hub.chat(agent)  # asking again does not subscribe twice
    assert [to_json(i) for i in items][-2] == durable
    before = len(door.items())
    await agent.prompt("again")  # the script is exhausted: one more reply
    # User message, reply, turn end: each once as it is final (the reply also streamed as
    # partial upserts of the same item before that).
    after = door.items()[before:]
    assert [i["kind"] for i in after if not i.get("partial")] == ["user-message", "assistant-message", "turn-end"]
    assert {i["id"] for i in after if i.get("partial")} <= {i["id"] for i in after if i["kind"] == "assistant-message"}
    await workspace.shutdown()


async def test_deltas_of_a_turn_that_ended_before_anyone_looked_are_dropped(tmp_path):
    workspace = make_workspace(tmp_path, [{"text": "Short.", "delayMs": 200}])
    agent = workspace.create_session()
    hub = Hub(Door())
    hub.attach(agent)
    task = asyncio.ensure_future(agent.prompt("hi"))
    await in_model_call(agent)
    agent._emit_delta(AgentDelta(turn=1, step=1, kind="retry", attempt=2, delay_ms=100))
    await task
    items, _ = hub.chat(agent)
    assert [i.kind for i in items] == ["session", "user-message", "assistant-message", "turn-end"]
    await workspace.shutdown()


async def test_a_door_that_raises_changes_nothing_and_close_detaches(tmp_path):
    workspace = make_workspace(tmp_path, [{"text": "ok"}])
    agent = workspace.create_session()

    class Broken(Door):
        def agent_event(self, agent, event):
            raise RuntimeError("the door is broken")

    door = Broken()
    hub = Hub(door)
    hub.attach(agent)
    hub.chat(agent)
    assert (await agent.prompt("hi")).stop_reason == "end-turn"
    final = [i["kind"] for i in door.items() if not i.get("partial")]  # the reply also streamed (partial)
    assert final == ["user-message", "assistant-message", "turn-end"]
    workspace.close(agent.agent_id)
    assert not hub.attached(agent.agent_id)
    await workspace.shutdown()


async def test_streaming_upserts_are_throttled_and_the_committed_item_wins(tmp_path):
    workspace = make_workspace(tmp_path, [{"text": "x" * 400, "delayMs": 300}])
    agent = workspace.create_session()
    door = Door()
    hub = Hub(door)
    hub.chat(agent)
    task = asyncio.ensure_future(agent.prompt("hi"))
    await in_model_call(agent)
    for _ in range(200):  # 200 pieces at once, as a fast provider sends them
        agent._emit_delta(AgentDelta(turn=1, step=1, kind="text", text="xx"))
    partial = [i for i in door.items() if i["id"] == "assistant-1.1"]
    assert len(partial) == 1 and partial[0]["text"] == "xx"  # the first piece goes at once
    await until(lambda: door.items()[-1]["text"] == "xx" * 200)  # then the newest, once
    assert len([i for i in door.items() if i["id"] == "assistant-1.1"]) == 2
    await task
    sent = [i for i in door.items() if i["id"] == "assistant-1.1"]
    assert sent[-1]["partial"] is False and sent[-1]["text"] == "x" * 400  # the log's text, not the deltas'
    await asyncio.sleep(0.15)
    assert [i for i in door.items() if i["id"] == "assistant-1.1"][-1]["partial"] is False  # nothing stale after it
    await workspace.shutdown()


async def test_a_log_changed_on_disk_is_reported_as_a_replay_would(tmp_path):
    from dshd.folds import ReplayError

    workspace = make_workspace(tmp_path, [{"text": "ok"}])
    agent = workspace.create_session()
    await agent.prompt("hi")
    lines = agent.store.path.read_bytes().splitlines(keepends=True)
    lines[2] = b"x" * (len(lines[2]) - 1) + b"\n"  # same length: the store's offsets still hold
    agent.store.path.write_bytes(b"".join(lines))
    with pytest.raises(ReplayError) as caught:
        Hub(Door()).chat(agent)
    assert caught.value.line == 3 and "malformed JSON" in caught.value.reason
    await workspace.shutdown()
