"""Who did what, through real processes: two `dshd connect` clients with different names on
one session of the workspace's one `dshd daemon` (a private $XDG_RUNTIME_DIR per test).

Each client's chat items say "You" only for that client's own acts and name the other
client for the rest: a prompt from A is "You" in A's chat and "From <A>" in B's; an
approval given in B is "approved in <B>" in A's chat and "You allowed ..." in B's; A's
late answer to it is told once, "answered in <B> first"; a goal written in B and a
cancel from A are named the same way; the log keeps each act's client. Two clients that
give one name are told apart ("<name> 2").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.raw_client import log_events
from tests.e2e.test_shared_session import DshClient, edit_call, tools_workspace
from tests.shared_daemon_support import Runtime

pytestmark = pytest.mark.slow

A_NAME = "Neovim (pid 4242)"
B_NAME = "VS Code — ws-a"


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


def chat(client: DshClient, agent: str) -> dict[str, dict]:
    """The client's chat as it reads it: a fresh dsh/chat/get, then every upsert since."""
    items = {item["id"]: item for item in client.request("dsh/chat/get", {"agentId": agent})["items"]}
    return items


def upserted(client: DshClient, check) -> dict:
    """The newest upsert of an item that passes ``check`` (waits for it)."""
    def found():
        hits = [p["item"] for p in client.of("dsh/chat/item") if check(p["item"])]
        return hits[-1] if hits else None

    return client.pump(found, 30)


def test_each_chat_says_you_only_for_its_own_client_and_names_the_other(workspace: Path, runtime: Runtime):
    tools_workspace(workspace, [{"text": "hello to A"}, edit_call(), {"text": "edited"}, {"text": "never sent"}])
    a = DshClient(workspace, runtime)
    b = DshClient(workspace, runtime)
    try:
        assert "result" in a.initialize(questions=True, permissions=True, name=A_NAME)
        assert "result" in b.initialize(questions=True, permissions=True, name=B_NAME)
        created = a.request("dsh/session/create", {"title": "who did what"})
        sid, agent = created["sessionId"], created["agentId"]
        assert b.request("dsh/session/open", {"sessionId": sid})["agentId"] == agent
        chat(a, agent), chat(b, agent)  # both follow the chat from here on (upserts)
        names = b.pump(lambda: [p["clients"] for p in b.of("dsh/session/clients") if len(p["clients"]) == 2])[-1]
        assert {(c["clientName"], c["you"]) for c in names} == {(A_NAME, False), (B_NAME, True)}

        # A prompt from A: "You" in A's chat, "From <A>" in B's.
        assert a.request("dsh/agent/prompt", {"agentId": agent, "text": "hello from A"})["stopReason"] == "end-turn"
        mine = upserted(a, lambda i: i["kind"] == "user-message" and i["text"] == "hello from A")
        theirs = upserted(b, lambda i: i["kind"] == "user-message" and i["text"] == "hello from A")
        assert (mine["label"], "fromClient" in mine) == ("You", False)
        assert (theirs["label"], theirs["fromClient"]) == (f"From {A_NAME}", A_NAME)

        # A's prompt asks both for an approval; B answers first, A's answer comes too late.
        prompt = a.start("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
        ask_a, ask_b = a.ask("dsh/permission/ask"), b.ask("dsh/permission/ask")
        assert ask_a["params"]["callId"] == ask_b["params"]["callId"]
        b.reply_to(ask_b, {"outcome": "allow-once"})
        a.pump(lambda: [n for n in a.notifications if n["method"] == "$/cancelRequest"])
        a.reply_to(ask_a, {"outcome": "reject", "feedback": "too late"})
        assert a.result_of(prompt)["stopReason"] == "end-turn"
        in_a = upserted(a, lambda i: i["kind"] == "permission")
        in_b = upserted(b, lambda i: i["kind"] == "permission")
        assert in_a["text"] == f"edit_file allowed once, approved in {B_NAME}" and in_a["fromClient"] == B_NAME
        assert in_b["text"] == "You allowed edit_file once" and "fromClient" not in in_b
        late = a.pump(lambda: [p["message"] for p in a.of("window/showMessage") if "changed nothing" in p["message"]])
        assert f"answered in {B_NAME} first (allowed once)" in late[0]
        assert not [p for p in b.of("window/showMessage") if "changed nothing" in p["message"]]

        # A goal written in B, a turn cancelled from A.
        b.request("dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 3})
        goal_in_a = upserted(a, lambda i: i["kind"] == "goal" and i["op"] == "create")
        goal_in_b = upserted(b, lambda i: i["kind"] == "goal" and i["op"] == "create")
        assert goal_in_a["text"].endswith(f"— from {B_NAME}") and goal_in_a["fromClient"] == B_NAME
        assert "from" not in goal_in_b["text"] and "fromClient" not in goal_in_b

        # Nothing in either chat claims the other client's act as "You" (a fresh read, as after a reload).
        a_items, b_items = chat(a, agent), chat(b, agent)
        assert [i["text"] for i in a_items.values() if i["kind"] == "permission"] == [f"edit_file allowed once, approved in {B_NAME}"]
        people = lambda items: [i["label"] for i in items.values() if i["kind"] == "user-message" and i["sender"] == "person"]  # noqa: E731
        assert people(b_items) == [f"From {A_NAME}"] * 2 and people(a_items) == ["You", "You"]
        # The goal's rounds (started by the goal driver) are nobody's: no client on them.
        assert all("fromClient" not in i for i in a_items.values() if i["kind"] == "user-message" and i["sender"] == "goal")

        # The late answer was said once, however long A waits.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                a._dispatch(a._next(deadline))
            except TimeoutError:
                break
        assert len([p for p in a.of("window/showMessage") if "changed nothing" in p["message"]]) == 1

        # The log keeps who did each act.
        events = log_events(workspace, sid)
        assert [e["data"].get("client") for e in events if e["type"] == "user/message" and "goalRound" not in e["data"]] == [A_NAME, A_NAME]
        assert not [e for e in events if e["type"] == "user/message" and "goalRound" in e["data"] and "client" in e["data"]]
        [decision] = [e["data"] for e in events if e["type"] == "permission/decision"]
        assert (decision["by"], decision["client"]) == ("person", B_NAME)
        goal_clients = [e["data"].get("client") for e in events if e["type"] == "goal/change"]
        assert goal_clients[0] == B_NAME and not any(goal_clients[1:])  # later changes: the rounds' own
    finally:
        for client in (a, b):
            client.close_stdin()
            client.wait(10)


def test_a_cancel_names_the_client_that_stopped_the_turn(workspace: Path, runtime: Runtime):
    tools_workspace(workspace, [edit_call(), {"text": "never"}])
    a = DshClient(workspace, runtime)
    b = DshClient(workspace, runtime)
    try:
        assert "result" in a.initialize(questions=True, permissions=True, name=A_NAME)
        assert "result" in b.initialize(questions=True, permissions=False, name=B_NAME)
        created = a.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        b.request("dsh/session/open", {"sessionId": sid})
        chat(a, agent), chat(b, agent)
        prompt = b.start("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
        a.ask("dsh/permission/ask")  # the turn waits on A's approval: A stops it instead
        a.request("dsh/agent/cancel", {"agentId": agent})
        assert b.result_of(prompt)["stopReason"] == "cancelled"
        in_a = upserted(a, lambda i: i["kind"] == "turn-end")
        in_b = upserted(b, lambda i: i["kind"] == "turn-end")
        assert in_a["text"] == "Turn 1 stopped" and "fromClient" not in in_a
        assert in_b["text"] == f"Turn 1 stopped in {A_NAME}" and in_b["fromClient"] == A_NAME
        assert upserted(a, lambda i: i["kind"] == "user-message")["label"] == f"From {B_NAME}"
        [close] = [e["data"] for e in log_events(workspace, sid) if e["type"] == "turn/close"]
        assert close["client"] == A_NAME
    finally:
        for client in (a, b):
            client.close_stdin()
            client.wait(10)


def test_two_clients_giving_one_name_are_told_apart(workspace: Path, runtime: Runtime):
    tools_workspace(workspace, [{"text": "hi"}])
    a = DshClient(workspace, runtime)
    b = DshClient(workspace, runtime)
    try:
        assert "result" in a.initialize(name="Neovim")
        assert "result" in b.initialize(name="Neovim")
        created = a.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        b.request("dsh/session/open", {"sessionId": sid})
        listing = b.pump(lambda: [p["clients"] for p in b.of("dsh/session/clients") if len(p["clients"]) == 2])[-1]
        assert sorted(c["clientName"] for c in listing) == ["Neovim", "Neovim 2"]
        chat(a, agent)
        b.request("dsh/agent/prompt", {"agentId": agent, "text": "from the second"})
        assert upserted(a, lambda i: i["kind"] == "user-message")["label"] == "From Neovim 2"
    finally:
        for client in (a, b):
            client.close_stdin()
            client.wait(10)
