"""Plan review over the wire (PM-16..PM-20): the daemon asks the editor with
``dsh/questions/ask``; the test plays the editor and the person.

Every test runs the real ``dshd serve`` with the scripted model and reads the outcome
from the results, the notifications and the session log on disk.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import write_workspace
from tests.e2e.support import AbsentPerson, of_type, read_log, wait_idle

PLAN = """# Plan: retries for the HTTP client

1. Add a RetryPolicy to http/client.py.
2. Wrap HttpClient.send in the policy.
3. Retry on every exception.
4. Add tests for the policy.
"""


def exit_plan(plan: str = PLAN) -> dict:
    return {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}


def exit_results(events: list[dict]) -> list[dict]:
    """The tool/result of every exit_plan_mode call, in order."""
    calls = {e["data"]["callId"] for e in of_type(events, "tool/call") if e["data"]["name"] == "exit_plan_mode"}
    return [e for e in of_type(events, "tool/result") if e["data"]["callId"] in calls]


async def plan_session(client) -> tuple[str, str]:
    """A new session with plan mode on (via /plan, while idle: committed at once)."""
    created = await client.request("dsh/session/create", {"title": "review"})
    agent = created["agentId"]
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    assert result["stopReason"] == "command"
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    return created["sessionId"], agent


async def test_approve_exits_plan_mode_at_the_next_step_silently(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(), {"text": "Starting with RetryPolicy."}])
    asked: list[dict] = []

    def approve(params):
        asked.append(params)
        return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}

    client = await daemons.start(answer=approve)
    session_id, agent = await plan_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})
    assert result == {"turn": 1, "stopReason": "end-turn"}

    # The question as the editor saw it (SPEC 6 dsh/questions/ask).
    assert len(asked) == 1
    params = asked[0]
    assert params["agentId"] == agent and params["sessionId"] == session_id
    [question] = params["questions"]
    assert question["kind"] == "plan-review"
    assert question["plan"] == PLAN
    assert question["title"] == "Plan: retries for the HTTP client"
    assert question["choices"] == ["approve", "revise"]

    events = read_log(workspace, session_id)
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is True
    assert json.loads(result_event["data"]["content"]) == {"approved": True}
    assert result_event["data"]["review"] == {"outcome": "approved", "client": "client 1"}  # P-20: the outcome as data

    headers = of_type(events, "request/header")
    assert [h["data"]["planActive"] for h in headers] == [True, False]
    assert "plan:policy" in headers[0]["data"]["sections"]
    assert "plan:policy" not in headers[1]["data"]["sections"]
    # PM-18: the exit is appended at the next accepted step, before its request/header.
    modes = of_type(events, "plan/mode")
    assert [m["data"] for m in modes] == [{"active": True}, {"active": False}]
    exit_mode = modes[-1]
    assert result_event["seq"] < exit_mode["seq"] < headers[1]["seq"]
    assert exit_mode["turn"] == 1
    # ...and silently: no narration for an approval (the tool result told the model).
    assert not [e for e in of_type(events, "user/message") if e["data"]["source"] == "plugin"]
    # PM-21: the plan lives only as the tool-call argument.
    assert not [e for e in of_type(events, "assistant/message") if "RetryPolicy to http" in e["data"]["text"]]
    assert not list((workspace / ".dsh" / "sessions" / session_id).glob("*plan*"))

    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": False}
    plan_notes = [n["params"] for n in client.notifications if n["method"] == "dsh/plan/changed"]
    # on (committed), exit pending (approval), off (appended at the next step)
    assert [(n["active"], n.get("pending")) for n in plan_notes] == [(True, None), (True, False), (False, None)]


async def test_revise_returns_feedback_with_each_commented_line(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(), {"text": "I will revise the plan."}])
    feedback = "Cap the backoff at 30 s."
    comments = [
        {"line": 5, "text": "Only connection errors and 502/503/504."},
        {"line": 3, "text": "Name the attempts and backoff fields."},
    ]

    def revise(params):
        qid = params["questions"][0]["id"]
        return {"answers": [{"id": qid, "choice": "revise", "feedback": feedback, "comments": comments}]}

    client = await daemons.start(answer=revise)
    session_id, agent = await plan_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})
    assert result["stopReason"] == "end-turn"

    events = read_log(workspace, session_id)
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    content = result_event["data"]["content"]
    assert feedback in content
    plan_lines = PLAN.splitlines()
    for comment in comments:
        assert f"Line {comment['line']}: {plan_lines[comment['line'] - 1]}" in content
        assert comment["text"] in content
    assert "keep planning" in content.lower()
    assert result_event["data"]["review"] == {"outcome": "revise", "feedback": feedback, "comments": comments, "client": "client 1"}
    # Plan mode stays on: no plan/mode false, the next request still plans.
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}]
    assert [h["data"]["planActive"] for h in of_type(events, "request/header")] == [True, True]
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}


async def test_no_questions_capability_fails_closed(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(), {"text": "Waiting for a review."}])
    asked: list[dict] = []
    client = await daemons.start(questions=False, answer=lambda p: asked.append(p) or {"answers": []})
    session_id, agent = await plan_session(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})

    assert asked == []  # the daemon never asks an editor that cannot answer
    events = read_log(workspace, session_id)
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    assert "could not be reviewed" in result_event["data"]["content"]
    assert "/plan off" in result_event["data"]["content"]
    assert result_event["data"]["review"] == {"outcome": "failed"}
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}]
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}


async def test_review_timeout_fails_closed_and_a_late_reply_is_harmless(workspace, daemons):
    write_workspace(
        workspace,
        replies=[exit_plan(), {"text": "Still planning."}, {"text": "Second turn answered."}],
    )
    withdrawn = asyncio.Event()
    late_reply_sent = asyncio.Event()

    async def slow_person(params):
        qid = params["questions"][0]["id"]
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            # The daemon withdrew the question ($/cancelRequest). Answer anyway, late,
            # as a person clicking Approve after the timeout would.
            withdrawn.set()
        late_reply_sent.set()
        return {"answers": [{"id": qid, "choice": "approve"}]}

    client = await daemons.start(answer=slow_person, init_options={"questionTimeoutMs": 300})
    session_id, agent = await plan_session(client)
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})
    assert result["stopReason"] == "end-turn"
    assert loop.time() - started < 3  # the timeout, not the person's 5 s
    await asyncio.wait_for(late_reply_sent.wait(), 2)
    assert withdrawn.is_set()

    events = read_log(workspace, session_id)
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    assert "no answer within 0.3 s" in result_event["data"]["content"]
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}]

    # The late approval changed nothing, and the daemon still answers.
    await asyncio.sleep(0.2)
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    again = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Go on."})
    assert again == {"turn": 2, "stopReason": "end-turn"}
    assert of_type(read_log(workspace, session_id), "plan/mode") == of_type(events, "plan/mode")


async def test_malformed_answers_keep_planning_with_corrective_feedback(workspace, daemons):
    # One turn, one exit_plan_mode per step; each review is answered badly in a
    # different way, and the last one cleanly.
    bad_replies = [
        lambda qid: {"answers": ["approve"]},  # an answer that is not an object
        lambda qid: {"answers": {"id": qid, "choice": "approve"}},  # answers not a list
        lambda qid: {"answers": [{"id": qid, "choice": "ship-it"}]},  # unknown choice
        lambda qid: {"answers": [{"id": qid, "choice": "approve"}, {"id": qid, "choice": "approve"}]},
        lambda qid: {"answers": [{"id": "plan-review-someone-else", "choice": "approve"}]},
        lambda qid: {"answers": []},  # no answer
        lambda qid: {"answers": [{"id": qid, "choice": "approve", "feedback": "but rename it"}]},
        lambda qid: "approve",  # not a reply object at all
    ]
    expected = [
        "no single clear answer",
        "malformed reply",
        "unknown choice 'ship-it'",
        "no single clear answer",
        "answers another question",
        "no single clear answer",
        "not a clean approval",
        "malformed reply",
    ]
    replies = [exit_plan() for _ in bad_replies] + [exit_plan(), {"text": "Approved at last."}]
    write_workspace(workspace, replies=replies)
    answers = iter([*bad_replies, lambda qid: {"answers": [{"id": qid, "choice": "approve"}]}])

    def person(params):
        return next(answers)(params["questions"][0]["id"])

    client = await daemons.start(answer=person)
    session_id, agent = await plan_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})
    assert result == {"turn": 1, "stopReason": "end-turn"}

    events = read_log(workspace, session_id)
    results = exit_results(events)
    assert len(results) == len(bad_replies) + 1
    for event, why in zip(results, expected):
        assert event["data"]["ok"] is False, why
        assert why in event["data"]["content"], event["data"]["content"]
        assert "plan mode stays on" in event["data"]["content"].lower()
    assert results[-1]["data"]["ok"] is True
    # Plan mode held through every bad answer: each request until the approval planned.
    headers = of_type(events, "request/header")
    assert [h["data"]["planActive"] for h in headers] == [True] * (len(bad_replies) + 1) + [False]
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}, {"active": False}]


async def test_cancel_during_review_withdraws_the_question(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(), {"text": "never requested"}])
    person = AbsentPerson({"answers": []})
    client = await daemons.start(answer=person)
    session_id, agent = await plan_session(client)
    session_events_before = len(read_log(workspace, session_id))

    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))
    await asyncio.wait_for(person.asked.wait(), 5)
    assert await client.request("dsh/agent/cancel", {"agentId": agent}) is None
    result = await asyncio.wait_for(prompt, 5)
    assert result["stopReason"] == "cancelled"
    await asyncio.wait_for(person.withdrawn.wait(), 2)

    events = read_log(workspace, session_id)[session_events_before:]
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    assert events[-1]["type"] == "turn/close"
    assert events[-1]["data"]["stopReason"] == "cancelled"
    assert result_event["seq"] < events[-1]["seq"]
    assert not of_type(events, "plan/mode")
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    # The daemon still serves this agent.
    assert await client.request("dsh/goal/get", {"agentId": agent}) is None


async def test_exit_plan_mode_while_plan_mode_is_off_fails(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(), {"text": "Carrying on."}])
    asked: list[dict] = []
    client = await daemons.start(answer=lambda p: asked.append(p) or {"answers": []})
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})

    assert asked == []
    events = read_log(workspace, session_id)
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    assert "Plan mode is off" in result_event["data"]["content"]
    # PM-16: the tool is in the catalogue whether plan mode is on or off.
    assert all("exit_plan_mode" in h["data"]["tools"] for h in of_type(events, "request/header"))
    assert not of_type(events, "plan/mode")


async def test_plan_without_heading_fails_with_feedback(workspace, daemons):
    headless = "Plan: retries\n\n# Steps\n1. Add a RetryPolicy.\n"
    write_workspace(workspace, replies=[exit_plan(headless), exit_plan("   \n\n"), {"text": "Will add a heading."}])
    asked: list[dict] = []
    client = await daemons.start(answer=lambda p: asked.append(p) or {"answers": []})
    session_id, agent = await plan_session(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})

    assert asked == []  # nothing to review: the person is not bothered
    events = read_log(workspace, session_id)
    no_heading, blank = exit_results(events)
    assert no_heading["data"]["ok"] is False
    assert "# heading" in no_heading["data"]["content"]
    assert blank["data"]["ok"] is False
    assert "whole plan" in blank["data"]["content"]
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}]
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}


async def test_review_params_errors_do_not_reach_the_person(workspace, daemons):
    """A bad request around a review is invalid-params and writes nothing."""
    client = await daemons.start(answer=lambda p: {"answers": []})
    session_id, agent = await plan_session(client)
    before = read_log(workspace, session_id)
    try:
        await client.request("dsh/plan/set", {"agentId": agent, "active": "false"})
    except JsonRpcException as exc:
        assert exc.data["kind"] == "invalid-params"
        assert exc.data["field"] == "active"
    else:
        raise AssertionError("a string was read as a bool")
    assert read_log(workspace, session_id) == before


async def test_reload_during_review_withdraws_the_question_and_plan_stays_on(workspace, daemons):
    """PM-20: the agent (and its plan plugin) goes away while the person reviews."""
    write_workspace(workspace, replies=[exit_plan(), {"text": "after reload"}])
    person = AbsentPerson({"answers": []})
    client = await daemons.start(answer=person)
    session_id, agent = await plan_session(client)
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))
    await asyncio.wait_for(person.asked.wait(), 5)

    reloaded = await client.request("dsh/session/open", {"sessionId": session_id, "reload": True})
    assert reloaded["plan"] == {"active": True}
    await asyncio.wait_for(person.withdrawn.wait(), 2)
    # The old prompt ends (it does not hang) and the old agent is stale.
    assert (await asyncio.wait_for(prompt, 5))["turn"] == 1
    with pytest.raises(JsonRpcException) as info:
        await client.request("dsh/plan/get", {"agentId": agent})
    assert info.value.data["kind"] == "stale-agent"

    events = read_log(workspace, session_id)
    # The new load closed the open turn; the review left no result but the closing one.
    [result_event] = exit_results(events)
    assert result_event["data"]["ok"] is False
    closes = of_type(events, "turn/close")
    assert [c["data"] for c in closes] == [{"turn": 1, "stopReason": "interrupted"}]
    assert result_event["seq"] < closes[0]["seq"]
    assert [m["data"] for m in of_type(events, "plan/mode")] == [{"active": True}]
    # The new agent works, still planning.
    result = await client.request("dsh/agent/prompt", {"agentId": reloaded["agentId"], "text": "Go on."})
    assert result == {"turn": 2, "stopReason": "end-turn"}
    assert of_type(read_log(workspace, session_id), "request/header")[-1]["data"]["planActive"] is True
