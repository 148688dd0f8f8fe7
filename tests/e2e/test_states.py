"""States a person sees are true (the real `dshd serve` over stdio).

- Pausing a goal stops its running round: the reply stops streaming, the round's turn
  closes "cancelled", the pause is announced only after that, and no model request starts
  while the goal is paused (a loopback OpenAI-compatible server counts the requests).
- ``dsh/agent/activity`` says "working" only while a turn runs and nothing waits for the
  person, "waiting" (question "plan-review" / "approval") while a question is open, also
  during goal rounds, and "idle" once nothing runs.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from loopback_models import LoopbackModelServer, Reply
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, ref_of, wait_idle
from tests.e2e.test_providers import new_session, start

PLAN = "# Plan: retries\n\n1. Add a policy.\n"


def activity(client, agent: str) -> list[tuple[str, str | None]]:
    return [
        (n["params"]["activity"], n["params"].get("question"))
        for n in client.notifications
        if n["method"] == "dsh/agent/activity" and n["params"]["agentId"] == agent
    ]


def notification_index(client, method: str, predicate=lambda p: True) -> int:
    for index, n in enumerate(client.notifications):
        if n["method"] == method and predicate(n["params"]):
            return index
    raise AssertionError(f"no {method} notification")


def text_deltas(client, agent: str) -> int:
    return sum(1 for n in client.notifications if n["method"] == "dsh/agent/delta" and n["params"]["agentId"] == agent)


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def held_review():
    """(review open, answer now, a person who approves a plan review once told to)."""
    review_open = asyncio.Event()
    answer_now = asyncio.Event()

    async def person(params):
        review_open.set()
        await answer_now.wait()
        return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}

    return review_open, answer_now, person


@pytest.mark.slow
async def test_pausing_a_goal_cancels_its_streaming_round_and_starts_no_request(daemons):
    with LoopbackModelServer("openai") as server:
        # A slow stream: 400 pieces 50 ms apart (20 s) that the pause must cut short.
        server.script(Reply("word " * 400, piece=5, chunk_delay=0.05))
        client = await start(daemons, server)
        agent, sid = await new_session(client)
        goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Tidy the parser"})
        await until(lambda: text_deltas(client, agent) >= 5)
        assert activity(client, agent)[-1] == ("working", None)

        paused = await client.request("dsh/goal/pause", {"agentId": agent, "ref": ref_of(goal)})
        assert paused["phase"] == "paused" and paused["activation"] == "disarmed"

        # By the time the pause is answered the round is over: closed "cancelled", before the pause.
        events = read_log(daemons.root, sid)
        closes = of_type(events, "turn/close")
        assert [c["data"]["stopReason"] for c in closes] == ["cancelled"]
        (pause_event,) = [e for e in of_type(events, "goal/change") if e["data"]["op"] == "pause"]
        assert closes[0]["seq"] < pause_event["seq"]
        # The editors heard it in that order too: idle, then "paused".
        idle_at = max(i for i, n in enumerate(client.notifications)
                      if n["method"] == "dsh/agent/activity" and n["params"]["activity"] == "idle")
        paused_at = notification_index(client, "dsh/goal/changed", lambda p: p["op"] == "pause")
        assert idle_at < paused_at
        assert activity(client, agent)[-1] == ("idle", None)

        # The stream stopped: the daemon dropped the connection and no piece arrives any more.
        server.wait_closed(0)
        seen = text_deltas(client, agent)
        await asyncio.sleep(1.0)
        assert text_deltas(client, agent) == seen
        assert seen < 400 // 2  # far from the whole reply
        # No model request starts while the goal is paused.
        assert len(server.requests) == 1
        assert of_type(read_log(daemons.root, sid), "request/header")[-1]["turn"] == 1
        assert (await client.request("dsh/goal/get", {"agentId": agent}))["phase"] == "paused"

        # Positive control: a resume starts the next round, which does reach the model.
        server.script(Reply("done"))
        await client.request("dsh/goal/resume", {"agentId": agent, "ref": ref_of(paused)})
        await until(lambda: len(server.requests) >= 2)
        await client.request("dsh/goal/pause", {"agentId": agent, "ref": ref_of(await client.request("dsh/goal/get", {"agentId": agent}))})


@pytest.mark.slow
async def test_pause_with_a_stale_ref_cancels_nothing(daemons):
    with LoopbackModelServer("openai") as server:
        server.script(Reply("word " * 100, piece=5, chunk_delay=0.05))
        client = await start(daemons, server)
        agent, sid = await new_session(client)
        goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Tidy the parser"})
        await until(lambda: text_deltas(client, agent) >= 3)
        stale = {"id": goal["id"], "revision": goal["revision"] + 5}
        with pytest.raises(JsonRpcException) as info:
            await client.request("dsh/goal/pause", {"agentId": agent, "ref": stale})
        assert info.value.data["kind"] == "stale-revision"
        assert "look at it again and retry" in info.value.message  # says what to do
        assert of_type(read_log(daemons.root, sid), "turn/close") == []  # the round still runs
        await client.request("dsh/goal/pause", {"agentId": agent, "ref": ref_of(goal)})
        assert [c["data"]["stopReason"] for c in of_type(read_log(daemons.root, sid), "turn/close")] == ["cancelled"]


async def test_activity_is_waiting_while_a_plan_review_is_open_in_a_goal_round(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]},
            {"text": "Working on it."},
            {"text": "Done.", "toolCalls": [{"name": "goal_complete", "arguments": {}}]},
            {"text": "Goal complete."},
        ],
    )
    review_open, answer_now, person = held_review()

    client = await daemons.start(answer=person)
    created = await client.request("dsh/session/create", {})
    agent = created["agentId"]
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "Add retries"})
    await asyncio.wait_for(review_open.wait(), 10)
    await until(lambda: activity(client, agent)[-1] == ("waiting", "plan-review"))
    # A second editor opening the session reads the same state.
    opened = await client.request("dsh/session/open", {"sessionId": created["sessionId"]})
    assert (opened["activity"], opened["question"]) == ("waiting", "plan-review")
    answer_now.set()
    await wait_idle(client, agent)
    await until(lambda: activity(client, agent)[-1] == ("idle", None))
    states = activity(client, agent)
    assert states[:3] == [("working", None), ("waiting", "plan-review"), ("working", None)]
    assert ("waiting", "plan-review") not in states[3:]


async def test_activity_is_waiting_while_an_approval_is_open_in_a_goal_round(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
            {"text": "Wrote it.", "toolCalls": [{"name": "goal_complete", "arguments": {}}]},
            {"text": "Done."},
        ],
        plugins=["plan", "goals", "tools"],
    )
    asked = asyncio.Event()
    answer_now = asyncio.Event()

    async def person(params):
        asked.set()
        await answer_now.wait()
        return {"outcome": "allow-once"}

    client = await daemons.start(approve=person)
    created = await client.request("dsh/session/create", {})
    agent = created["agentId"]
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "Write the notes"})
    await asyncio.wait_for(asked.wait(), 10)
    await until(lambda: activity(client, agent)[-1] == ("waiting", "approval"))
    await asyncio.sleep(0.3)
    assert activity(client, agent)[-1] == ("waiting", "approval")  # it stays so while the person decides
    answer_now.set()
    await until(lambda: (workspace / "notes.txt").exists())
    await until(lambda: activity(client, agent)[-1] == ("idle", None))
    states = activity(client, agent)
    assert states[:3] == [("working", None), ("waiting", "approval"), ("working", None)]


async def test_the_session_list_says_which_loaded_session_waits_for_the_person(workspace, daemons):
    write_workspace(
        workspace,
        replies=[{"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}, {"text": "Planned."}, {"text": "ok"}],
    )
    review_open, answer_now, person = held_review()

    client = await daemons.start(answer=person)
    idle = (await client.request("dsh/session/create", {"title": "Idle"}))["sessionId"]
    closed = await client.request("dsh/session/create", {"title": "Closed"})
    await client.request("dsh/session/close", {"agentId": closed["agentId"]})  # on disk, not loaded
    waits = await client.request("dsh/session/create", {"title": "Waits"})
    agent = waits["agentId"]
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    turn = asyncio.create_task(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Plan retries"}))
    await asyncio.wait_for(review_open.wait(), 10)
    await until(lambda: activity(client, agent)[-1] == ("waiting", "plan-review"))

    async def rows(c) -> dict[str, dict]:
        return {r["sessionId"]: r for r in (await c.request("dsh/session/list", {}))["sessions"]}

    listed = await rows(client)
    assert (listed[waits["sessionId"]]["activity"], listed[waits["sessionId"]]["question"]) == ("waiting", "plan-review")
    assert listed[waits["sessionId"]]["title"] == "Waits"
    for quiet in (idle, closed["sessionId"]):  # loaded and idle; not loaded at all
        assert "activity" not in listed[quiet] and "question" not in listed[quiet]
    # Another client: through `dshd connect` it shares this daemon and sees the question;
    # a `dshd serve` of its own has not loaded the session, so its row says nothing of it.
    other = await rows(await daemons.start())
    shared = os.environ.get("DSHD_E2E_VIA") == "connect"
    assert other[waits["sessionId"]].get("activity") == ("waiting" if shared else None)

    answer_now.set()
    assert (await turn)["stopReason"] == "end-turn"
    await until(lambda: activity(client, agent)[-1] == ("idle", None))
    after = (await rows(client))[waits["sessionId"]]
    assert "activity" not in after and "question" not in after
