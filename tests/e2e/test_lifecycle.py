"""LSP lifecycle of the real daemon: initialize, shutdown/exit codes, EOF, requests
before initialize, invalid config at initialize, and a stdout that carries nothing but
framed JSON-RPC (logs go to stderr).

Raw subprocesses (tests/e2e/raw_client.py) so that every byte in and out is ours to see.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from dshd_protocol import ERROR_CODES, METHODS, from_wire

from .conftest import make_lsp_client, write_workspace
from .raw_client import RawDaemon, log_events, split_frames
from dshd.client import DshClient

SERVER_NOT_INITIALIZED = -32002
INVALID_REQUEST = -32600


def test_initialize_declares_dsh_capability(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        reply = d.initialize()
        caps = reply["result"]["capabilities"]
        assert caps["experimental"]["dsh"] == {"version": 1, "questions": True, "permissions": True}
        assert reply["result"]["serverInfo"]["name"] == "dshd"
        assert d.shutdown_and_exit() == 0
        assert d.stdout_faults == []


async def test_initialize_through_pytest_lsp_client(workspace: Path) -> None:
    """The same answer seen by the pygls-based client the editors' tests use."""
    client = DshClient(lsp_factory=make_lsp_client)
    result = await client.start(workspace)
    try:
        assert result.capabilities.experimental["dsh"]["version"] == 1
        assert result.capabilities.experimental["dsh"]["questions"] is True
    finally:
        assert await client.stop() == 0


def test_shutdown_then_exit_is_exit_code_0(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {"title": "t"})
        assert d.request("shutdown") is None
        d.notify("exit")
        assert d.wait() == 0
        # The session was closed cleanly: its lock is free and the log is sound.
        events = log_events(workspace, created["sessionId"])
        assert events[0]["type"] == "session/start"


def test_exit_without_shutdown_is_exit_code_1(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        d.initialize()
        d.request("dsh/session/create", {})
        d.notify("exit")
        assert d.wait() == 1


def test_eof_is_exit_code_1(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {})
        d.close_stdin()
        assert d.wait() == 1
    # The daemon released the session on the way out: a new daemon opens it.
    with RawDaemon(workspace) as d2:
        d2.initialize()
        opened = d2.request("dsh/session/open", {"sessionId": created["sessionId"]})
        assert opened["sessionId"] == created["sessionId"]
        assert d2.shutdown_and_exit() == 0


def test_eof_before_initialize_is_exit_code_1(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        d.close_stdin()
        assert d.wait() == 1
        assert bytes(d.stdout_bytes) == b""


def test_dsh_request_before_initialize_is_server_not_initialized(workspace: Path) -> None:
    with RawDaemon(workspace) as d:
        for method in ("dsh/session/create", "dsh/session/list", "dsh/plan/get", "shutdown"):
            params = {"agentId": "a-0000000000000000"} if method == "dsh/plan/get" else {}
            reply = d.call(method, params)
            assert reply["error"]["code"] == SERVER_NOT_INITIALIZED, reply
        d.notify("initialized", {})  # a notification before initialize is dropped
        # Nothing was created, and the daemon still initializes and serves.
        assert not (workspace / ".dsh" / "sessions").exists() or not any((workspace / ".dsh" / "sessions").iterdir())
        assert "result" in d.initialize()
        assert d.request("dsh/session/list", {}) == {"sessions": []}
        assert d.shutdown_and_exit() == 0


CONFIG_CASES = [
    # (config.toml text after `plugins`, the key the error must name)
    ("[plan]\nsection = \"x\"\ncolour = \"red\"\n", "plan.colour"),
    ("[plan]\nsection = \"   \"\n", "plan.section"),
    ("[plan]\n", "plan.section"),
    ("[plan]\nsection = 7\n", "plan.section"),
    ("[goals]\nmaxRounds = \"12\"\n", "goals.maxRounds"),
    ("[goals]\nmaxRounds = 1.5\n", "goals.maxRounds"),
    ("telemetry = true\n", "telemetry"),
]


def _write_config(root: Path, body: str) -> None:
    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n' + body)


def _initialize_all(cases: list[tuple[Path, dict | None]]) -> list[tuple[RawDaemon, dict]]:
    """Start one daemon per case at once (start-up dominates: run them side by side),
    then initialize each; returns (daemon, initialize reply) in case order."""
    started = [(RawDaemon(root), options) for root, options in cases]
    try:
        return [(d, d.initialize(options=options)) for d, options in started]
    except BaseException:
        for d, _ in started:
            d.kill()
        raise


def _check_invalid_config(d: RawDaemon, reply: dict, key: str, root: Path, file: str) -> None:
    error = reply.get("error")
    assert error is not None, (key, reply)
    assert error["code"] == ERROR_CODES["invalid-config"], (key, error)
    assert error["data"] == {"kind": "invalid-config", "key": key, "file": file}, (key, error)
    # Not initialized: dsh/* stays refused, and nothing was written.
    assert d.call("dsh/session/create", {})["error"]["code"] == SERVER_NOT_INITIALIZED
    assert not (root / ".dsh" / "sessions").exists()


@pytest.mark.slow
def test_invalid_config_file_fails_initialize_naming_the_key(tmp_path: Path) -> None:
    roots = []
    for n, (body, _key) in enumerate(CONFIG_CASES):
        _write_config(tmp_path / f"ws{n}", body)
        roots.append(tmp_path / f"ws{n}")
    daemons = _initialize_all([(root, None) for root in roots])
    try:
        for (d, reply), root, (_body, key) in zip(daemons, roots, CONFIG_CASES):
            _check_invalid_config(d, reply, key, root, str(root / ".dsh" / "config.toml"))
    finally:
        for d, _ in daemons:
            d.kill()


OVERRIDE_CASES = [
    ({"plan": {"section": "x", "colour": "red"}}, "plan.colour"),
    ({"plan": {"section": ""}}, "plan.section"),
    ({"plan": {}}, "plan.section"),
    ({"plan": {"section": True}}, "plan.section"),
    ({"goals": {"maxRounds": "256"}}, "goals.maxRounds"),
    ({"model": {"provider": "scripted", "temperature": 0}}, "model.temperature"),
    ({"plugins": "plan"}, "plugins"),
    ({"unknownTable": {}}, "unknownTable"),
]


@pytest.mark.slow
def test_invalid_initialization_options_config_fails_initialize(tmp_path: Path) -> None:
    roots = [write_workspace(tmp_path / f"ws{n}") for n in range(len(OVERRIDE_CASES))]
    daemons = _initialize_all([(root, {"config": overrides}) for root, (overrides, _key) in zip(roots, OVERRIDE_CASES)])
    try:
        for (d, reply), root, (_overrides, key) in zip(daemons, roots, OVERRIDE_CASES):
            _check_invalid_config(d, reply, key, root, "initializationOptions.config")
    finally:
        for d, _ in daemons:
            d.kill()


async def test_invalid_config_through_pytest_lsp_client(workspace: Path) -> None:
    """An editor's client sees the same error as a JsonRpcException."""
    from pygls.exceptions import JsonRpcException

    client = DshClient(lsp_factory=make_lsp_client)
    with pytest.raises(JsonRpcException) as info:
        await client.start(workspace, config={"plan": {"section": "  "}})
    try:
        assert info.value.data["kind"] == "invalid-config"
        assert info.value.data["key"] == "plan.section"
    finally:
        await client.stop()


def test_stdout_is_only_framed_json_rpc_and_logs_go_to_stderr(workspace: Path) -> None:
    """A whole session at INFO logging (the daemon's chattiest): every byte on stdout
    is a Content-Length frame with a JSON-RPC 2.0 body; the log lines are on stderr."""
    write_workspace(
        workspace,
        replies=[
            {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": "# Plan\n\n1. do it\n"}}]},
            {"text": "planned"},
            {"text": "round one"},
        ],
    )
    with RawDaemon(workspace, log_level="DEBUG") as d:
        d.answer = lambda params: {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}
        d.initialize()
        agent = d.request("dsh/session/create", {"title": "noisy"})["agentId"]
        d.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
        assert d.request("dsh/agent/prompt", {"agentId": agent, "text": "plan it"})["stopReason"] == "end-turn"
        d.call("dsh/plan/set", {"agentId": agent, "active": "yes"})  # an error answer
        goal = d.request("dsh/goal/create", {"agentId": agent, "objective": "o", "maxRounds": 1})
        assert goal["phase"] == "active"
        d.send_bytes(b"Content-Length: 3\r\n\r\n{x}")  # a parse error answer
        d.request("dsh/session/list", {})
        assert d.shutdown_and_exit() == 0
    stdout = bytes(d.stdout_bytes)
    messages, faults, rest = split_frames(stdout)
    assert faults == [] and rest == b"" and d.stdout_faults == []
    assert len(messages) > 20  # results, errors, notifications, the questions request
    assert any(m.get("method") == "dsh/questions/ask" for m in messages)
    assert any(m.get("error", {}).get("code") == -32700 for m in messages)
    stderr = bytes(d.stderr_bytes).decode()
    assert "dshd INFO" in stderr and "dshd DEBUG" in stderr  # the logs went here
    assert "Content-Length:" not in stderr  # and no protocol frame did


def test_config_file_and_overrides_are_layered(workspace: Path) -> None:
    """`initializationOptions.config` overrides config.toml key by key: the goal budget
    comes from the override, not from the file's [goals] table."""
    write_workspace(workspace, extra_config="\n[goals]\nmaxRounds = 5\n")
    with RawDaemon(workspace) as d:
        assert "result" in d.initialize(options={"config": {"goals": {"maxRounds": 3}}})
        agent = d.request("dsh/session/create", {})["agentId"]
        goal = d.request("dsh/goal/create", {"agentId": agent, "objective": "o"})
        from_wire(METHODS["dsh/goal/create"].result, goal)
        assert goal["maxRounds"] == 3
        assert d.shutdown_and_exit() == 0


async def test_restart_after_a_crash_loads_disarmed_and_runs_nothing(workspace: Path, daemons) -> None:
    """SIGKILL the daemon inside a goal round; a new daemon closes the open turn as
    "interrupted", reports the goal active but disarmed, and starts nothing until the
    person resumes (G-7); then the rounds go on from the log's count."""
    write_workspace(workspace, replies=[{"text": "round 1 never ends", "delayMs": 60_000}])
    (workspace / "after.json").write_text(json.dumps({"replies": [{"text": "round 2"}]}))
    first = await daemons.start()
    created = await first.request("dsh/session/create", {"title": "crash"})
    agent, sid = created["agentId"], created["sessionId"]
    header = first.wait_for(
        lambda n: n["method"] == "dsh/session/event" and n["params"]["event"]["type"] == "request/header", 10
    )
    goal = await first.request("dsh/goal/create", {"agentId": agent, "objective": "survive", "maxRounds": 2})
    await header
    first.lsp._server.kill()
    assert await first.lsp._server.wait() != 0
    before = log_events(workspace, sid)
    assert before[-1]["type"] == "request/header"  # the turn is open in the log

    second = await daemons.start(config={"model": {"provider": "scripted", "script": "after.json"}})
    listed = await second.request("dsh/session/list", {})
    assert listed["sessions"][0]["goal"]["activation"] == "disarmed"
    opened = await second.request("dsh/session/open", {"sessionId": sid})
    from_wire(METHODS["dsh/session/open"].result, opened)
    assert opened["goal"]["phase"] == "active" and opened["goal"]["activation"] == "disarmed"
    assert opened["goal"]["revision"] == goal["revision"] and opened["goal"]["roundsStarted"] == 1
    after_open = log_events(workspace, sid)
    assert after_open[: len(before)] == before  # nothing acknowledged was lost
    assert [(e["type"], e["data"]) for e in after_open[len(before) :]] == [
        ("turn/close", {"turn": 1, "stopReason": "interrupted"})
    ]
    await asyncio.sleep(0.5)
    assert log_events(workspace, sid) == after_open  # nothing started by itself

    arm = second.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "arm", 5)
    blocked = second.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", 10)
    resumed = await second.request(
        "dsh/goal/resume", {"agentId": opened["agentId"], "ref": {"id": goal["id"], "revision": goal["revision"]}}
    )
    assert resumed["activation"] == "armed" and resumed["revision"] == goal["revision"]  # no durable change
    assert (await arm)["params"]["revision"] == goal["revision"]
    note = (await blocked)["params"]
    assert note["goal"]["roundsStarted"] == 2 and note["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    rounds = [e["data"]["goalRound"]["round"] for e in log_events(workspace, sid) if "goalRound" in e["data"]]
    assert rounds == [1, 2]


def test_second_initialize_is_refused_and_the_agents_stay_live(workspace: Path) -> None:
    """A second initialize must not replace the workspace under its live agents (their
    sessions would stay locked by this very process, their ids unknown)."""
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {})
        again = d.call("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}})
        assert again["error"]["code"] == INVALID_REQUEST
        assert d.request("dsh/plan/get", {"agentId": created["agentId"]}) == {"active": False}
        opened = d.request("dsh/session/open", {"sessionId": created["sessionId"]})
        assert opened["agentId"] == created["agentId"]
        assert d.shutdown_and_exit() == 0


def test_initialize_may_be_retried_after_it_failed(workspace: Path) -> None:
    """A failed initialize (bad config) initializes nothing: a retry with a good config works."""
    with RawDaemon(workspace) as d:
        failed = d.initialize(options={"config": {"goals": {"maxRounds": -1}}})
        assert failed["error"]["data"] == {
            "kind": "invalid-config", "key": "goals.maxRounds", "file": "initializationOptions.config",
        }
        assert "result" in d.initialize(options={"config": {"goals": {"maxRounds": 7}}})
        agent = d.request("dsh/session/create", {})["agentId"]
        d.request("dsh/goal/create", {"agentId": agent, "objective": "o"})
        assert d.request("dsh/goal/get", {"agentId": agent})["maxRounds"] == 7
        assert d.shutdown_and_exit() == 0


def test_requests_after_shutdown_are_invalid_request(workspace: Path) -> None:
    """LSP: after shutdown only exit; other requests get an error, not silence."""
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {})
        assert d.request("shutdown") is None
        for method, params in [("dsh/session/list", {}), ("dsh/plan/set", {"agentId": created["agentId"], "active": True})]:
            reply = d.call(method, params, timeout=5)
            assert reply["error"]["code"] == INVALID_REQUEST, reply
        d.notify("exit")
        assert d.wait() == 0
    assert [e["type"] for e in log_events(workspace, created["sessionId"])] == ["session/start"]


@pytest.mark.slow
def test_shutdown_during_a_slow_turn_exits_promptly_and_the_log_stays_sound(workspace: Path) -> None:
    write_workspace(workspace, replies=[{"text": "never arrives", "delayMs": 60_000}])
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {})
        d.send({"jsonrpc": "2.0", "id": "slow", "method": "dsh/agent/prompt",
                "params": {"agentId": created["agentId"], "text": "take your time"}})
        deadline = time.monotonic() + 10
        while not any(e["type"] == "request/header" for e in log_events(workspace, created["sessionId"])):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        started = time.monotonic()
        assert d.shutdown_and_exit() == 0
        assert time.monotonic() - started < 5  # did not wait for the model
    with RawDaemon(workspace) as d2:
        d2.initialize()
        d2.request("dsh/session/open", {"sessionId": created["sessionId"]})
        events = log_events(workspace, created["sessionId"])
        closes = [e["data"] for e in events if e["type"] == "turn/close"]
        # Closed once: at shutdown ("cancelled") or on the next load ("interrupted").
        assert len(closes) == 1 and closes[0]["turn"] == 1
        assert closes[0]["stopReason"] in ("cancelled", "interrupted")
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert d2.shutdown_and_exit() == 0


@pytest.mark.slow
def test_bad_initialization_options_are_invalid_params_naming_the_field(tmp_path: Path) -> None:
    cases = [
        ({"colour": 1}, "initializationOptions.colour"),
        ({"questionTimeoutMs": "5"}, "initializationOptions.questionTimeoutMs"),
        ({"questionTimeoutMs": 0}, "initializationOptions.questionTimeoutMs"),
        ({"config": "plan"}, "initializationOptions.config"),
        ({"trusted": "yes"}, "initializationOptions.trusted"),
        ({"trusted": 1}, "initializationOptions.trusted"),
    ]
    roots = [write_workspace(tmp_path / f"ws{n}") for n in range(len(cases))]
    started = _initialize_all([(root, options) for root, (options, _field) in zip(roots, cases)])
    try:
        for (d, reply), root, (_options, field) in zip(started, roots, cases):
            assert reply["error"]["code"] == ERROR_CODES["invalid-params"], reply
            assert reply["error"]["data"] == {"kind": "invalid-params", "field": field}
            assert d.call("dsh/session/list", {})["error"]["code"] == SERVER_NOT_INITIALIZED
    finally:
        for d, _ in started:
            d.kill()
    with RawDaemon(roots[0]) as d:
        reply = d.call("initialize", {"processId": None, "rootUri": "http://example.com/ws", "capabilities": {}})
        assert reply["error"]["data"] == {"kind": "invalid-params", "field": "rootUri"}


def test_workspace_root_from_workspace_folders(tmp_path: Path) -> None:
    """No rootUri: the first workspace folder is the workspace (not the daemon's cwd)."""
    folder = write_workspace(tmp_path / "folder")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    with RawDaemon(elsewhere) as d:
        reply = d.call("initialize", {
            "processId": None, "rootUri": None, "capabilities": {},
            "workspaceFolders": [{"uri": folder.as_uri(), "name": "folder"}],
        })
        assert "result" in reply, reply
        d.notify("initialized", {})
        created = d.request("dsh/session/create", {})
        assert log_events(folder, created["sessionId"])[0]["type"] == "session/start"
        assert not (elsewhere / ".dsh").exists()
        assert d.shutdown_and_exit() == 0


def test_exit_before_initialize_is_exit_code_1(workspace: Path) -> None:
    """LSP: exit may come without initialize; a refused shutdown does not count."""
    with RawDaemon(workspace) as d:
        assert d.call("shutdown")["error"]["code"] == SERVER_NOT_INITIALIZED
        d.notify("exit")
        assert d.wait() == 1


def test_stdin_from_a_regular_file(workspace: Path, tmp_path: Path) -> None:
    """stdin may be a file (epoll cannot poll files: the daemon reads it in a thread):
    a whole scripted conversation in, every answer out, exit code 0."""
    from dshd.client import dshd_command

    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "dsh/session/create", "params": {"title": "from a file"}},
        {"jsonrpc": "2.0", "id": 3, "method": "dsh/session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    script = tmp_path / "stdin.bin"
    script.write_bytes(b"".join(
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body) for body in (json.dumps(m).encode() for m in messages)
    ))
    with script.open("rb") as stdin:
        done = subprocess.run(dshd_command(), stdin=stdin, capture_output=True, cwd=workspace, timeout=30)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    replies, faults, rest = split_frames(done.stdout)
    assert faults == [] and rest == b""
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[3]["result"]["sessions"][0]["title"] == "from a file"


def test_a_write_pipelined_with_shutdown_takes_effect(workspace: Path) -> None:
    """An editor closing sends its last change and shutdown back to back (one write):
    the change is answered and durable, not cancelled."""
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {})
        frames = b"".join(
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            for body in (
                json.dumps({"jsonrpc": "2.0", "id": "last", "method": "dsh/plan/set",
                            "params": {"agentId": created["agentId"], "active": True}}).encode(),
                json.dumps({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}).encode(),
            )
        )
        d.send_bytes(frames)
        replies = {r["id"]: r for r in (d.next_response(), d.next_response())}  # in any order
        assert replies["last"]["result"]["outcome"] == "committed"
        assert replies["bye"]["result"] is None
        d.notify("exit")
        assert d.wait() == 0
    assert [e["data"] for e in log_events(workspace, created["sessionId"]) if e["type"] == "plan/mode"] == [{"active": True}]
