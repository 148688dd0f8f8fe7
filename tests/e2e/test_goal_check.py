"""Verified completion (G-23), on the real daemon over stdio with the scripted model and
the real sandbox: with ``[goals] check``, the model's ``goal_complete`` is an exec call
(the person approves the command, as for run_command), then runs the command in the
sandbox; exit 0 completes the goal and the ``goal/change`` records the check, anything
else fails the call with the output's tail and the goal stays active. A person's
complete never runs it."""

from __future__ import annotations

import json
from pathlib import Path

from dshd_protocol import METHODS, from_wire

from tests.sandbox_support import needs_sandbox

from .conftest import write_workspace
from .support import of_type, read_log, ref_of, wait_idle

# Appends a line to checks.log each time it runs (so a test sees whether it ran), then
# passes only once done.txt exists.
CHECK = 'echo ran >> checks.log; test -f done.txt || { echo "missing done.txt"; exit 3; }; echo check-passed'
COMPLETE = {"toolCalls": [{"name": "goal_complete", "arguments": {}}]}


def check_workspace(root: Path, replies: list[dict]) -> None:
    write_workspace(root, replies=replies, plugins=["goals", "tools"], extra_config=f"\n[goals]\ncheck = {json.dumps(CHECK)}\n")


def results_of(events: list[dict], name: str) -> list[dict]:
    calls = {e["data"]["callId"] for e in of_type(events, "tool/call") if e["data"]["name"] == name}
    return [e["data"] for e in of_type(events, "tool/result") if e["data"]["callId"] in calls]


@needs_sandbox
async def test_the_models_complete_runs_the_check_and_completes_only_when_it_passes(workspace: Path, daemons) -> None:
    write = {"name": "write_file", "arguments": {"path": "done.txt", "content": "ok\n"}}
    check_workspace(workspace, [COMPLETE, COMPLETE, {"toolCalls": [write]}, COMPLETE, {"text": "Done."}])
    asked: list[dict] = []
    outcomes = iter(["reject", "allow-once", "allow-once", "allow-once"])

    def person(params: dict) -> dict:
        asked.append(params)
        return {"outcome": next(outcomes)}

    client = await daemons.start(approve=person)
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "write done.txt", "maxRounds": 3})
    await wait_idle(client, agent, timeout=30)
    events = read_log(workspace, sid)

    # The person was asked with the command itself, as for any command (exec).
    check_asks = [a for a in asked if a["tool"] == "goal_complete"]
    assert len(check_asks) == 3 and len(asked) == 4
    assert all(a["mutability"] == "exec" and a["command"] == CHECK and a["cwd"] == str(workspace) for a in check_asks)

    [rejected, failed, passed] = results_of(events, "goal_complete")
    # 1. Rejected: the command did not run, the goal stayed active.
    assert rejected["ok"] is False and "rejected" in rejected["content"]
    # 2. Ran and failed: the output's tail, and the goal stays active.
    assert failed["ok"] is False
    assert "did not pass, so the goal stays active" in failed["content"]
    assert "exit code 3 (workspace-write sandbox" in failed["content"] and "missing done.txt" in failed["content"]
    # 3. Passed (after the file was written): complete, with the check recorded.
    assert passed["ok"] is True and "check-passed" in passed["content"] and "is now complete" in passed["content"]
    assert (workspace / "checks.log").read_text() == "ran\nran\n"  # ran twice: not when rejected

    changes = [e["data"] for e in of_type(events, "goal/change")]
    assert [c["op"] for c in changes] == ["create", "complete"]
    complete_calls = [e["data"]["callId"] for e in of_type(events, "tool/call") if e["data"]["name"] == "goal_complete"]
    assert changes[-1]["check"] == {"command": CHECK, "callId": complete_calls[2]}
    assert "check" not in changes[0]
    final = await client.request("dsh/goal/get", {"agentId": agent})
    from_wire(METHODS["dsh/goal/get"].result, final)
    assert (final["id"], final["phase"], final["roundsStarted"]) == (goal["id"], "complete", 1)
    chat = await client.request("dsh/chat/get", {"agentId": agent})
    [line] = [i for i in chat["items"] if i["kind"] == "goal" and i["op"] == "complete"]
    assert line["text"].startswith("Goal complete (1/3 rounds used): its check `echo ran >> checks.log;")
    assert line["text"].endswith("` passed")
    # The log replays (the strict fold takes the check) and the goal reads the same.
    reopened = await client.request("dsh/session/open", {"sessionId": sid, "reload": True})
    assert (await client.request("dsh/goal/get", {"agentId": reopened["agentId"]}))["phase"] == "complete"


@needs_sandbox
async def test_a_persons_complete_is_never_checked(workspace: Path, daemons) -> None:
    check_workspace(workspace, [{"text": "Looked around."}])
    asked: list[dict] = []
    client = await daemons.start(approve=lambda params: asked.append(params) or {"outcome": "allow-once"})
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "look", "maxRounds": 1})
    await wait_idle(client, agent, timeout=30)
    blocked = await client.request("dsh/goal/get", {"agentId": agent})
    assert blocked["phase"] == "blocked"  # the one round ran; the check would fail now
    done = await client.request("dsh/goal/complete", {"agentId": agent, "ref": ref_of(blocked)})
    assert done["phase"] == "complete"
    assert asked == [] and not (workspace / "checks.log").exists()  # nothing asked, nothing ran
    [complete] = [e["data"] for e in of_type(read_log(workspace, sid), "goal/change") if e["data"]["op"] == "complete"]
    assert "check" not in complete
