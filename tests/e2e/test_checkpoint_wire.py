"""dsh/checkpoint/list|diff|restore over the wire (SPEC K-2), against the real `dshd serve`
with a scripted model whose step writes a file: the checkpoint listed and carried by the chat
items, its diff, a restore refused for a file the person changed (nothing restored) and done
with force, a conversation rewind that forks before the step's reply; params errors -32602
naming the field; an unknown checkpoint; the plugin turned off. The truth is read back from
the files and the session logs on disk."""

from __future__ import annotations

import asyncio

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, wait_idle

PLUGINS = ["plan", "goals", "tools", "checkpoints"]
REPLIES = [
    {"text": "Changing a.", "toolCalls": [{"name": "write_file", "arguments": {"path": "app.py", "content": "a = 2\n"}}]},
    {"text": "Done: a is 2."},
]


async def rpc_error(request) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await request
    return info.value


async def started(daemons, workspace, plugins=PLUGINS):
    write_workspace(workspace, REPLIES, plugins=plugins)
    (workspace / "app.py").write_text("a = 1\n")
    client = await daemons.start(approve=lambda p: {"outcome": "allow-once"})
    created = await client.request("dsh/session/create", {"title": "checkpoints"})
    return client, created["agentId"], created["sessionId"]


async def test_list_diff_restore_and_a_conversation_rewind(workspace, daemons):
    client, agent, session_id = await started(daemons, workspace)
    assert (await client.request("dsh/checkpoint/list", {"agentId": agent})) == {"checkpoints": []}
    await client.request("dsh/chat/get", {"agentId": agent})  # follow the chat's upserts
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Make a two."})
    await wait_idle(client, agent)
    assert (workspace / "app.py").read_text() == "a = 2\n"

    # The checkpoint before the writing step, as the log has it and as the list gives it.
    events = read_log(workspace, session_id)
    [before] = [e for e in of_type(events, "checkpoint/taken") if e["data"]["phase"] == "before"]
    assert before["turn"] == 1 and before["data"]["step"] == 1
    seq = before["seq"]
    [info] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    assert info == {"seq": seq, "turn": 1, "step": 1, "at": before["at"], "files": ["app.py"]}

    # "Rewind to here" on the message and on the tool card names it, in the list and as upserts.
    items = (await client.request("dsh/chat/get", {"agentId": agent}))["items"]
    [user] = [i for i in items if i["kind"] == "user-message"]
    [tool] = [i for i in items if i["kind"] == "tool-call"]
    assert user["checkpoint"] == seq and tool["checkpoint"] == seq
    upserted = [n["params"]["item"] for n in client.notifications if n["method"] == "dsh/chat/item"]
    assert any(i["id"] == user["id"] and i.get("checkpoint") == seq for i in upserted)
    assert not any(i.get("checkpoint") for i in items if i["kind"] not in ("user-message", "tool-call"))

    [change] = (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": seq}))["files"]
    assert {k: change[k] for k in ("path", "status", "binary", "changedByPerson")} == {
        "path": "app.py", "status": "modified", "binary": False, "changedByPerson": False,
    }
    assert "-a = 2\n+a = 1\n" in change["diff"]

    # The person writes a file of their own: the rewind would delete it, so it needs force.
    (workspace / "notes.md").write_text("mine\n")
    files = {f["path"]: f for f in (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": seq}))["files"]}
    assert set(files) == {"app.py", "notes.md"}
    assert files["notes.md"]["status"] == "deleted" and files["notes.md"]["changedByPerson"] is True
    refused = await rpc_error(client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": seq}))
    assert refused.code == -32014 and refused.data == {"kind": "person-changed", "paths": ["notes.md"]}
    assert (workspace / "app.py").read_text() == "a = 2\n" and (workspace / "notes.md").exists()  # nothing restored

    done = await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": seq, "force": True})
    assert done == {"restored": ["app.py", "notes.md"], "forced": ["notes.md"]}
    assert (workspace / "app.py").read_text() == "a = 1\n" and not (workspace / "notes.md").exists()
    [restored] = of_type(read_log(workspace, session_id), "checkpoint/restored")
    assert restored["data"]["checkpoint"] == seq and restored["data"]["forced"] == ["notes.md"]
    assert (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": seq})) == {"files": []}

    # The conversation too: a fork that ends before the step's reply; this session stays as it was.
    length = len(read_log(workspace, session_id))
    forked = await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": seq, "files": False, "conversation": True})
    assert forked["restored"] == [] and forked["forced"] == []
    handle = forked["agent"]
    assert handle["sessionId"] != session_id and handle["agentId"] != agent
    fork_events = read_log(workspace, handle["sessionId"])
    assert fork_events[0]["data"]["forkedFrom"]["sessionId"] == session_id
    assert [e["data"]["text"] for e in of_type(fork_events, "user/message")] == ["Make a two."]
    assert not of_type(fork_events, "tool/call") and not of_type(fork_events, "assistant/message")
    assert len(read_log(workspace, session_id)) == length
    # The fork is attached to this connection like any fork: it answers for itself.
    assert (await client.request("dsh/checkpoint/list", {"agentId": handle["agentId"]}))["checkpoints"] == []


async def test_bad_params_are_invalid_params_naming_the_field(workspace, daemons):
    client, agent, session_id = await started(daemons, workspace)
    cases = [
        ("dsh/checkpoint/diff", {"agentId": agent}, "seq"),
        ("dsh/checkpoint/diff", {"agentId": agent, "seq": "3"}, "seq"),
        ("dsh/checkpoint/diff", {"agentId": agent, "seq": 0}, "seq"),
        ("dsh/checkpoint/diff", {"agentId": agent, "seq": 2.5}, "seq"),
        ("dsh/checkpoint/list", {"agentId": agent, "seq": 1}, "seq"),
        ("dsh/checkpoint/restore", {"agentId": agent, "seq": 1, "force": "true"}, "force"),
        ("dsh/checkpoint/restore", {"agentId": agent, "seq": 1, "conversation": None}, "conversation"),
        ("dsh/checkpoint/restore", {"agentId": agent, "seq": 1, "files": False}, "files"),
        ("dsh/checkpoint/restore", {"agentId": agent, "seq": 1, "dry_run": True}, "dry_run"),
        ("dsh/checkpoint/restore", {"seq": 1}, "agentId"),
    ]
    for method, params, field in cases:
        error = await rpc_error(client.request(method, params))
        assert error.code == -32602, (method, params, error.data)
        assert error.data["kind"] == "invalid-params" and error.data["field"] == field, (method, params, error.data)
    # A seq that names no checkpoint of this session (seq 1 is its session/start): field seq.
    for method in ("dsh/checkpoint/diff", "dsh/checkpoint/restore"):
        for seq in (1, 999):
            error = await rpc_error(client.request(method, {"agentId": agent, "seq": seq}))
            assert (error.code, error.data["kind"], error.data["field"]) == (-32602, "invalid-params", "seq"), (method, seq)
    assert (await rpc_error(client.request("dsh/checkpoint/list", {"agentId": "a-never"}))).data["kind"] == "unknown-agent"
    assert not of_type(read_log(workspace, session_id), "checkpoint/restored")


async def test_without_the_plugin_the_methods_say_so(workspace, daemons):
    client, agent, _ = await started(daemons, workspace, plugins=["plan", "goals", "tools"])
    for method, params in (
        ("dsh/checkpoint/list", {"agentId": agent}),
        ("dsh/checkpoint/diff", {"agentId": agent, "seq": 2}),
        ("dsh/checkpoint/restore", {"agentId": agent, "seq": 2}),
    ):
        error = await rpc_error(client.request(method, params))
        assert error.data["kind"] == "plugin-not-loaded", (method, error.data)
        assert '"checkpoints"' in error.message
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Make a two."})
    await wait_idle(client, agent)
    items = (await client.request("dsh/chat/get", {"agentId": agent}))["items"]
    assert (workspace / "app.py").read_text() == "a = 2\n"
    assert not any("checkpoint" in i for i in items)  # no checkpoint: no "Rewind to here"
    assert not (workspace / ".dsh" / "checkpoints.git").exists()


async def test_a_restore_while_a_turn_runs_is_turn_open_and_changes_nothing(workspace, daemons):
    write_workspace(workspace, [*REPLIES, {"text": "thinking slowly", "delayMs": 20_000}], plugins=PLUGINS)
    (workspace / "app.py").write_text("a = 1\n")
    client = await daemons.start(approve=lambda p: {"outcome": "allow-once"})
    created = await client.request("dsh/session/create", {"title": "checkpoints"})
    agent, session_id = created["agentId"], created["sessionId"]
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Make a two."})
    [info] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    second_turn = client.wait_for(
        lambda n: n["method"] == "dsh/session/event" and n["params"]["event"]["type"] == "request/header"
        and n["params"]["event"].get("turn") == 2,
        timeout=10,
    )
    running = asyncio.create_task(client.request("dsh/agent/prompt", {"agentId": agent, "text": "And then?"}))
    await second_turn
    error = await rpc_error(client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": info["seq"]}))
    assert error.data["kind"] == "turn-open", error.data
    assert (workspace / "app.py").read_text() == "a = 2\n"
    await client.request("dsh/agent/cancel", {"agentId": agent})
    assert (await running)["stopReason"] == "cancelled"
    assert not of_type(read_log(workspace, session_id), "checkpoint/restored")
