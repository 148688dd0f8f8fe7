"""A plan review and goals over ACP: the review offers Approve and Keep planning only (one
option per kind, so a client that picks by kind approves and no more). Starting a goal for
the approved plan is the person's ``/goal`` (test_blind_picks.py drives it); the chat names
it after an approval when a goal can start, and never when one stands. An option no longer
offered ("approve-goal", from a client that remembers it) keeps planning and makes no
goal. Both SDK clients."""

from __future__ import annotations

import pytest

from tests.acp_door.support import PLAN, idle, selected, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type

pytestmark = pytest.mark.slow  # each starts `dshd acp` and runs a goal

EXIT_WITH_PLAN = {"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}


def options(asked: dict) -> list[str]:
    return [o["optionId"] for o in asked["options"]]


async def test_the_old_approve_goal_answer_keeps_planning_and_creates_no_goal(clients):
    write_workspace(clients.workspace, [EXIT_WITH_PLAN, {"text": "Noted"}])
    client = await clients.start()
    client.answer_permission = lambda params: selected("approve-goal")
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")

    assert (await client.prompt(sid, "plan the parser tests"))["stopReason"] == "end_turn"
    [asked] = client.permission_requests
    assert options(asked) == ["approve", "keep-planning"]
    events = await wait_log(clients.workspace, sid, idle)
    [result] = of_type(events, "tool/result")
    assert result["data"]["ok"] is False and "unknown choice 'approve-goal'" in result["data"]["content"]
    assert of_type(events, "goal/change") == []
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True]  # still planning
    assert "/goal" not in client.agent_text(sid)


async def test_plain_approve_under_a_standing_goal_creates_no_goal_and_names_no_goal_command(clients):
    # Round 1 of a goal the person set presents a plan: a goal stands, so Approve (the
    # control) exits plan mode, makes no goal, and the chat does not suggest /goal.
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
    assert of_type(events, "tool/result")[0]["data"]["review"]["outcome"] == "approved"
    created = [e["data"]["goal"]["objective"] for e in of_type(events, "goal/change") if e["data"]["op"] == "create"]
    assert created == ["Ship the parser"]
    assert "send /goal" not in client.agent_text(sid)
