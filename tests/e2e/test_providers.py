"""Real providers end to end: the real `dshd` over stdio with `provider = "openai"` and
`"anthropic"`, talking through the official SDKs to loopback servers that speak each
API's streaming format (tests/loopback_models.py).

The model config comes through `initializationOptions.config` (the editor's settings,
the person's own), the key through the environment variable it names.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path

import pytest
from loopback_models import Call, Cut, Failure, Hang, LoopbackModelServer, Raw, Reply
from lsprotocol import types

from dshd.client import DshClient

from .conftest import PLAN_SECTION
from .support import of_type, read_log

KEY_ENV = "DSHD_E2E_MODEL_KEY"
KEY = "sk-e2e-" + secrets.token_hex(20)
PLAN = "# Plan: add a cache\n\n1. Wrap the parser\n2. Test it\n"


@pytest.fixture(params=["openai", "anthropic"])
def server(request):
    with LoopbackModelServer(request.param) as loopback:
        yield loopback


@pytest.fixture
def openai_server():
    with LoopbackModelServer("openai") as loopback:
        yield loopback


def model_config(server: LoopbackModelServer, **model) -> dict:
    return {
        "model": {
            "provider": server.provider,
            "model": "loopback-model",
            "baseUrl": server.base_url,
            "apiKeyEnv": KEY_ENV,
            "timeoutS": 10,
            "maxRetries": 2,
            **model,
        }
    }


def bare_workspace(root: Path, plugins: list[str] | None = None) -> None:
    """No [model] table in the file: the provider comes from the editor's settings."""
    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    plugin_list = json.dumps(plugins if plugins is not None else ["plan", "goals"])
    (root / ".dsh" / "config.toml").write_text(f'plugins = {plugin_list}\n\n[plan]\nsection = "{PLAN_SECTION}"\n')


async def start(daemons, server: LoopbackModelServer, *, answer=None, plugins=None, **model) -> DshClient:
    bare_workspace(daemons.root, plugins)
    return await daemons.start(answer=answer, config=model_config(server, **model), env={KEY_ENV: KEY})


async def new_session(client: DshClient) -> tuple[str, str]:
    created = await client.request("dsh/session/create", {})
    return created["agentId"], created["sessionId"]


def deltas(client: DshClient, kind: str | None = None) -> list[dict]:
    return [
        n["params"] for n in client.notifications
        if n["method"] == "dsh/agent/delta" and (kind is None or n["params"]["kind"] == kind)
    ]  # fmt: skip


def approve(params: dict) -> dict:
    return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}


def last_close(root: Path, sid: str) -> dict:
    return of_type(read_log(root, sid), "turn/close")[-1]["data"]


# ---- turns that work -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_providers_tool_calling_turn(daemons, server) -> None:
    server.script(
        Reply("Reading the file.", [Call("read_file", {"path": "src/a.py"})]),
        Reply("All done."),
    )
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "look at a.py"})
    assert result == {"turn": 1, "stopReason": "end-turn"}

    events = read_log(daemons.root, sid)
    assert [e["data"]["text"] for e in of_type(events, "assistant/message")] == ["Reading the file.", "All done."]
    (call,) = of_type(events, "tool/call")
    call_id = "call_0" if server.provider == "openai" else "toolu_0"
    assert call["data"] == {"callId": call_id, "name": "read_file", "arguments": {"path": "src/a.py"}}
    (result_event,) = of_type(events, "tool/result")
    assert result_event["data"]["callId"] == call_id and result_event["data"]["ok"] is False  # no such tool here

    # The live pieces added up to what the log holds.
    step1 = [d for d in deltas(client) if d["step"] == 1]
    assert "".join(d["text"] for d in step1 if d["kind"] == "text") == "Reading the file."
    assert json.loads("".join(d["text"] for d in step1 if d["kind"] == "tool-arguments")) == {"path": "src/a.py"}
    assert {d["callId"] for d in step1 if d["kind"] == "tool-arguments"} == {call_id}

    # The second request carried the call and its failed result, in the provider's own shape.
    first, second = server.wait_requests(2)
    if server.provider == "openai":
        assert first.path == "/v1/chat/completions" and first.headers["authorization"] == f"Bearer {KEY}"
        assert first.json["stream"] is True and first.json["stream_options"] == {"include_usage": True}
        assert second.json["messages"][-2]["tool_calls"][0]["id"] == call_id
        tool_message = second.json["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call_id
        assert tool_message["content"].startswith("[tool failed] unknown tool 'read_file'")
    else:
        assert first.path == "/v1/messages"
        assert KEY in (first.headers.get("x-api-key"), first.headers.get("authorization", "").removeprefix("Bearer "))
        assert first.json["stream"] is True and first.json["max_tokens"] == 8192
        (block,) = second.json["messages"][-1]["content"]
        assert (block["type"], block["tool_use_id"], block["is_error"]) == ("tool_result", call_id, True)
    assert first.size > 0 and second.size > first.size


@pytest.mark.slow
async def test_providers_plan_mode_exit_plan_reviewed_and_approved(daemons, server) -> None:
    server.script(Reply("Here is my plan.", [Call("exit_plan_mode", {"plan": PLAN})]), Reply("Starting on step 1."))
    client = await start(daemons, server, answer=approve)
    agent, sid = await new_session(client)
    await client.request("dsh/plan/set", {"agentId": agent, "active": True})
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "add a cache"})
    assert result["stopReason"] == "end-turn"
    assert (await client.request("dsh/plan/get", {"agentId": agent}))["active"] is False

    events = read_log(daemons.root, sid)
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True, False]
    assert of_type(events, "tool/result")[0]["data"]["ok"] is True
    first, second = server.wait_requests(2)
    if server.provider == "openai":
        system, tools = first.json["messages"][0]["content"], [t["function"]["name"] for t in first.json["tools"]]
        second_system = second.json["messages"][0]["content"]
    else:
        system, tools = first.json["system"], [t["name"] for t in first.json["tools"]]
        second_system = second.json["system"]
    assert PLAN_SECTION in system and "exit_plan_mode" in tools
    assert PLAN_SECTION not in second_system  # approved: the next request is out of plan mode


@pytest.mark.slow
async def test_providers_goal_round_completes_the_goal(daemons, openai_server) -> None:
    openai_server.script(Reply("Finished it.", [Call("goal_complete", {})]), Reply("The goal is complete."))
    client = await start(daemons, openai_server)
    agent, sid = await new_session(client)
    done = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "complete")
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "ship the cache", "maxRounds": 3})
    assert goal["phase"] == "active"
    note = await done
    assert note["params"]["goal"]["phase"] == "complete" and note["params"]["goal"]["roundsStarted"] == 1
    first = openai_server.wait_requests(1)[0]
    messages = first.json["messages"]
    # The round's user message ends the history; the goal's moving status comes after it,
    # as the last system message, so the prefix before it stays cacheable.
    assert messages[-1]["role"] == "system" and "Rounds: 1 of 3 started" in messages[-1]["content"]
    assert messages[-2]["role"] == "user" and "ship the cache" in messages[-2]["content"]


@pytest.mark.slow
async def test_providers_openai_each_chunk_is_one_delta_in_order(daemons, openai_server) -> None:
    """The adapter reads the SDK's chunks as the JSON the server sent (no typed objects):
    every piece still goes out as its own delta, in the stream's order, any text included."""
    text = "Plain, then ünïcödé, 漢字 and 🙂 — the\u2028end."
    openai_server.script(Reply(text, piece=3))
    client = await start(daemons, openai_server)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "end-turn"
    assert [d["text"] for d in deltas(client, "text")] == [text[i:i + 3] for i in range(0, len(text), 3)]
    assert [e["data"]["text"] for e in of_type(read_log(daemons.root, sid), "assistant/message")] == [text]
    (header,) = of_type(read_log(daemons.root, sid), "request/header")
    assert {(d["turn"], d["step"]) for d in deltas(client)} == {(header["turn"], header["data"]["step"])}


@pytest.mark.slow
async def test_providers_openai_error_inside_the_stream_is_a_server_error(daemons, openai_server) -> None:
    """OpenRouter and some proxies report a failure as a chunk ``{"error": ...}`` in a 200
    stream: the turn ends with kind server and the provider's words; the text streamed
    before it went out as deltas and nothing is logged or retried."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Half a "}, "finish_reason": None}]}  # fmt: skip
    error = {"error": {"message": "upstream provider overloaded", "code": 502}}
    openai_server.script(Raw([f"data: {json.dumps(chunk)}\n\n", f"data: {json.dumps(error)}\n\n"]))
    client = await start(daemons, openai_server)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "model-error"
    close = last_close(daemons.root, sid)
    assert close["error"]["kind"] == "server" and "upstream provider overloaded" in close["error"]["message"]
    assert [d["text"] for d in deltas(client, "text")] == ["Half a "]
    assert of_type(read_log(daemons.root, sid), "assistant/message") == []
    assert len(openai_server.requests) == 1  # output had gone out: never retried


# ---- retries and errors -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_providers_429_then_success_sends_a_retry_delta(daemons, server) -> None:
    server.script(Failure(429, headers={"retry-after": "0.2"}), Reply("Made it."))
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"})
    assert result["stopReason"] == "end-turn"
    (retry,) = deltas(client, "retry")
    assert (retry["attempt"], retry["delayMs"], retry["step"]) == (2, 200, 1)
    assert len(server.wait_requests(2)) == 2
    assert server.requests[1].received_at - server.requests[0].received_at >= 0.2  # Retry-After honoured
    assert [e["data"]["text"] for e in of_type(read_log(daemons.root, sid), "assistant/message")] == ["Made it."]
    # The retry delta came before the text of the attempt that worked.
    kinds = [d["kind"] for d in deltas(client)]
    assert kinds[0] == "retry" and set(kinds[1:]) == {"text"}


@pytest.mark.slow
async def test_providers_gives_up_after_max_retries(daemons, openai_server) -> None:
    openai_server.script(*[Failure(503, body="upstream unavailable", headers={"retry-after": "0"})] * 3)
    client = await start(daemons, openai_server, maxRetries=1)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "model-error"
    assert len(openai_server.requests) == 2  # maxRetries + 1 attempts
    error = last_close(daemons.root, sid)["error"]
    assert error["kind"] == "server" and "503" in error["message"] and "upstream unavailable" in error["message"]
    assert [d["attempt"] for d in deltas(client, "retry")] == [2]


@pytest.mark.slow
async def test_providers_401_ends_the_turn_with_an_auth_error_and_no_retry(daemons, server) -> None:
    server.script(Failure(401, message=f"Incorrect API key provided: {KEY[:8]}...{KEY[-4:]}"), Reply("never"))
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"})
    assert result == {"turn": 1, "stopReason": "model-error"}
    close = last_close(daemons.root, sid)
    assert close["error"]["kind"] == "auth" and KEY_ENV in close["error"]["message"]
    assert len(server.requests) == 1 and deltas(client, "retry") == []
    # The close reached the editor with its error.
    sent = [n["params"]["event"] for n in client.notifications if n["method"] == "dsh/session/event"]
    assert sent[-1]["type"] == "turn/close" and sent[-1]["data"]["error"] == close["error"]


async def test_providers_missing_key_is_an_auth_error_naming_the_variable(daemons) -> None:
    """Not set, and the server is not on this machine: nothing is sent, the person is told
    which variable to set. (The daemon starts all the same: the key is read per call.)"""
    bare_workspace(daemons.root)
    config = {"model": {"provider": "openai", "model": "gpt-test", "apiKeyEnv": "DSHD_E2E_UNSET_KEY", "maxRetries": 0}}
    client = await daemons.start(config=config)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "model-error"
    error = last_close(daemons.root, sid)["error"]
    assert error["kind"] == "auth" and "DSHD_E2E_UNSET_KEY is not set" in error["message"]


@pytest.mark.slow
async def test_providers_cut_stream_is_a_model_error_and_nothing_half_parsed_is_logged(daemons, server) -> None:
    server.script(Cut(Reply("This reply is cut off in the middle of a sentence.", piece=6), after=6))
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "model-error"
    events = read_log(daemons.root, sid)
    assert of_type(events, "assistant/message") == [] and of_type(events, "tool/call") == []
    assert last_close(daemons.root, sid)["error"]["kind"] == "connection"
    assert deltas(client, "text"), "some text streamed before the cut"
    assert len(server.requests) == 1  # output had gone out: never retried


@pytest.mark.slow
async def test_providers_malformed_stream_is_bad_response(daemons, openai_server) -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                                 "function": {"name": "read_file", "arguments": "[1, 2]"}}]},
                          "finish_reason": "tool_calls"}]}  # fmt: skip
    openai_server.script(Raw([f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"]), Raw(["data: {not json\n\n"]))
    client = await start(daemons, openai_server, maxRetries=0)
    agent, sid = await new_session(client)
    for turn in (1, 2):
        result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"})
        assert result == {"turn": turn, "stopReason": "model-error"}
        assert last_close(daemons.root, sid)["error"]["kind"] == "bad-response"
    assert of_type(read_log(daemons.root, sid), "tool/call") == []


@pytest.mark.slow
async def test_providers_hung_server_times_out(daemons, server) -> None:
    server.script(Hang())
    client = await start(daemons, server, timeoutS=0.5, maxRetries=0)
    agent, sid = await new_session(client)
    started = time.monotonic()
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "model-error"
    # Not forever (the first call also imports the SDK, slow on a loaded machine).
    assert 0.5 <= time.monotonic() - started < 60
    error = last_close(daemons.root, sid)["error"]
    assert error["kind"] == "timeout" and "timeoutS" in error["message"]


# ---- cancellation closes the HTTP stream at once ------------------------------------------------------

SLOW = Reply("word " * 200, piece=5, chunk_delay=0.05)  # ~10 s if nobody stops it


async def _streaming(daemons, server):
    server.script(SLOW)
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    first = client.wait_for(lambda n: n["method"] == "dsh/agent/delta" and n["params"]["kind"] == "text")
    return client, agent, sid, first


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cancel", "cancelRequest", "close", "shutdown"])
async def test_providers_cancel_mid_stream_drops_the_connection_within_100ms(daemons, openai_server, how) -> None:
    client, agent, sid, first = await _streaming(daemons, openai_server)
    protocol = client.lsp.protocol
    prompt = protocol.send_request("dsh/agent/prompt", {"agentId": agent, "text": "write a lot"}, msg_id="prompt-1")
    await first
    sent = time.monotonic()
    if how == "cancel":
        await client.request("dsh/agent/cancel", {"agentId": agent})
    elif how == "cancelRequest":
        protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="prompt-1"))
    elif how == "close":
        await client.request("dsh/session/close", {"agentId": agent})
    else:
        await asyncio.wait_for(protocol.send_request_async(types.SHUTDOWN, None), 10)
    closed = await openai_server.await_closed(0)
    assert closed - sent < 0.1, f"the server saw the connection close {1000 * (closed - sent):.0f} ms after {how}"
    assert not openai_server.requests[0].finished
    if how in ("cancel", "cancelRequest"):
        if how == "cancel":
            assert (await asyncio.wait_for(asyncio.wrap_future(prompt), 10))["stopReason"] == "cancelled"
        await asyncio.sleep(0.1)
        assert last_close(daemons.root, sid)["stopReason"] == "cancelled"
        assert of_type(read_log(daemons.root, sid), "assistant/message") == []


@pytest.mark.slow
async def test_providers_anthropic_cancel_mid_stream(daemons) -> None:
    with LoopbackModelServer("anthropic") as server:
        client, agent, sid, first = await _streaming(daemons, server)
        prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "write a lot"}))
        await first
        sent = time.monotonic()
        await client.request("dsh/agent/cancel", {"agentId": agent})
        assert (await server.await_closed(0)) - sent < 0.1
        assert (await prompt)["stopReason"] == "cancelled"


# ---- the key never leaks -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_providers_the_key_never_appears_in_log_notifications_errors_or_stderr(tmp_path: Path) -> None:
    """A key-echoing 401 body, a 500 quoting the key, a mid-stream error quoting it and a
    normal turn, with every log level on: the key's value is nowhere."""
    import os

    root = tmp_path / "ws"
    bare_workspace(root)
    with LoopbackModelServer("openai") as server:
        server.script(
            Failure(401, message=f"Incorrect API key provided: {KEY}"),
            Failure(500, body=f"internal error for key {KEY}", headers={"retry-after": "0"}),
            Failure(500, message=f"still failing for {KEY}", headers={"retry-after": "0"}),
            Failure(500, message=f"and again {KEY}", headers={"retry-after": "0"}),
            Reply("fine", [Call("read_file", {"path": KEY[:3]})]),
            Reply("done"),
        )
        client = DshClient()  # pygls's own client: the daemon's stderr stays readable here
        env = {**os.environ, KEY_ENV: KEY, "DSHD_LOG_LEVEL": "DEBUG", "DSHD_CLIENT_LOG_LEVEL": "DEBUG"}
        logs: list[str] = []
        client.lsp.protocol.fm.features["window/logMessage"] = lambda params: logs.append(params.message)
        await client.start(root, config=model_config(server), env=env)
        agent, sid = await new_session(client)
        for _ in range(3):
            await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"})
        process = client.lsp._server
        await client.stop()
        stderr = (await process.stderr.read()).decode("utf-8", "replace")
    assert len(server.requests) == 6
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was used...
    closes = of_type(read_log(root, sid), "turn/close")
    assert [c["data"]["stopReason"] for c in closes] == ["model-error", "model-error", "end-turn"]
    assert "[redacted]" in closes[1]["data"]["error"]["message"]
    on_disk = "".join(p.read_text(errors="replace") for p in (root / ".dsh").rglob("*") if p.is_file())
    everything = {
        "files under .dsh": on_disk,
        "notifications": json.dumps(client.notifications),
        "window/logMessage": "\n".join(logs),  # the editor's output panel
        "stderr": stderr,
    }
    assert "model error" in stderr and any("model error" in line for line in logs)  # logged, without the key
    for where, text in everything.items():
        assert KEY not in text, f"the API key leaked into {where}"


# ---- SDKs are imported only when their provider is used -------------------------------------------------

# `dshd serve` itself, in a Python that writes the modules it loaded when it exits.
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: open(sys.argv[1], 'w').write('\\n'.join(sorted(sys.modules))))\n"
    "from dshd.cli import main\n"
    "sys.exit(main(['serve']))\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["scripted", "openai"])
async def test_providers_sdks_load_only_when_their_provider_is_used(tmp_path: Path, openai_server, provider) -> None:
    import os
    import sys

    root = tmp_path / "ws"
    bare_workspace(root)
    modules = tmp_path / "modules.txt"
    config = {"model": {"provider": "scripted"}} if provider == "scripted" else model_config(openai_server)
    client = DshClient()
    await client.start(root, config=config, env={**os.environ, KEY_ENV: KEY}, command=[sys.executable, "-c", PROBE, str(modules)])
    agent, _ = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "end-turn"
    await client.stop()
    loaded = {name.split(".")[0] for name in modules.read_text().split()}
    assert "dshd" in loaded and "msgspec" in loaded  # the probe saw the daemon
    assert "pygls" not in loaded  # the daemon speaks JSON-RPC itself
    if provider == "scripted":
        assert not loaded & {"openai", "anthropic", "httpx2", "httpx"}
    else:
        assert "openai" in loaded and "anthropic" not in loaded
