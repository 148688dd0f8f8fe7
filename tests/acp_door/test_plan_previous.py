"""P-23 on the ACP door: a revised plan's permission request shows what the person asked of
the plan before it (feedback, each comment beside its line), read from the session log.

The first review is sent back through ``dshd serve`` (an editor can give feedback and
comments; an ACP client cannot), the second is asked through ``dshd acp``. Each test runs
with the Python and the TypeScript SDK client."""

from __future__ import annotations

from tests.acp_door.support import selected, tool_call
from tests.e2e.conftest import Daemon, write_workspace

PLAN_1 = "# Plan: retries\n\n1. Retry on every exception.\n2. No backoff.\n"
PLAN_2 = "# Plan: retries, revised\n\n1. Retry on connection errors only.\n2. Backoff capped at 30 s.\n"
FEEDBACK = "Cap the backoff at 30 s."
COMMENT = {"line": 3, "text": "Only connection errors."}


def exit_plan(plan: str) -> dict:
    return {"toolCalls": [tool_call("exit_plan_mode", plan=plan)]}


async def test_the_revised_plans_permission_shows_last_rounds_feedback(clients):
    root = write_workspace(clients.workspace, [exit_plan(PLAN_1), {"text": "I will revise it."}])
    serve = Daemon(root)

    def revise(params):
        [question] = params["questions"]
        assert "previous" not in question  # the first plan has nothing before it
        return {"answers": [{"id": question["id"], "choice": "revise", "feedback": FEEDBACK, "comments": [COMMENT]}]}

    dsh = await serve.start(answer=revise)
    made = await dsh.request("dsh/session/create", {"title": "revised over acp"})
    sid, agent = made["sessionId"], made["agentId"]
    await dsh.request("dsh/plan/set", {"agentId": agent, "active": True})
    assert (await dsh.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))["stopReason"] == "end-turn"
    await serve.stop_all()

    write_workspace(root, [exit_plan(PLAN_2), {"text": "Starting."}])
    client = await clients.start()
    client.answer_permission = lambda params: selected("approve")
    await client.load_session(sid)
    assert (await client.prompt(sid, "Go on with the revised plan."))["stopReason"] == "end_turn"

    [asked] = client.permission_requests
    texts = [block["content"]["text"] for block in asked["toolCall"]["content"]]
    assert texts[0] == PLAN_2
    assert texts[1:] == [
        'Last time, on "Plan: retries", you asked:\n'
        f"Feedback: {FEEDBACK}\n"
        "Line 3: 1. Retry on every exception.\n"
        f"  Comment: {COMMENT['text']}"
    ]


async def test_keep_planning_on_acp_adds_no_previous_block(clients):
    # "Keep planning" carries only dshd's own words: nothing the person asked, so the next
    # review shows the plan alone (the control: the same flow with feedback shows it).
    write_workspace(clients.workspace, [exit_plan(PLAN_1), exit_plan(PLAN_2), {"text": "Starting."}])
    client = await clients.start()
    answers = iter([selected("keep-planning"), selected("approve")])
    client.answer_permission = lambda params: next(answers)
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    assert (await client.prompt(sid, "Add retries."))["stopReason"] == "end_turn"
    first, second = client.permission_requests
    assert [b["content"]["text"] for b in first["toolCall"]["content"]] == [PLAN_1]
    assert [b["content"]["text"] for b in second["toolCall"]["content"]] == [PLAN_2]
