"""Approvals over the wire: the daemon asks the editor with ``dsh/permission/ask`` before a
write or a command; the test plays the editor and the person.

Every outcome (allow-once, allow-session, reject with feedback) and every fail-closed path
(no capability, timeout, malformed reply, error reply, cancel, close, shutdown, a lost
connection) against the real ``dshd serve`` with the scripted model; the outcome is read
from the file on disk, the tool results and the ``permission/decision`` events in the log.
"""

from __future__ import annotations

import asyncio
import queue
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.e2e.support import AbsentPerson, of_type, read_log

ORIGINAL = "def greet():\n    print('hi')\n"
EDITED = "def greet():\n    print('hello')\n"
TOOLS = ["plan", "goals", "tools"]


def edit_call(old: str = "print('hi')", new: str = "print('hello')") -> dict:
    return {"toolCalls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": old, "newText": new}}]}


@pytest.fixture
def daemons(daemons):
    """The [tools] tables here are the test's own settings (a person's, not a cloned
    repository's): trust the workspace so that guarded keys such as approve = [] apply."""
    daemons.trusted = True
    return daemons


def tools_workspace(root: Path, replies: list[dict], extra_config: str = "") -> Path:
    write_workspace(root, replies=replies, plugins=TOOLS, extra_config=extra_config)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text(ORIGINAL)
    return root


def results_of(events: list[dict], tool: str) -> list[dict]:
    calls = {e["data"]["callId"] for e in of_type(events, "tool/call") if e["data"]["name"] == tool}
    return [e["data"] for e in of_type(events, "tool/result") if e["data"]["callId"] in calls]


def decisions(events: list[dict]) -> list[dict]:
    return [e["data"] for e in of_type(events, "permission/decision")]


async def new_agent(client) -> tuple[str, str]:
    created = await client.request("dsh/session/create", {"title": "approvals"})
    return created["sessionId"], created["agentId"]


# ---- outcomes -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_allow_once_applies_the_edit_the_person_saw(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "done"}])
    asked: list[dict] = []

    def allow(params):
        asked.append(params)
        return {"outcome": "allow-once"}

    client = await daemons.start(approve=allow)
    sid, agent = await new_agent(client)
    assert await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"}) == {
        "turn": 1, "stopReason": "end-turn",
    }
    assert (workspace / "src" / "app.py").read_text() == EDITED

    events = read_log(workspace, sid)
    [call] = of_type(events, "tool/call")
    [params] = asked
    assert params["agentId"] == agent and params["sessionId"] == sid
    assert params["callId"] == call["data"]["callId"]
    assert params["tool"] == "edit_file" and params["mutability"] == "write"
    assert params["title"] == "Edit src/app.py"
    assert "-    print('hi')" in params["diff"] and "+    print('hello')" in params["diff"]
    assert "command" not in params and "cwd" not in params
    assert decisions(events) == [{"callId": call["data"]["callId"], "tool": "edit_file", "outcome": "allow-once", "by": "person", "client": "client 1"}]
    [result] = results_of(events, "edit_file")
    assert result["ok"] is True and "+    print('hello')" in result["content"]
    # The decision is recorded between the call and its result.
    kinds = [e["type"] for e in events]
    assert kinds.index("tool/call") < kinds.index("permission/decision") < kinds.index("tool/result")


@pytest.mark.slow
async def test_allow_session_covers_the_tool_for_this_agent_only(workspace, daemons):
    tools_workspace(
        workspace,
        [
            edit_call(),
            edit_call("print('hello')", "print('hey')"),
            {"text": "turn 1 done"},
            edit_call("print('hey')", "print('yo')"),
            {"text": "turn 2 done"},
        ],
    )
    asked: list[dict] = []

    def person(params):
        asked.append(params)
        return {"outcome": "allow-session"}

    client = await daemons.start(approve=person)
    sid, agent = await new_agent(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "two edits"})
    assert len(asked) == 1  # the second edit ran on the session grant
    assert (workspace / "src" / "app.py").read_text() == "def greet():\n    print('hey')\n"
    assert [(d["outcome"], d["by"]) for d in decisions(read_log(workspace, sid))] == [
        ("allow-session", "person"), ("allow-session", "session"),
    ]

    # A reload is a new agent: the grant was in process only, so it asks again.
    reopened = await client.request("dsh/session/open", {"sessionId": sid, "reload": True})
    await client.request("dsh/agent/prompt", {"agentId": reopened["agentId"], "text": "again"})
    assert len(asked) == 2 and asked[1]["agentId"] == reopened["agentId"]
    assert (workspace / "src" / "app.py").read_text() == "def greet():\n    print('yo')\n"


@pytest.mark.slow
async def test_reject_keeps_the_file_and_passes_the_feedback_to_the_model(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "understood"}])
    client = await daemons.start(approve=lambda p: {"outcome": "reject", "feedback": "Keep 'hi', it is the brand."})
    sid, agent = await new_agent(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})

    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    events = read_log(workspace, sid)
    [result] = results_of(events, "edit_file")
    assert result["ok"] is False
    assert "rejected" in result["content"] and "Keep 'hi', it is the brand." in result["content"]
    [decision] = decisions(events)
    assert decision["outcome"] == "reject" and decision["by"] == "person"
    assert decision["feedback"] == "Keep 'hi', it is the brand."
    # The result is in the transcript the next request is built from: after it, a request.
    headers = of_type(events, "request/header")
    result_seq = next(e["seq"] for e in of_type(events, "tool/result"))
    assert headers[-1]["seq"] > result_seq


@pytest.mark.slow
async def test_no_asking_when_the_class_is_not_in_approve(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "done"}], extra_config='\n[tools]\napprove = ["exec"]\n')
    asked: list[dict] = []
    client = await daemons.start(approve=lambda p: asked.append(p) or {"outcome": "reject"})
    sid, agent = await new_agent(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})
    assert asked == []
    assert (workspace / "src" / "app.py").read_text() == EDITED
    assert [(d["outcome"], d["by"]) for d in decisions(read_log(workspace, sid))] == [("allow-once", "policy")]


@pytest.mark.slow
async def test_permission_set_read_only_refuses_writes_without_asking(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "ok"}])
    asked: list[dict] = []
    client = await daemons.start(approve=lambda p: asked.append(p) or {"outcome": "allow-once"})
    sid, agent = await new_agent(client)
    assert await client.request("dsh/permission/set", {"agentId": agent, "sandbox": "read-only"}) == {
        "sandbox": "read-only", "network": False, "approve": ["write", "exec"],
    }
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})
    assert asked == []
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    events = read_log(workspace, sid)
    [result] = results_of(events, "edit_file")
    assert result["ok"] is False and "read-only" in result["content"]
    assert decisions(events) == []
    assert not of_type(events, "plan/mode")  # the policy never touches plan mode


# ---- fail closed ---------------------------------------------------------------------------


def assert_failed_closed(workspace: Path, sid: str, why: str) -> None:
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    events = read_log(workspace, sid)
    [result] = results_of(events, "edit_file")
    assert result["ok"] is False and "Nothing was changed" in result["content"], result
    assert why in result["content"], result["content"]
    [decision] = decisions(events)
    assert decision["outcome"] == "reject" and decision["by"] == "fail-closed"


async def test_no_capability_fails_closed(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "ok"}])
    client = await daemons.start(permissions=False)
    sid, agent = await new_agent(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})
    assert_failed_closed(workspace, sid, "your editor cannot answer approvals")


@pytest.mark.slow
async def test_timeout_fails_closed_withdraws_and_ignores_a_late_yes(workspace, daemons):
    tools_workspace(workspace, [edit_call(), {"text": "ok"}])
    withdrawn = asyncio.Event()
    late = asyncio.Event()

    async def slow_person(params):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            withdrawn.set()  # $/cancelRequest from the daemon: the window closes
        late.set()
        return {"outcome": "allow-once"}

    client = await daemons.start(approve=slow_person, init_options={"questionTimeoutMs": 300})
    sid, agent = await new_agent(client)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})
    assert loop.time() - started < 4
    await asyncio.wait_for(late.wait(), 5)
    assert withdrawn.is_set()
    await asyncio.sleep(0.2)
    assert_failed_closed(workspace, sid, "no answer within 0.3 s")
    assert await client.request("dsh/permission/get", {"agentId": agent})  # still serving


async def test_malformed_and_error_replies_fail_closed(workspace, daemons):
    bad = [
        {"outcome": "yes"},
        {"outcome": "allow-once", "extra": True},
        {"outcome": "reject", "feedback": 7},
        "allow-once",
        {},
    ]
    tools_workspace(workspace, [edit_call() for _ in range(len(bad) + 1)] + [{"text": "ok"}])
    replies = iter(bad)

    def person(params):
        reply = next(replies, None)
        if reply is None:
            raise RuntimeError("the editor's approval window crashed")  # an error reply
        return reply

    client = await daemons.start(approve=person)
    sid, agent = await new_agent(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"})
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    events = read_log(workspace, sid)
    results = results_of(events, "edit_file")
    assert len(results) == len(bad) + 1
    for result in results[:-1]:
        assert result["ok"] is False and "malformed reply" in result["content"], result
    assert "answered with an error" in results[-1]["content"]
    assert [(d["outcome"], d["by"]) for d in decisions(events)] == [("reject", "fail-closed")] * (len(bad) + 1)


async def _asked_and_waiting(daemons, workspace):
    tools_workspace(workspace, [edit_call(), {"text": "never"}])
    person = AbsentPerson({"outcome": "allow-once"})
    client = await daemons.start(approve=person)
    sid, agent = await new_agent(client)
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"}))
    await asyncio.wait_for(person.asked.wait(), 10)
    return client, sid, agent, prompt, person.withdrawn


@pytest.mark.slow
async def test_cancel_withdraws_the_ask_and_fails_closed(workspace, daemons):
    client, sid, agent, prompt, withdrawn = await _asked_and_waiting(daemons, workspace)
    assert await client.request("dsh/agent/cancel", {"agentId": agent}) is None
    assert (await asyncio.wait_for(prompt, 5))["stopReason"] == "cancelled"
    await asyncio.wait_for(withdrawn.wait(), 5)
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    events = read_log(workspace, sid)
    [decision] = decisions(events)
    assert decision["outcome"] == "reject" and decision["by"] == "fail-closed"
    [result] = results_of(events, "edit_file")
    assert result["ok"] is False and "cancelled" in result["content"]
    assert events[-1]["data"] == {"turn": 1, "stopReason": "cancelled", "client": "client 1"}  # who cancelled


async def test_close_withdraws_the_ask(workspace, daemons):
    client, sid, agent, prompt, withdrawn = await _asked_and_waiting(daemons, workspace)
    assert await client.request("dsh/session/close", {"agentId": agent}) is None
    await asyncio.wait_for(withdrawn.wait(), 5)
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    # The log keeps the turn open; the next load closes it as interrupted, nothing allowed.
    reopened = await client.request("dsh/session/open", {"sessionId": sid})
    events = read_log(workspace, sid)
    assert not [d for d in decisions(events) if d["outcome"] != "reject"]
    [result] = results_of(events, "edit_file")
    assert result["ok"] is False and events[-1]["data"]["stopReason"] == "interrupted"
    assert reopened["agentId"] != agent
    prompt.cancel()


async def test_shutdown_while_asking_changes_nothing(workspace, daemons):
    client, sid, agent, prompt, withdrawn = await _asked_and_waiting(daemons, workspace)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await client.stop() == 0  # shutdown, exit: the daemon stops waiting for the person
    assert loop.time() - started < 8
    await asyncio.gather(prompt, return_exceptions=True)
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    assert not [d for d in decisions(read_log(workspace, sid)) if d["outcome"] != "reject"]


def test_lost_connection_while_asking_changes_nothing(tmp_path):
    workspace = tools_workspace(tmp_path / "ws", [edit_call(), {"text": "never"}])
    with RawDaemon(workspace) as daemon:
        assert "result" in daemon.initialize(permissions=True)
        created = daemon.request("dsh/session/create", {})
        daemon.send({"jsonrpc": "2.0", "id": "p", "method": "dsh/agent/prompt",
                     "params": {"agentId": created["agentId"], "text": "say hello"}})
        # Read the inbox directly: nothing answers the ask; it stays open until the pipe closes.
        asks: list[dict] = []
        end = time.monotonic() + 10
        while not asks and time.monotonic() < end:
            try:
                message = daemon.inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if message and message.get("method") == "dsh/permission/ask":
                asks.append(message)
        assert asks, "the daemon never asked"
        daemon.close_stdin()
        assert daemon.wait(10) == 1  # no shutdown came: LSP's exit status 1
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    assert not [d for d in decisions(read_log(workspace, created["sessionId"])) if d["outcome"] != "reject"]
