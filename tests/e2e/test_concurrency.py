"""Concurrency over the wire: a slow model call never blocks the daemon's other
requests; ``dsh/agent/cancel`` ends the turn and disarms the goal (SPEC 6); two
agents' turns run at the same time.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

SLOW_MS = 1500
# Answers while the model call runs must not wait for it; 200 ms is far above a
# pygls round trip (~0.4 ms idle) and far below the model's 1.5 s.
QUICK_S = 0.2


def at(event: dict) -> datetime:
    return datetime.fromisoformat(event["at"].replace("Z", "+00:00"))


def header_of(agent: str):
    return lambda n: (
        n["method"] == "dsh/session/event"
        and n["params"]["agentId"] == agent
        and n["params"]["event"]["type"] == "request/header"
    )


async def timed(client, method: str, params: dict) -> tuple[object, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await client.request(method, params)
    return result, loop.time() - started


async def test_requests_answer_during_a_slow_model_call_and_cancel_disarms(workspace, daemons):
    write_workspace(workspace, replies=[{"text": "too late", "delayMs": SLOW_MS}])
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]

    in_flight = client.wait_for(header_of(agent), timeout=5)
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))
    await in_flight
    loop = asyncio.get_running_loop()
    call_started = loop.time()

    # A goal created while the turn runs is armed; its first round waits for the turn.
    goal, create_s = await timed(client, "dsh/goal/create", {"agentId": agent, "objective": "Ship", "maxRounds": 5})
    assert goal["activation"] == "armed" and goal["roundsStarted"] == 0
    latencies = {"dsh/goal/create": create_s}
    for method, params in [
        ("dsh/plan/get", {"agentId": agent}),
        ("dsh/goal/get", {"agentId": agent}),
        ("dsh/session/events", {"agentId": agent}),
        ("dsh/session/create", {"title": "another"}),
        ("dsh/plan/set", {"agentId": agent, "active": True}),
        ("dsh/agent/steer", {"agentId": agent, "text": "also add tests"}),
    ]:
        result, elapsed = await timed(client, method, params)
        latencies[method] = elapsed
        if method == "dsh/session/events":
            # The model call is running: a header, no reply yet, the turn open.
            kinds = [e["type"] for e in result["events"]]
            assert "request/header" in kinds and "assistant/message" not in kinds and "turn/close" not in kinds
        if method == "dsh/plan/set":
            assert result["outcome"] == "queued"
        if method == "dsh/agent/steer":
            assert result == {"queued": True}
    # A second prompt on the same agent is refused at once: steer is the way in.
    with pytest.raises(JsonRpcException) as info:
        await client.request("dsh/agent/prompt", {"agentId": agent, "text": "again"})
    assert info.value.data["kind"] == "turn-open"
    slow = {m: round(s, 3) for m, s in latencies.items() if s > QUICK_S}
    assert not slow, f"requests waited for the model call: {slow}"
    assert not prompt.done()
    assert loop.time() - call_started < SLOW_MS / 1000

    disarmed = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"]["agentId"] == agent and n["params"]["op"] == "disarm",
        timeout=5,
    )
    cancel_started = loop.time()
    assert await client.request("dsh/agent/cancel", {"agentId": agent}) is None
    assert await asyncio.wait_for(prompt, 2) == {"turn": 1, "stopReason": "cancelled"}
    cancel_s = loop.time() - cancel_started
    assert cancel_s < SLOW_MS / 1000
    note = (await disarmed)["params"]
    assert note["revision"] == goal["revision"]  # no durable change
    assert note["goal"]["activation"] == "disarmed" and note["goal"]["phase"] == "active"

    events = read_log(workspace, session_id)
    assert events[-1]["type"] == "turn/close"
    assert events[-1]["data"] == {"turn": 1, "stopReason": "cancelled", "client": "client 1"}
    assert not of_type(events, "assistant/message")  # the reply never came
    assert len(of_type(events, "goal/change")) == 1  # the create only: a disarm writes nothing
    # Disarmed: no continuation round starts after the cancelled turn.
    await asyncio.sleep(0.3)
    assert read_log(workspace, session_id) == events
    view = await client.request("dsh/goal/get", {"agentId": agent})
    assert view["activation"] == "disarmed" and view["roundsStarted"] == 0
    # The plan choice made during the cancelled turn is still waiting (PM-11).
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": False, "pending": True}
    print(f"latencies during the model call (s): {latencies}; cancel -> result {cancel_s:.3f}s")


async def test_two_agents_turns_run_at_once(workspace, daemons):
    delay = 1000
    write_workspace(workspace, replies=[{"text": "A done", "delayMs": delay}, {"text": "B done", "delayMs": delay}])
    client = await daemons.start()
    a = await client.request("dsh/session/create", {"title": "A"})
    b = await client.request("dsh/session/create", {"title": "B"})

    loop = asyncio.get_running_loop()
    started = loop.time()
    results = await asyncio.gather(
        client.request("dsh/agent/prompt", {"agentId": a["agentId"], "text": "work A"}),
        client.request("dsh/agent/prompt", {"agentId": b["agentId"], "text": "work B"}),
    )
    elapsed = loop.time() - started
    assert results == [{"turn": 1, "stopReason": "end-turn"}] * 2
    assert elapsed < 2 * delay / 1000 * 0.85, f"the turns ran one after the other ({elapsed:.2f}s)"

    log_a = read_log(workspace, a["sessionId"])
    log_b = read_log(workspace, b["sessionId"])
    header_a, header_b = of_type(log_a, "request/header")[0], of_type(log_b, "request/header")[0]
    [reply_a], [reply_b] = of_type(log_a, "assistant/message"), of_type(log_b, "assistant/message")
    # Each model call started before the other one answered: they overlapped.
    assert at(header_a) < at(reply_b) and at(header_b) < at(reply_a)
    # Each session got its own reply; the script is shared, so which got which may vary.
    assert {reply_a["data"]["text"], reply_b["data"]["text"]} == {"A done", "B done"}


async def test_cancel_during_a_continuation_round_stops_the_rounds_until_resume(workspace, daemons):
    write_workspace(
        workspace,
        replies=[{"text": "round 1", "delayMs": SLOW_MS}, {"toolCalls": [{"name": "goal_complete", "arguments": {}}]}],
    )
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]

    in_flight = client.wait_for(header_of(agent), timeout=5)
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Ship", "maxRounds": 5})
    await in_flight
    assert await client.request("dsh/agent/cancel", {"agentId": agent}) is None
    events = read_log(workspace, session_id)
    assert events[-1]["data"] == {"turn": 1, "stopReason": "cancelled", "client": "client 1"}
    [turn_open] = of_type(events, "turn/open")
    assert turn_open["data"]["cause"] == "continuation"
    ops = [n["params"]["op"] for n in client.notifications if n["method"] == "dsh/goal/changed"]
    assert ops == ["create", "round", "disarm"]

    await asyncio.sleep(0.3)
    assert read_log(workspace, session_id) == events  # no round 2 by itself
    view = await client.request("dsh/goal/get", {"agentId": agent})
    assert view["activation"] == "disarmed" and view["roundsStarted"] == 1 and view["revision"] == goal["revision"]

    completed = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "complete", timeout=5
    )
    resumed = await client.request("dsh/goal/resume", {"agentId": agent, "ref": {"id": goal["id"], "revision": 1}})
    assert resumed["activation"] == "armed"
    await completed
    rounds = [
        e["data"]["goalRound"]["round"] for e in of_type(read_log(workspace, session_id), "user/message")
        if "goalRound" in e["data"]
    ]
    assert rounds == [1, 2]
