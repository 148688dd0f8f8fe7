"""ACP sessions end to end: the real `dshd acp`, driven by the official Python and
TypeScript SDK clients (each test runs with both). The truth is read back from the
answers, the updates the client received and the session log on disk."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.acp_door.clients import AcpError
from tests.acp_door.support import tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log


async def test_initialize_says_what_dshd_supports(client):
    result = client.init_result
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"]["list"] == {}
    prompt = caps["promptCapabilities"]
    assert prompt["embeddedContext"] is True and not prompt.get("image") and not prompt.get("audio")
    assert result["agentInfo"]["name"] == "dshd"
    assert result["_meta"]["goal"] == {
        "version": 1,
        "controlMethod": "_session/goal",
        "actions": ["set", "pause", "resume", "clear", "complete", "block", "edit"],
    }


async def test_new_prompt_streams_the_reply_and_ends(clients):
    reply = "Hello from the script, streamed to the client as the model writes it."
    write_workspace(clients.workspace, [{"text": reply}])
    client = await clients.start()
    session = await client.new_session()
    sid = session["sessionId"]
    assert (clients.workspace / ".dsh" / "sessions" / sid / "log.jsonl").is_file()
    assert session["modes"]["currentModeId"] == "default"
    assert [m["id"] for m in session["modes"]["availableModes"]] == ["default", "plan"]
    [option] = session["configOptions"]
    assert (option["id"], option["category"], option["currentValue"]) == ("mode", "mode", "default")
    assert session["_meta"]["goal"] is None

    result = await client.prompt(sid, "hi there")

    assert result["stopReason"] == "end_turn"
    # Every update of the turn came before the answer; the text came in pieces (the
    # model's live deltas) and the committed reply added nothing twice.
    assert client.agent_text(sid) == reply
    assert len(client.of_kind("agent_message_chunk", sid)) > 1
    assert "user_message_chunk" not in client.kinds(sid)  # the client shows its own prompt
    [commands] = client.of_kind("available_commands_update", sid)
    assert "plan" in [c["name"] for c in commands["availableCommands"]]
    events = read_log(clients.workspace, sid)
    assert [e["data"]["text"] for e in of_type(events, "user/message")] == ["hi there"]
    assert of_type(events, "turn/close")[-1]["data"]["stopReason"] == "end-turn"


async def test_resources_in_a_prompt_become_context_and_images_are_refused(clients):
    write_workspace(clients.workspace, [{"text": "read it"}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    uri = (clients.workspace / "notes.md").as_uri()
    blocks = [
        {"type": "text", "text": "Summarise "},
        {"type": "resource", "resource": {"uri": uri, "text": "line one\nline two", "mimeType": "text/markdown"}},
        {"type": "text", "text": " and "},
        {"type": "resource_link", "uri": "https://example.com/spec", "name": "the spec"},
    ]
    assert (await client.prompt(sid, blocks))["stopReason"] == "end_turn"
    [message] = of_type(read_log(clients.workspace, sid), "user/message")
    text = message["data"]["text"]
    assert text.startswith(f"Summarise [notes.md]({uri}) and [the spec](https://example.com/spec)")
    assert f'<context uri="{uri}">\nline one\nline two\n</context>' in text

    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, [{"type": "text", "text": "look"}, image])
    assert err.value.code == -32602 and err.value.data["field"] == "prompt[1]"
    assert len(of_type(read_log(clients.workspace, sid), "turn/open")) == 1  # nothing written


async def test_load_replays_the_history_before_it_answers(clients):
    write_workspace(
        clients.workspace,
        [
            {"text": "first answer"},
            {"text": "let me check", "toolCalls": [tool_call("exit_plan_mode", plan="# Plan")]},
            {"text": "second answer"},
        ],
    )
    first = await clients.start()
    sid = (await first.new_session())["sessionId"]
    await first.prompt(sid, "first question")
    await first.prompt(sid, "second question")
    live_text, live_calls = first.agent_text(sid), first.tool_calls(sid)
    await clients.close_all()  # the session is free for the next process

    second = await clients.start()
    told_before_load = len(second.updates)
    loaded = await second.load_session(sid)

    assert loaded["modes"]["currentModeId"] == "default"
    assert told_before_load == 0
    kinds = second.kinds(sid)
    # The history, in order, one update per committed event, then the session's info.
    assert kinds[:8] == [
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "session_info_update",
    ]
    replay = [u["update"] for u in second.updates]
    assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"] == [
        "first question",
        "second question",
    ]
    # The replayed agent side is what the first client saw live (streamed there).
    assert second.agent_text(sid) == live_text == "first answerlet me checksecond answer"
    assert second.tool_calls(sid) == live_calls
    [call] = live_calls
    assert (call["kind"], call["title"], call["status"]) == ("switch_mode", "Plan", "failed")
    assert "Plan mode is off" in call["content"][0]["content"]["text"]
    info = replay[7]
    assert info["_meta"] == {"goal": None} and info["updatedAt"]


async def test_list_names_every_session_of_the_workspace(client):
    a = (await client.new_session())["sessionId"]
    b = (await client.new_session())["sessionId"]
    listed = (await client.list_sessions())["sessions"]
    assert sorted(s["sessionId"] for s in listed) == sorted([a, b])
    assert {s["cwd"] for s in listed} == {client.cwd}
    assert all(s["updatedAt"] for s in listed)
    assert (await client.list_sessions(cwd=client.cwd))["sessions"] == listed
    assert (await client.list_sessions(cwd="/somewhere/else"))["sessions"] == []


async def test_cwd_must_be_the_workspace(client, tmp_path):
    with pytest.raises(AcpError) as err:
        await client.new_session(cwd=str(tmp_path))
    assert err.value.code == -32602 and err.value.data == {"kind": "invalid-params", "field": "cwd"}
    assert client.cwd in err.value.message and str(tmp_path) in err.value.message
    with pytest.raises(AcpError) as err:
        await client.new_session(cwd="relative/dir")
    assert err.value.data["field"] == "cwd" and "absolute" in err.value.message


async def test_cancel_ends_a_running_turn(clients):
    write_workspace(clients.workspace, [{"text": "too slow", "delayMs": 20000}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    prompt = asyncio.ensure_future(client.prompt(sid, "take your time"))
    await wait_log(clients.workspace, sid, lambda events: of_type(events, "request/header"))
    started = time.monotonic()
    await client.cancel(sid)
    result = await asyncio.wait_for(prompt, 10)
    assert result["stopReason"] == "cancelled"
    assert time.monotonic() - started < 10  # not the model's 20 s
    events = read_log(clients.workspace, sid)
    assert of_type(events, "turn/close")[-1]["data"]["stopReason"] == "cancelled"
    assert not of_type(events, "assistant/message")


async def test_one_process_holds_a_session(clients):
    holder = await clients.start()
    sid = (await holder.new_session())["sessionId"]
    other = await clients.start()
    with pytest.raises(AcpError) as err:
        await other.load_session(sid)
    assert err.value.data["kind"] == "session-locked"
    assert isinstance(err.value.data["pid"], int)
    with pytest.raises(AcpError) as err:
        await other.prompt(sid, "hello?")
    assert err.value.code == -32602 and err.value.data["field"] == "sessionId"


async def test_unknown_sessions_are_bad_params(client):
    for session_id in ("../etc", "s-00000000000000000000000000"):
        with pytest.raises(AcpError) as err:
            await client.load_session(session_id)
        assert err.value.code == -32602 and err.value.data["field"] == "sessionId"


async def test_max_steps_is_max_turn_requests(clients):
    write_workspace(
        clients.workspace,
        [{"toolCalls": [tool_call("exit_plan_mode", plan="# Plan")]}, {"text": "never asked for"}],
        extra_config="\n[agent]\nmaxSteps = 1\n",
    )
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "go"))["stopReason"] == "max_turn_requests"
    assert of_type(read_log(clients.workspace, sid), "turn/close")[-1]["data"]["stopReason"] == "max-steps"


async def test_slash_commands_run_and_unknown_ones_are_bad_params(client, workspace):
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "/plan"))["stopReason"] == "end_turn"
    assert [u["currentModeId"] for u in client.of_kind("current_mode_update", sid)] == ["plan"]
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, "/teleport somewhere")
    assert err.value.code == -32602 and err.value.data["field"] == "prompt"
    assert "/plan" in err.value.message  # the known commands are listed


async def test_a_model_error_is_an_error_that_says_what_to_do(clients, monkeypatch, tmp_path):
    monkeypatch.setenv("DSHD_TEST_OPENAI_KEY", "sk-test-not-a-real-key")
    # The workspace's own [model] provider/baseUrl apply only to a trusted folder.
    user_config = tmp_path / "xdg"
    (user_config / "dsh").mkdir(parents=True)
    (user_config / "dsh" / "config.toml").write_text(f'[trust]\nfolders = ["{clients.workspace}"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user_config))
    write_workspace(clients.workspace, [])
    config = clients.workspace / ".dsh" / "config.toml"
    # Nothing listens on port 9: the call fails at once (connection refused).
    openai = (
        'provider = "openai"\nmodel = "test-model"\nbaseUrl = "http://127.0.0.1:9/v1"\n'
        'apiKeyEnv = "DSHD_TEST_OPENAI_KEY"\nmaxRetries = 0\ntimeoutS = 10\n'
    )
    config.write_text(config.read_text().replace('provider = "scripted"\nscript = "script.json"\n', openai))
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, "hello?")
    assert err.value.code == -32603
    assert err.value.data == {"kind": "model-error", "errorKind": "connection"}
    assert "could not reach" in err.value.message and "127.0.0.1:9" in err.value.message
    assert "sk-test" not in err.value.message + clients.stderr()
    close = of_type(read_log(clients.workspace, sid), "turn/close")[-1]["data"]
    assert close["stopReason"] == "model-error" and close["error"]["kind"] == "connection"
