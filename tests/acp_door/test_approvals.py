"""Tool calls and approvals over ACP: ``tool_call`` / ``tool_call_update`` with kind,
title, locations, raw input and the diff of an edit; an edit that needs the person's yes
is a ``session/request_permission`` on that call (Allow / Allow for this session /
Reject), and no choice (``cancelled``) fails closed. Both SDK clients; the workspace's
files and the session log are the truth."""

from __future__ import annotations

import pytest

from tests.acp_door.support import finished, selected, tool_call
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

TOOLS = ["plan", "goals", "tools"]


def edit(old: str, new: str) -> dict:
    return tool_call("edit_file", path="notes.txt", oldText=old, newText=new)


def answers(*replies: dict):
    queue = list(replies)
    return lambda params: queue.pop(0)


def before_it_ran(client, call_id: str) -> dict:
    """The call as the client knew it while it waited (every update before it ran)."""
    known: dict = {}
    for update in client.call_updates(call_id):
        if update.get("status") in ("in_progress", "completed", "failed"):
            break
        known.update(update)
    return known


async def test_an_edit_allowed_and_one_rejected(clients):
    root = write_workspace(clients.workspace, [{"toolCalls": [edit("one", "two"), edit("two", "three")]}, {"text": "done"}], plugins=TOOLS)
    (root / "notes.txt").write_text("one\n")
    client = await clients.start()
    client.answer_permission = answers(selected("allow-once"), selected("reject"))
    sid = (await client.new_session())["sessionId"]

    assert (await client.prompt(sid, "edit the notes"))["stopReason"] == "end_turn"

    assert (root / "notes.txt").read_text() == "two\n"
    calls = client.tool_calls(sid)
    assert [c["kind"] for c in calls] == ["edit", "edit"]
    first = before_it_ran(client, calls[0]["toolCallId"])
    assert first["title"] == "Edit notes.txt" and first["status"] == "pending"
    assert first["rawInput"] == {"path": "notes.txt", "oldText": "one", "newText": "two"}
    assert first["locations"] == [{"path": str(root / "notes.txt")}]
    assert first["content"] == [{"type": "diff", "path": str(root / "notes.txt"), "oldText": "one", "newText": "two"}]

    asked = client.permission_requests
    assert [a["toolCall"]["toolCallId"] for a in asked] == [c["toolCallId"] for c in calls]
    assert asked[0]["toolCall"]["kind"] == "edit" and asked[0]["toolCall"]["title"].startswith("Edit notes.txt")
    assert [(o["optionId"], o["name"], o["kind"]) for o in asked[0]["options"]] == [
        ("allow-once", "Allow", "allow_once"),
        ("allow-session", "Allow for this session", "allow_always"),
        ("reject", "Reject", "reject_once"),
    ]
    done, refused = finished(client, sid)
    assert done["status"] == "completed" and done["content"][0]["type"] == "diff"
    assert refused["status"] == "failed" and "rejected" in refused["content"][0]["content"]["text"]
    decisions = [(d["data"]["outcome"], d["data"]["by"]) for d in of_type(read_log(root, sid), "permission/decision")]
    assert decisions == [("allow-once", "person"), ("reject", "person")]


async def test_allow_for_this_session_asks_once(clients):
    root = write_workspace(clients.workspace, [{"toolCalls": [edit("one", "two")]}, {"toolCalls": [edit("two", "three")]}, {"text": "done"}], plugins=TOOLS)
    (root / "notes.txt").write_text("one\n")
    client = await clients.start()
    client.answer_permission = answers(selected("allow-session"))
    sid = (await client.new_session())["sessionId"]

    assert (await client.prompt(sid, "edit twice"))["stopReason"] == "end_turn"

    assert (root / "notes.txt").read_text() == "three\n"
    assert len(client.permission_requests) == 1
    decisions = [(d["data"]["outcome"], d["data"]["by"]) for d in of_type(read_log(root, sid), "permission/decision")]
    assert decisions == [("allow-session", "person"), ("allow-session", "session")]


@pytest.mark.parametrize(
    "answer",
    [{"outcome": {"outcome": "cancelled"}}, selected("allow-forever")],
    ids=["cancelled", "unknown-option"],
)
async def test_no_clear_yes_fails_closed(clients, answer):
    root = write_workspace(clients.workspace, [{"toolCalls": [edit("one", "two")]}, {"text": "done"}], plugins=TOOLS)
    (root / "notes.txt").write_text("one\n")
    client = await clients.start()
    client.answer_permission = answers(answer)
    sid = (await client.new_session())["sessionId"]

    assert (await client.prompt(sid, "edit it"))["stopReason"] == "end_turn"

    assert (root / "notes.txt").read_text() == "one\n"
    [refused] = finished(client, sid)
    assert refused["status"] == "failed" and "Nothing was changed" in refused["content"][0]["content"]["text"]
    [decision] = of_type(read_log(root, sid), "permission/decision")
    assert (decision["data"]["outcome"], decision["data"]["by"]) == ("reject", "fail-closed")
