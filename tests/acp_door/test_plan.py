"""Plan mode over ACP: modes ``default``/``plan`` and the ``mode`` config option, the
queued rule for a choice made during a turn, and the plan review as a permission request
on the ``exit_plan_mode`` tool call (Approve / Keep planning / cancelled: fail closed).
Each test runs with the Python and the TypeScript SDK client."""

from __future__ import annotations

import asyncio

import pytest

from tests.acp_door.clients import AcpError
from tests.acp_door.support import PLAN, finished, selected, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

EXIT_WITH_PLAN = {"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}


CANCELLED = {"outcome": {"outcome": "cancelled"}}


def modes_told(client, sid: str) -> list[str]:
    return [u["currentModeId"] for u in client.of_kind("current_mode_update", sid)]


async def test_set_mode_while_idle_commits_and_says_so(client, workspace):
    sid = (await client.new_session())["sessionId"]
    answer = await client.set_mode(sid, "plan")
    assert answer["_meta"]["dsh"] == {"outcome": "committed", "active": True}
    assert modes_told(client, sid) == ["plan"]
    [config] = client.of_kind("config_option_update", sid)
    assert config["configOptions"][0]["currentValue"] == "plan"
    assert [e["data"] for e in of_type(read_log(workspace, sid), "plan/mode")] == [{"active": True}]

    # The config option is the same switch, kept in step.
    answer = await client.set_config_option(sid, "mode", "default")
    assert answer["configOptions"][0]["currentValue"] == "default"
    assert answer["_meta"]["dsh"]["outcome"] == "committed"
    assert modes_told(client, sid) == ["plan", "default"]
    # Choosing the state it is in changes nothing and tells nothing.
    assert (await client.set_mode(sid, "default"))["_meta"]["dsh"]["outcome"] == "noop"
    assert modes_told(client, sid) == ["plan", "default"]

    for call, field in (
        (client.set_mode(sid, "yolo"), "modeId"),
        (client.set_config_option(sid, "model", "plan"), "configId"),
        (client.set_config_option(sid, "mode", "fast"), "value"),
    ):
        with pytest.raises(AcpError) as err:
            await call
        assert err.value.code == -32602 and err.value.data["field"] == field


async def test_set_mode_during_a_turn_is_told_when_the_next_step_commits_it(clients):
    # Step 1 is slow and calls a tool (which fails: plan mode is off), so the turn takes a
    # step 2; the choice made during step 1 is appended at step 2's pre-step.
    write_workspace(
        clients.workspace,
        [{"delayMs": 1500, "toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}, {"text": "planned"}],
    )
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    prompt = asyncio.ensure_future(client.prompt(sid, "start"))
    await wait_log(clients.workspace, sid, lambda events: of_type(events, "request/header"))

    answer = await client.set_mode(sid, "plan")
    assert answer["_meta"]["dsh"] == {"outcome": "queued", "active": False, "pending": True}
    told_at_answer = len(client.updates)

    assert (await prompt)["stopReason"] == "end_turn"
    assert "current_mode_update" not in client.kinds()[:told_at_answer]
    assert modes_told(client, sid) == ["plan"]
    kinds = client.kinds(sid)
    updates = [u["update"] for u in client.updates if u["sessionId"] == sid]
    reply_at = next(i for i, u in enumerate(updates) if u["sessionUpdate"] == "agent_message_chunk" and not u.get("_meta"))
    # Told after step 1's tool result, before step 2's reply.
    assert kinds.index("tool_call_update") < kinds.index("current_mode_update") < reply_at
    events = read_log(clients.workspace, sid)
    types = [e["type"] for e in events]
    mode_at = types.index("plan/mode")
    headers = [i for i, t in enumerate(types) if t == "request/header"]
    assert headers[0] < types.index("tool/result") < mode_at < headers[1]
    assert events[headers[1]]["data"]["planActive"] is True


async def test_plan_review_approved_leaves_plan_mode(clients):
    write_workspace(clients.workspace, [EXIT_WITH_PLAN, {"text": "Starting the work"}])
    client = await clients.start()
    client.answer_permission = lambda params: selected("approve")
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")

    assert (await client.prompt(sid, "plan the parser tests"))["stopReason"] == "end_turn"

    [asked] = client.permission_requests
    [call] = client.tool_calls(sid)
    assert asked["sessionId"] == sid
    tool = asked["toolCall"]
    assert tool["toolCallId"] == call["toolCallId"]
    assert tool["kind"] == call["kind"] == "switch_mode"
    assert tool["title"] == "Plan: add the parser tests"
    assert tool["content"] == [{"type": "content", "content": {"type": "text", "text": PLAN}}]
    assert [(o["optionId"], o["name"], o["kind"]) for o in asked["options"]] == [
        ("approve", "Approve", "allow_once"),  # one option per kind: a blind pick approves, no more
        ("keep-planning", "Keep planning", "reject_once"),
    ]
    [result] = finished(client, sid)
    assert result["status"] == "completed"
    assert modes_told(client, sid) == ["plan", "default"]
    # Goals are on and none stands: the chat says how to start one (the review offers none).
    hint = "\n\nNote: the plan is approved. To have dshd carry it out as a goal (rounds until it is done, within the configured budgets), send /goal.\n"
    assert hint in client.agent_text(sid) and client.agent_text(sid).replace(hint, "") == "Starting the work"
    events = read_log(clients.workspace, sid)
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True, False]


@pytest.mark.parametrize(
    "answer, says",
    [
        (selected("keep-planning"), "Keep planning"),
        (CANCELLED, "could not be reviewed (the plan review was cancelled)"),
        (selected("ship-it"), "unknown choice 'ship-it'"),
    ],
    ids=["keep-planning", "cancelled", "unknown-option"],
)
async def test_plan_review_not_approved_keeps_plan_mode(clients, answer, says):
    write_workspace(clients.workspace, [EXIT_WITH_PLAN, {"text": "Back to planning"}])
    client = await clients.start()
    client.answer_permission = lambda params: answer
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")

    assert (await client.prompt(sid, "plan it"))["stopReason"] == "end_turn"

    assert len(client.permission_requests) == 1
    [result] = finished(client, sid)
    assert result["status"] == "failed"
    feedback = result["content"][0]["content"]["text"]
    assert says in feedback and "plan mode stays on" in feedback.lower()
    assert modes_told(client, sid) == ["plan"]
    events = read_log(clients.workspace, sid)
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True]
    [failed] = of_type(events, "tool/result")
    assert failed["data"]["ok"] is False and says in failed["data"]["content"]


async def test_session_cancel_during_a_review_fails_closed(clients):
    write_workspace(clients.workspace, [EXIT_WITH_PLAN, {"text": "never said"}])
    client = await clients.start()
    review_open = asyncio.get_running_loop().create_future()
    answer = asyncio.get_running_loop().create_future()

    def answer_permission(params):
        review_open.set_result(params)
        return answer

    client.answer_permission = answer_permission
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    prompt = asyncio.ensure_future(client.prompt(sid, "plan it"))
    await asyncio.wait_for(review_open, 20)
    await client.cancel(sid)
    answer.set_result(CANCELLED)  # what a client does with open permission requests on cancel

    assert (await asyncio.wait_for(prompt, 20))["stopReason"] == "cancelled"
    events = read_log(clients.workspace, sid)
    [failed] = of_type(events, "tool/result")
    assert failed["data"]["ok"] is False
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True]
    assert of_type(events, "turn/close")[-1]["data"]["stopReason"] == "cancelled"
