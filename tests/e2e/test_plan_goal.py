"""P-24 on the daemon's side: "Approve and start a goal" is two calls an editor composes,
the review answered "approve", then ``dsh/goal/create`` with an objective naming the plan
and the person's budgets, sent while the plan's turn still runs. The real ``dshd serve``
with the scripted model; the test plays the editor."""

from __future__ import annotations

import asyncio

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, wait_idle

PLAN = "# Plan: retries for the HTTP client\n\n1. Add a RetryPolicy.\n2. Retry on 502/503/504.\n"


async def test_approve_then_create_a_goal_named_after_the_plan(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]},
            {"delayMs": 300, "text": "Starting with RetryPolicy."},  # the plan's turn goes on a while
            {"text": "Round 1: RetryPolicy added."},
            {"text": "Round 2: retries on 502/503/504."},
        ],
    )
    answered = asyncio.Event()

    def approve(params):
        answered.set()
        return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}

    client = await daemons.start(answer=approve)
    created = await client.request("dsh/session/create", {})
    sid, agent = created["sessionId"], created["agentId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"}))["stopReason"] == "command"
    turn = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))
    await asyncio.wait_for(answered.wait(), 10)
    # The editor's second call, as soon as it has answered: the plan's turn is still open.
    history = await client.request("dsh/plan/history", {"agentId": agent})
    title = history["plans"][-1]["title"]
    objective = f'Carry out the approved plan "{title}"'
    goal = await client.request(
        "dsh/goal/create", {"agentId": agent, "objective": objective, "maxRounds": 2, "maxTokens": 50000}
    )
    assert (goal["objective"], goal["maxRounds"], goal["maxTokens"], goal["phase"]) == (objective, 2, 50000, "active")
    assert (await turn)["stopReason"] == "end-turn"

    # The goal runs its rounds after the plan's turn, with plan mode off (the approval).
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", 20)
    note = await blocked
    assert note["params"]["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    events = await wait_idle(client, agent)
    assert events == read_log(workspace, sid)
    [review] = [r for r in of_type(events, "tool/result") if r["data"].get("review")]
    assert review["data"]["review"] == {"outcome": "approved", "client": "client 1"}
    [create] = [g for g in of_type(events, "goal/change") if g["data"]["op"] == "create"]
    assert review["seq"] < create["seq"]
    assert create["data"]["goal"]["objective"] == 'Carry out the approved plan "Plan: retries for the HTTP client"'
    rounds = [m for m in of_type(events, "user/message") if m["data"].get("goalRound")]
    assert [m["data"]["goalRound"]["round"] for m in rounds] == [1, 2]
    assert all(m["seq"] > create["seq"] for m in rounds)
    closes = of_type(events, "turn/close")
    assert closes[0]["seq"] < rounds[0]["seq"]  # round 1 opens after the plan's turn ended
    assert [m["data"]["active"] for m in of_type(events, "plan/mode")] == [True, False]
    round_headers = [h for h in of_type(events, "request/header") if h["seq"] > rounds[0]["seq"]]
    assert round_headers and not any(h["data"]["planActive"] for h in round_headers)
    assert "approved" in [p["outcome"] for p in (await client.request("dsh/plan/history", {"agentId": agent}))["plans"]]
