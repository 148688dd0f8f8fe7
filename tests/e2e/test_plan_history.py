"""Plans of record over the wire (P-21, P-23): ``dsh/plan/history`` and the ``previous``
field of a plan review, against the real ``dshd serve`` with the scripted model.

The test plays the editor and the person (answering ``dsh/questions/ask``) and checks each
answer against the session log on disk.
"""

from __future__ import annotations

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

PLAN_1 = """# Plan: retries for the HTTP client

1. Add a RetryPolicy to http/client.py.
2. Retry on every exception.
"""

PLAN_2 = """# Plan: retries, revised

1. Add a RetryPolicy (attempts, backoff) to http/client.py.
2. Retry only on connection errors and 502/503/504.
"""

NO_HEADING = "Just retry everything, it will be fine."

FEEDBACK = "Cap the backoff at 30 s."
COMMENTS = [{"line": 4, "text": "Only connection errors and 502/503/504."}]


def exit_plan(plan: str) -> dict:
    return {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}


async def plan_session(client) -> tuple[str, str]:
    created = await client.request("dsh/session/create", {"title": "history"})
    agent = created["agentId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"}))["stopReason"] == "command"
    return created["sessionId"], agent


async def test_history_and_previous_after_revise_failed_and_approve(workspace, daemons):
    # One turn: plan 1 sent back with feedback and a comment, a plan without a heading
    # (refused by the tool, never reviewed), plan 2 approved; then the work starts.
    write_workspace(
        workspace,
        replies=[exit_plan(PLAN_1), exit_plan(NO_HEADING), exit_plan(PLAN_2), {"text": "Starting."}],
    )
    asked: list[dict] = []
    pending_seen: list[dict] = []
    client_box: list = []

    async def person(params):
        [question] = params["questions"]
        asked.append(question)
        # While the person reviews, the history already lists this plan as pending.
        pending_seen.append(await client_box[0].request("dsh/plan/history", {"agentId": params["agentId"]}))
        if len(asked) == 1:
            return {"answers": [{"id": question["id"], "choice": "revise", "feedback": FEEDBACK, "comments": COMMENTS}]}
        return {"answers": [{"id": question["id"], "choice": "approve"}]}

    client = await daemons.start(answer=person)
    client_box.append(client)
    session_id, agent = await plan_session(client)
    assert await client.request("dsh/plan/history", {"agentId": agent}) == {"plans": []}
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."})
    assert result["stopReason"] == "end-turn"

    events = read_log(workspace, session_id)
    calls = [e for e in of_type(events, "tool/call") if e["data"]["name"] == "exit_plan_mode"]
    assert len(calls) == 3

    # P-23: the first review has no previous; the second carries the first's feedback and
    # comments (the refused plan in between was never reviewed, so it is skipped).
    assert len(asked) == 2
    assert "previous" not in asked[0]
    assert asked[1]["plan"] == PLAN_2
    assert asked[1]["previous"] == {
        "callId": calls[0]["data"]["callId"],
        "title": "Plan: retries for the HTTP client",
        "markdown": PLAN_1,
        "feedback": FEEDBACK,
        "comments": COMMENTS,
    }

    # P-21: every plan presented, oldest first, with the seq and at of its call.
    history = await client.request("dsh/plan/history", {"agentId": agent})
    assert history == {
        "plans": [
            {
                "callId": calls[0]["data"]["callId"],
                "seq": calls[0]["seq"],
                "title": "Plan: retries for the HTTP client",
                "markdown": PLAN_1,
                "outcome": "revise",
                "feedback": FEEDBACK,
                "comments": COMMENTS,
                "at": calls[0]["at"],
            },
            {
                "callId": calls[1]["data"]["callId"],
                "seq": calls[1]["seq"],
                "title": "Plan",
                "markdown": NO_HEADING,
                "outcome": "failed",
                "at": calls[1]["at"],
            },
            {
                "callId": calls[2]["data"]["callId"],
                "seq": calls[2]["seq"],
                "title": "Plan: retries, revised",
                "markdown": PLAN_2,
                "outcome": "approved",
                "at": calls[2]["at"],
            },
        ]
    }
    # Under review, each plan was the last one listed, "pending".
    assert [p["plans"][-1]["outcome"] for p in pending_seen] == ["pending", "pending"]
    assert [p["plans"][-1]["callId"] for p in pending_seen] == [calls[0]["data"]["callId"], calls[2]["data"]["callId"]]
    assert pending_seen[1]["plans"][0]["outcome"] == "revise"

    # A pure fold of the log: a daemon started afresh on the same log answers the same.
    await client.stop()
    again = await daemons.start(answer=person)
    opened = await again.request("dsh/session/open", {"sessionId": session_id})
    assert await again.request("dsh/plan/history", {"agentId": opened["agentId"]}) == history


async def test_an_approved_plan_is_not_the_previous_of_the_next_review(workspace, daemons):
    # Plan 1 approved (a clean approval); a second plan later has no previous: the person
    # asked for nothing last time.
    write_workspace(workspace, replies=[exit_plan(PLAN_1), {"text": "Done."}, exit_plan(PLAN_2), {"text": "Go."}])
    asked: list[dict] = []

    def approve(params):
        [question] = params["questions"]
        asked.append(question)
        return {"answers": [{"id": question["id"], "choice": "approve"}]}

    client = await daemons.start(answer=approve)
    _, agent = await plan_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries."}))["stopReason"] == "end-turn"
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"}))["stopReason"] == "command"
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "More."}))["stopReason"] == "end-turn"
    assert len(asked) == 2 and all("previous" not in q for q in asked)
    history = await client.request("dsh/plan/history", {"agentId": agent})
    assert [(p["title"], p["outcome"]) for p in history["plans"]] == [
        ("Plan: retries for the HTTP client", "approved"),
        ("Plan: retries, revised", "approved"),
    ]


async def test_history_of_an_unknown_agent_and_bad_params_are_clear_errors(workspace, daemons):
    client = await daemons.start()
    for params, field in (({}, "agentId"), ({"agentId": 7}, "agentId")):
        try:
            await client.request("dsh/plan/history", params)
        except Exception as exc:  # noqa: BLE001 - the JSON-RPC error is what is checked
            assert getattr(exc, "code", None) == -32602 and field in str(exc)
        else:
            raise AssertionError(f"{params} was accepted")
    try:
        await client.request("dsh/plan/history", {"agentId": "no-such-agent"})
    except Exception as exc:  # noqa: BLE001
        assert "no-such-agent" in str(exc) or "agent" in str(exc).lower()
    else:
        raise AssertionError("an unknown agent was accepted")


async def test_history_and_previous_are_escaped_for_reading_the_log_keeps_the_plan(workspace, daemons):
    # A plan whose heading hides text behind a right-to-left override, and a feedback with
    # a terminal escape: people read them escaped; the model and the log keep them raw.
    tricky = "# Plan: rename txt.exe\u202e\n\n1. Rename\x1b[2J it.\n"
    write_workspace(workspace, replies=[exit_plan(tricky), exit_plan(PLAN_2), {"text": "ok"}])
    asked: list[dict] = []

    def person(params):
        [question] = params["questions"]
        asked.append(question)
        if len(asked) == 1:
            return {"answers": [{"id": question["id"], "choice": "revise", "feedback": "no\u202e", "comments": [{"line": 3, "text": "x\x07"}]}]}
        return {"answers": [{"id": question["id"], "choice": "approve"}]}

    client = await daemons.start(answer=person)
    session_id, agent = await plan_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Go."}))["stopReason"] == "end-turn"
    [first, _] = (await client.request("dsh/plan/history", {"agentId": agent}))["plans"]
    assert first["title"] == "Plan: rename txt.exe\\u202e"
    assert first["markdown"] == "# Plan: rename txt.exe\\u202e\n\n1. Rename\\u001b[2J it.\n"
    assert first["feedback"] == "no\\u202e" and first["comments"] == [{"line": 3, "text": "x\\u0007"}]
    previous = asked[1]["previous"]
    assert (previous["title"], previous["markdown"], previous["feedback"]) == (first["title"], first["markdown"], "no\\u202e")
    assert previous["comments"] == first["comments"]
    # The control: the log (what the model got) holds the plan and the words as written.
    events = read_log(workspace, session_id)
    [call] = [e for e in of_type(events, "tool/call") if e["data"]["arguments"].get("plan") == tricky]
    [result] = [e for e in of_type(events, "tool/result") if e["data"]["callId"] == call["data"]["callId"]]
    assert result["data"]["review"]["feedback"] == "no\u202e"


async def test_a_fork_has_the_plans_before_its_cut(workspace, daemons):
    write_workspace(workspace, replies=[exit_plan(PLAN_1), exit_plan(PLAN_2), {"text": "Starting."}])
    answers = iter(["revise", "approve"])

    def person(params):
        return {"answers": [{"id": params["questions"][0]["id"], "choice": next(answers)}]}

    client = await daemons.start(answer=person)
    session_id, agent = await plan_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Go."}))["stopReason"] == "end-turn"
    history = await client.request("dsh/plan/history", {"agentId": agent})
    assert [p["outcome"] for p in history["plans"]] == ["revise", "approved"]
    whole = await client.request("dsh/session/fork", {"agentId": agent})
    assert await client.request("dsh/plan/history", {"agentId": whole["agentId"]}) == history
    # Cut just after the first plan's result: only that plan, as it was reviewed.
    events = read_log(workspace, session_id)
    first_result = next(e for e in of_type(events, "tool/result") if e["data"]["callId"] == history["plans"][0]["callId"])
    cut = await client.request("dsh/session/fork", {"agentId": agent, "atSeq": first_result["seq"]})
    assert await client.request("dsh/plan/history", {"agentId": cut["agentId"]}) == {"plans": history["plans"][:1]}
