""""Approve and start a goal" over ACP: a third option on the plan review's permission
request. The door composes the two calls a client would: it answers approve and, once the
approval is in the log, creates a goal whose objective names the plan (with the configured
budgets). Offered only when a goal can be created. Both SDK clients."""

from __future__ import annotations

import pytest

from tests.acp_door.support import PLAN, idle, selected, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

pytestmark = pytest.mark.slow  # each starts `dshd acp` and runs a goal

EXIT_WITH_PLAN = {"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}
OBJECTIVE = 'Carry out the approved plan "Plan: add the parser tests"'


def options(asked: dict) -> list[str]:
    return [o["optionId"] for o in asked["options"]]


def goal_done(events: list[dict]) -> bool:
    return idle(events) and any(e["data"].get("op") == "complete" for e in of_type(events, "goal/change"))


async def test_approve_and_start_a_goal_approves_then_creates_the_goal(clients):
    write_workspace(
        clients.workspace,
        [
            EXIT_WITH_PLAN,
            {"text": "Starting the work"},
            {"toolCalls": [tool_call("goal_complete")]},  # the goal's round 1
            {"text": "goal is done"},
        ],
    )
    client = await clients.start()
    client.answer_permission = lambda params: selected("approve-goal")
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")

    assert (await client.prompt(sid, "plan the parser tests"))["stopReason"] == "end_turn"
    [asked] = client.permission_requests
    assert options(asked) == ["approve", "approve-goal", "keep-planning"]
    assert asked["options"][1]["name"] == "Approve and start a goal"

    events = await wait_log(clients.workspace, sid, goal_done)
    types = [e["type"] for e in events]
    [result] = of_type(events, "tool/result")[:1]
    assert result["data"]["review"] == {"outcome": "approved"}
    [created] = [e for e in of_type(events, "goal/change") if e["data"]["op"] == "create"]
    # The approval first, then the goal: two calls, in that order.
    assert types.index("tool/result") < events.index(created)
    assert created["data"]["goal"]["objective"] == OBJECTIVE
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True, False]
    rounds = [e["data"]["goalRound"]["round"] for e in of_type(events, "user/message") if "goalRound" in e["data"]]
    assert rounds == [1]
    # The client heard the goal from the door, as for a goal it set itself.
    await client.wait_update(lambda u: ((u["update"].get("_meta") or {}).get("goal") or {}).get("phase") == "complete", timeout=10)
    told = [u["_meta"] for u in client.of_kind("session_info_update", sid) if "goalChange" in u.get("_meta", {})]
    assert told[0]["goalChange"]["op"] == "create" and told[0]["goal"]["objective"] == OBJECTIVE


async def test_plain_approve_creates_no_goal_and_a_standing_goal_hides_the_option(clients):
    # Round 1 of a goal the person set presents a plan: a goal stands, so the review offers
    # Approve and Keep planning only. Approve (the control) exits plan mode and makes no goal.
    write_workspace(clients.workspace, [EXIT_WITH_PLAN, {"text": "working on it"}])
    client = await clients.start()
    client.answer_permission = lambda params: selected("approve")
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    await client.goal({"sessionId": sid, "action": "set", "objective": "Ship the parser", "maxRounds": 1})

    events = await wait_log(
        clients.workspace, sid, lambda events: idle(events) and len(of_type(events, "turn/close")) >= 1 and of_type(events, "tool/result")
    )
    [asked] = client.permission_requests
    assert options(asked) == ["approve", "keep-planning"]
    events = await wait_log(clients.workspace, sid, idle)
    assert of_type(events, "tool/result")[0]["data"]["review"] == {"outcome": "approved"}
    created = [e["data"]["goal"]["objective"] for e in of_type(events, "goal/change") if e["data"]["op"] == "create"]
    assert created == ["Ship the parser"]
