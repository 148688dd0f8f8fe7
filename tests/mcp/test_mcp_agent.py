"""MCP servers in a real in-process agent (X-2, X-3, X-5, X-6), against the small server
of tests/fixtures/mcp_servers/toy.py (the official SDK's MCPServer): tools listed and
called, approvals by annotations and by ``approve``, a hung tool timed out, a crash
reported once while the rest works, start-up failures, a streamable HTTP server (and one
whose process is killed), an untrusted ``.mcp.json`` not
started, ACP's servers added after the first request, a server's tool list that changes
mid-session (instant.py --changing), and no process left after close.
The scripted model makes the calls; the store, folds, log and servers are the real ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from agent_support import events_of, log_path, replay_strict, until
from mcp_agent_support import call, changing, offered, results, servers_of, workspace
from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from dshd.mcp.config import specs_from_acp

TOY = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "toy.py")


def toy(marker: Path, **keys) -> dict:
    """A [mcp.servers] entry for the toy server writing its pid to ``marker``."""
    extra = keys.pop("args", [])
    return {"command": sys.executable, "args": [TOY, "--marker", str(marker), *extra], **keys}


def processes_naming(marker: Path) -> list[int]:
    """Live (not zombie) processes whose command line names ``marker`` (sandboxed or not)."""
    found = []
    needle = str(marker).encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if needle not in Path(entry.path, "cmdline").read_bytes():
                continue
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :].split()[0] != b"Z":
            found.append(int(entry.name))
    return found


async def test_tools_are_listed_called_and_approved_by_annotations_and_approve(tmp_path):
    approvals = InProcessApprovals(lambda request: ApprovalAnswer("allow-once"))
    replies = [
        {
            "toolCalls": [
                call("mcp__toy__look", what="the sky"),  # readOnlyHint: read, not asked
                call("mcp__toy__wipe", target="x"),  # destructiveHint: exec, asked
                call("mcp__toy__plain", text="hi"),  # unannotated: exec, asked
                call("mcp__never__wipe", target="y"),  # approve = "never": not asked
                call("mcp__always__look"),  # approve = "always": asked, even a read
                call("mcp__toy__picture"),
                call("mcp__toy__oops"),
            ]
        },
        {"text": "done"},
    ]
    ws = workspace(
        tmp_path,
        replies,
        {
            "toy": toy(tmp_path / "toy.pid", sandbox="none"),
            "never": toy(tmp_path / "never.pid", sandbox="none", approve="never", tools=["wipe"]),
            "always": toy(tmp_path / "always.pid", sandbox="none", approve="always", disabledTools=["wipe"]),
        },
        approvals=approvals,
    )
    agent = ws.create_session()
    try:
        end = await agent.prompt("use the tools")
        assert end.stop_reason == "end-turn"
        header = events_of(agent, "request/header")[0].data
        offered = [name for name in header.tools if name.startswith("mcp__")]
        assert "mcp__toy__look" in offered and "mcp__toy__sleep_forever" in offered
        assert [n for n in offered if n.startswith("mcp__never__")] == ["mcp__never__wipe"]
        assert "mcp__always__wipe" not in offered and "mcp__always__look" in offered
        asked = [(r.tool, r.mutability) for r in approvals.asked]
        assert asked == [
            ("mcp__toy__wipe", "exec"),
            ("mcp__toy__plain", "exec"),
            ("mcp__always__look", "read"),
            ("mcp__toy__picture", "exec"),
            ("mcp__toy__oops", "exec"),
        ]
        assert [
            (True, "looked at the sky"),
            (True, "wiped x"),
            (True, "plain: hi"),
            (True, "wiped y"),
            (True, "looked at here"),
            (True, "a picture:\n[image part: image/png, 6 bytes, not shown]"),
        ][:6] == results(agent)[:6]
        oops = results(agent)[6]
        assert not oops[0] and oops[1].startswith("Error executing tool oops")
        decisions = [(e.data.tool, e.data.by) for e in events_of(agent, "permission/decision")]
        assert ("mcp__never__wipe", "policy") in decisions
        described = agent.tools.describe("mcp__toy__look", {"what": "x"})
        assert (described.title, described.kind) == ("Look around · toy", "read")
        assert agent.tools.describe("mcp__toy__wipe", {}).kind == "other"
        states = {s.name: s for s in servers_of(agent).states()}
        assert {s.state for s in states.values()} == {"ready"}
        assert states["toy"].transport == "stdio" and states["toy"].source == "user"
        assert not events_of(agent, "mcp/server")
    finally:
        await agent.aclose()


async def test_a_hung_tool_times_out_and_its_server_is_gone_for_the_session(tmp_path):
    marker = tmp_path / "toy.pid"
    replies = [
        {"toolCalls": [call("mcp__toy__sleep_forever"), call("mcp__toy__look")]},
        {"toolCalls": [call("mcp__toy__look")]},
        {"text": "done"},
    ]
    ws = workspace(tmp_path, replies, {"toy": toy(marker, sandbox="none", toolTimeoutS=0.5)})
    agent = ws.create_session()
    told = []
    servers_of(agent).add_listener(told.append)
    try:
        await agent.prompt("go")
        got = results(agent)
        assert not got[0][0] and "did not answer this sleep_forever call within 0.5 s" in got[0][1]
        assert got[1] == got[2] and not got[1][0] and "failed (hung" in got[1][1]
        headers = events_of(agent, "request/header")
        assert "mcp__toy__look" in headers[0].data.tools
        assert not [n for n in headers[1].data.tools if n.startswith("mcp__")]
        failed = events_of(agent, "mcp/server")
        assert len(failed) == 1 and failed[0].data.name == "toy" and failed[0].data.reason.startswith("hung")
        assert [(s.name, s.state) for s in told] == [("toy", "failed")]
        assert servers_of(agent).states()[0].tools == ()
        assert replay_strict(log_path(agent)).seq == agent.store.state.seq  # the log stays sound
        await until(lambda: not processes_naming(marker), 5)
    finally:
        await agent.aclose()


async def test_a_crash_is_reported_once_the_other_server_works_and_close_leaves_no_process(tmp_path):
    replies = [
        {"toolCalls": [call("mcp__toy__crash")]},
        {"toolCalls": [call("mcp__toy__look"), call("mcp__other__look", what="it")]},
        {"text": "done"},
    ]
    markers = [tmp_path / "toy.pid", tmp_path / "other.pid"]
    servers = {"toy": toy(markers[0], sandbox="none"), "other": toy(markers[1], sandbox="none")}
    ws = workspace(tmp_path, replies, servers)
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        got = results(agent)
        assert not got[0][0]
        assert not got[1][0] and "MCP server toy" in got[1][1]
        assert got[2] == (True, "looked at it")
        failed = events_of(agent, "mcp/server")
        assert [e.data.name for e in failed] == ["toy"]
        assert "exited" in failed[0].data.reason or "connection" in failed[0].data.reason
        # its last words on stderr, read even when its exit was seen first
        assert failed[0].data.reason.endswith("its last words on stderr: toy: crashing on purpose"), failed[0].data.reason
        assert {s.name: s.state for s in servers_of(agent).states()} == {"toy": "failed", "other": "ready"}
        assert processes_naming(markers[1])
        ws.close(agent.agent_id)  # synchronous, as a door closes a session: the trees are killed now
        await until(lambda: not any(processes_naming(m) for m in markers), 5)
        # stopping is not failing: nothing more was reported
        assert {s.name: s.state for s in servers_of(agent).states()} == {"toy": "failed", "other": "stopped"}
    finally:
        await agent.aclose()


async def test_servers_that_cannot_start_are_failed_and_the_turn_goes_on(tmp_path):
    replies = [{"text": "fine"}]
    servers = {
        "missing": {"command": str(tmp_path / "no-such-program"), "sandbox": "none"},
        "silent": {"command": "sleep", "args": ["30"], "sandbox": "none", "startupTimeoutS": 0.5},
        "nowhere": {"command": "true", "cwd": "no-such-folder", "sandbox": "none"},
        "off": {"command": "true", "enabled": False},
    }
    ws = workspace(tmp_path, replies, servers)
    agent = ws.create_session()
    try:
        end = await agent.prompt("hello")
        assert end.stop_reason == "end-turn"
        states = {s.name: s for s in servers_of(agent).states()}
        assert {n: s.state for n, s in states.items()} == {
            "missing": "failed", "silent": "failed", "nowhere": "failed", "off": "stopped"
        }
        assert states["missing"].reason.startswith("could not start")
        assert "did not start within 0.5 s" in states["silent"].reason
        assert "no-such-folder is not a folder" in states["nowhere"].reason
        assert sorted(e.data.name for e in events_of(agent, "mcp/server")) == ["missing", "nowhere", "silent"]
    finally:
        await agent.aclose()


async def test_an_untrusted_mcp_json_starts_nothing_and_acp_servers_join_later(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    marker = tmp_path / "from-the-repo.pid"
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": toy(marker)}}))
    replies = [{"text": "first"}, {"toolCalls": [call("mcp__late__look", what="late")]}, {"text": "done"}]
    ws = workspace(tmp_path, replies, {})
    agent = ws.create_session()
    try:
        await agent.prompt("first")
        assert servers_of(agent).states() == [] and not marker.exists()
        late = tmp_path / "late.pid"
        acp = specs_from_acp([{"name": "late", "command": sys.executable, "args": [TOY, "--marker", str(late)], "env": []}])
        # sandboxed as every ACP server is, unless the machine cannot build one
        servers_of(agent).add(acp, "acp")
        await agent.prompt("second")
        state = servers_of(agent).states()[0]
        assert state.source == "acp"
        if state.state == "ready":
            assert results(agent) == [(True, "looked at late")]
        else:
            assert "no sandbox can be built" in (state.reason or "")
    finally:
        await agent.aclose()
    assert not marker.exists()


@pytest.mark.sandbox
async def test_a_stdio_server_runs_in_the_sandbox_with_its_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DSHD_TEST_SECRET", "not for servers")
    home_file = Path.home() / f".dshd-mcp-test-{os.getpid()}"
    marker = tmp_path / "ws" / "toy.pid"  # inside the workspace: writable
    replies = [
        {"toolCalls": [call("mcp__toy__where"), call("mcp__toy__variable", name="DSHD_TEST_SECRET")]},
        {"text": "done"},
    ]
    ws = workspace(tmp_path, replies, {"toy": toy(marker, args=["--write", str(home_file)], env={"TOY_VALUE": "v1"})})
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        state = servers_of(agent).states()[0]
        assert state.state == "ready", state.reason
        pid, wrote = marker.read_text().split("\n")[:2]
        assert pid == "2"  # its own PID namespace
        assert wrote == "write failed 30"  # EROFS outside the workspace
        assert not home_file.exists()
        assert results(agent) == [(True, f"{(tmp_path / 'ws').resolve()} v1"), (True, "-")]
    finally:
        await agent.aclose()
    await until(lambda: not processes_naming(marker), 5)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_a_streamable_http_server_is_called_and_a_missing_token_fails_it(tmp_path):
    port = _free_port()
    served = await asyncio.create_subprocess_exec(
        sys.executable, TOY, "--http", str(port), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        async def listening() -> bool:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            writer.close()
            return True

        for _ in range(200):
            if await listening():
                break
            await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        servers = {
            "web": {"url": url, "headers": {"X-Team": "a"}},
            "locked": {"url": url, "bearerTokenEnv": "DSHD_TEST_NO_SUCH_TOKEN"},
        }
        ws = workspace(tmp_path, [{"toolCalls": [call("mcp__web__look", what="the web")]}, {"text": "done"}], servers)
        agent = ws.create_session()
        try:
            await agent.prompt("go")
            states = {s.name: s for s in servers_of(agent).states()}
            assert states["web"].state == "ready" and states["web"].transport == "http"
            assert results(agent) == [(True, "looked at the web")]
            assert states["locked"].state == "failed"
            assert "DSHD_TEST_NO_SUCH_TOKEN is not set" in (states["locked"].reason or "")
        finally:
            await agent.aclose()
    finally:
        served.kill()
        await served.wait()


async def serve_toy_http() -> tuple[int, asyncio.subprocess.Process]:
    """tests/fixtures/mcp_servers/toy_http.py on a free port, once it listens."""
    port = _free_port()
    return port, await serve_toy_http_at(port)


async def test_an_http_server_whose_process_is_killed_is_failed_once_at_the_next_call(tmp_path):
    """A streamable HTTP server has no process of dshd's to watch: the call that finds its
    connection refused fails saying so, and the server is failed as a dead stdio server is
    (tools withdrawn, one mcp/server event, listeners told once, later calls refused).
    Control: a JSON-RPC error with the very code the SDK gives a closed connection, from a
    server that still answers, stays a failed result and the server stays ready."""
    port, served = await serve_toy_http()
    try:
        replies = [
            {"toolCalls": [call("mcp__web__look", what="the web"), call("mcp__web__closed_error")]},
            {"text": "first"},
            {"toolCalls": [call("mcp__web__look", what="nothing")]},
            {"toolCalls": [call("mcp__web__look", what="still nothing")]},
            {"text": "done"},
        ]
        ws = workspace(tmp_path, replies, {"web": {"url": f"http://127.0.0.1:{port}/mcp", "toolTimeoutS": 10}})
        agent = ws.create_session()
        told = []
        servers_of(agent).add_listener(told.append)
        try:
            await agent.prompt("first")
            [looked, said_closed] = results(agent)
            assert looked == (True, "looked at the web")
            assert not said_closed[0] and "answered the closed_error call with an error: Connection closed" in said_closed[1]
            [state] = servers_of(agent).states()
            assert state.state == "ready" and "mcp__web__look" in state.tools
            assert not events_of(agent, "mcp/server") and not told

            served.kill()
            await served.wait()
            started = asyncio.get_running_loop().time()
            await agent.prompt("second")
            assert asyncio.get_running_loop().time() - started < 5  # no wait for toolTimeoutS
            [lost, refused] = results(agent)[2:]
            assert not lost[0] and "Not finished: the MCP server web failed (its connection was lost: ConnectError" in lost[1]
            assert not refused[0] and "the MCP server web failed (its connection was lost" in refused[1]
            assert "its tools are gone for this session" in refused[1]
            [state] = servers_of(agent).states()
            assert state.state == "failed" and state.tools == ()
            assert state.reason.startswith("its connection was lost: ConnectError")
            assert not [n for n in servers_of(agent).catalogue.names() if n.startswith("mcp__web__")]
            headers = events_of(agent, "request/header")
            assert "mcp__web__look" in headers[2].data.tools  # the request that made the failing call
            assert not [n for n in headers[3].data.tools if n.startswith("mcp__")]  # the one after it
            [failed] = events_of(agent, "mcp/server")
            assert failed.data.name == "web" and failed.data.reason == state.reason
            assert [(s.name, s.state) for s in told] == [("web", "failed")]
            assert replay_strict(log_path(agent)).seq == agent.store.state.seq
        finally:
            await agent.aclose()
    finally:
        if served.returncode is None:
            served.kill()
            await served.wait()


async def test_an_http_server_killed_during_a_call_fails_that_call_at_once(tmp_path):
    """The server dies while a call waits for its answer (the response stream is reset):
    the call fails with the reason at once, not at toolTimeoutS, and the server is failed."""
    port, served = await serve_toy_http()
    try:
        replies = [{"toolCalls": [call("mcp__web__sleep_forever")]}, {"text": "done"}]
        ws = workspace(tmp_path, replies, {"web": {"url": f"http://127.0.0.1:{port}/mcp", "toolTimeoutS": 30}})
        agent = ws.create_session()
        try:
            await servers_of(agent).ready()

            async def kill_once_called() -> None:
                await until(lambda: events_of(agent, "tool/call"), 10)
                await asyncio.sleep(0.3)  # the call's POST is in flight, its answer awaited
                served.kill()

            killer = asyncio.ensure_future(kill_once_called())
            started = asyncio.get_running_loop().time()
            await agent.prompt("go")
            await killer
            assert asyncio.get_running_loop().time() - started < 5
            [(ok, said)] = results(agent)
            assert not ok and "Not finished: the MCP server web failed (its connection was lost" in said
            [state] = servers_of(agent).states()
            assert state.state == "failed" and state.tools == ()
            assert len(events_of(agent, "mcp/server")) == 1
        finally:
            await agent.aclose()
    finally:
        if served.returncode is None:
            served.kill()
        await served.wait()


def unix_sockets_allowed(tmp_path: Path, ws):
    """``ws`` again, its user config (written by ``workspace``) with ``[tools] unixSockets = ["*"]``."""
    from dshd.agent import Workspace, load_config

    user = tmp_path / "user.toml"
    user.write_text(user.read_text() + '[tools]\nunixSockets = ["*"]\n')
    config = load_config(ws.root, {"model": {"script": "script.json"}}, user_file=user)
    assert config.tools.unixSockets == ["*"]
    return Workspace(ws.root, config, approvals=ws.approvals)


@pytest.mark.sandbox
@pytest.mark.xdist_group("host-sockets")
async def test_a_covered_socket_that_vanishes_as_the_sandbox_starts_is_listed_again(tmp_path, monkeypatch):
    """Under the person's Unix-socket downgrade (``[tools] unixSockets = ["*"]``: no socket
    wall to lean on) with the network off, the sandbox covers the host's listening
    sockets as listed at start; one gone by the time bubblewrap runs makes bubblewrap
    fail before the server. The server is started once more with the sockets listed
    again. Control: a socket gone every time fails the server, saying so once."""
    from dshd.sandbox import host as host_module  # where a start lists the sockets
    from dshd.sandbox.sockets import listening_sockets

    vanished = Path(f"/var/tmp/dshd-mcp-vanished-{os.getpid()}.sock")
    assert not os.path.lexists(vanished)
    listed: list[int] = []

    def first_vanished() -> tuple[Path, ...]:
        listed.append(1)
        return (vanished,) if len(listed) == 1 else listening_sockets()

    monkeypatch.setattr(host_module, "listening_sockets", first_vanished)
    marker = tmp_path / "ws" / "toy.pid"
    ws = workspace(tmp_path, [{"toolCalls": [call("mcp__toy__where")]}, {"text": "done"}], {"toy": toy(marker)})
    ws = unix_sockets_allowed(tmp_path, ws)
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        state = servers_of(agent).states()[0]
        assert state.state == "ready", state.reason
        assert len(listed) == 2 and results(agent)[0][0]
    finally:
        await agent.aclose()

    monkeypatch.setattr(host_module, "listening_sockets", lambda: listed.append(1) or (vanished,))
    listed.clear()
    other = tmp_path / "other"
    other.mkdir()
    ws = workspace(other, [{"text": "done"}], {"toy": toy(other / "ws" / "toy.pid")})
    ws = unix_sockets_allowed(other, ws)
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        state = servers_of(agent).states()[0]
        assert state.state == "failed" and "could not start" in (state.reason or ""), state.reason
        assert len(listed) == 2
        assert len([e for e in events_of(agent, "mcp/server")]) == 1
    finally:
        await agent.aclose()


@pytest.mark.sandbox
async def test_a_server_installed_under_tmp_is_shown_to_its_sandbox_read_only(tmp_path):
    """The sandbox gives a server an empty /tmp of its own; a server installed in a folder
    under /tmp (a checkout there) still starts: that folder is shown again, read-only."""
    import shutil
    import tempfile

    install = Path(tempfile.mkdtemp(prefix="dshd-mcp-install-", dir="/tmp"))
    try:
        script = install / "server.sh"
        # The toy's path as an argument: where this checkout is itself under /tmp, that
        # argument shows the checkout (and the venv python in it) as well.
        script.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        script.chmod(0o755)
        marker = tmp_path / "ws" / "toy.pid"
        replies = [{"toolCalls": [call("mcp__toy__where")]}, {"text": "done"}]
        ws = workspace(tmp_path, replies, {"toy": {"command": str(script), "args": [TOY, "--marker", str(marker), "--write", str(install / "x")]}})
        agent = ws.create_session()
        try:
            await agent.prompt("go")
            state = servers_of(agent).states()[0]
            assert state.state == "ready", state.reason
            assert results(agent)[0][0]
            assert marker.read_text().split("\n")[1] == "write failed 30"  # shown read-only: EROFS
            assert not (install / "x").exists()
        finally:
            await agent.aclose()
    finally:
        shutil.rmtree(install, ignore_errors=True)


async def test_the_benchs_instant_server_is_listed_and_called_in_the_sandbox(tmp_path):
    """bench/mcp_calls.py measures dshd's own share of a session's start with the
    stdlib-only server of tests/fixtures/mcp_servers/instant.py: it must stay a real MCP
    server to the SDK (initialize, tools listed with their annotations, a call answered)."""
    instant = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "instant.py")
    replies = [{"toolCalls": [call("mcp__instant__echo", message="hi"), call("mcp__instant__nothing")]}, {"text": "done"}]
    ws = workspace(tmp_path, replies, {"instant": {"command": sys.executable, "args": ["-I", instant]}})
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        [state] = servers_of(agent).states()
        assert state.state == "ready", state.reason
        assert state.tools == ("mcp__instant__echo", "mcp__instant__noop")
        assert servers_of(agent).catalogue.get("mcp__instant__noop").mutability == "read"  # from readOnlyHint
        [echoed, missing] = results(agent)
        assert echoed == (True, '{"message": "hi"}')
        assert not missing[0] and "mcp__instant__nothing" in missing[1]  # control: an unknown tool fails
    finally:
        await agent.aclose()


async def test_a_tool_a_server_adds_is_offered_in_the_next_request_and_runs(tmp_path, caplog):
    """grow adds the tool later and says the list changed before it answers: the request
    after grow's result offers later, and the model's call of it runs."""
    replies = [{"toolCalls": [call("mcp__instant__grow")]}, {"toolCalls": [call("mcp__instant__later", n=1)]}, {"text": "done"}]
    ws = workspace(tmp_path, replies, {"instant": changing()})
    agent = ws.create_session()
    try:
        with caplog.at_level("INFO", logger="dshd.mcp.servers"):
            await agent.prompt("go")
        first, second, third = offered(agent)
        assert "mcp__instant__later" not in first and "mcp__instant__grow" in first  # control: not there before
        assert "mcp__instant__later" in second and set(first) < set(second) and third == second
        assert [ok for ok, _ in results(agent)] == [True, True]
        assert results(agent)[1] == (True, '{"n": 1}')  # the server ran it
        [state] = servers_of(agent).states()
        assert state.state == "ready" and "mcp__instant__later" in state.tools
        assert any("later added" in r.getMessage() for r in caplog.records)
    finally:
        await agent.aclose()


async def test_a_withdrawn_tool_listed_again_is_offered_again_as_it_was(tmp_path):
    """swap drops noop (a call of it refused), unswap lists it again: it is offered in the
    next request, still "read" (not asked about), and runs."""
    approvals = InProcessApprovals(lambda request: ApprovalAnswer("allow-once"))
    replies = [
        {"toolCalls": [call("mcp__instant__swap")]},
        {"toolCalls": [call("mcp__instant__noop"), call("mcp__instant__unswap")]},
        {"toolCalls": [call("mcp__instant__noop")]},
        {"text": "done"},
    ]
    ws = workspace(tmp_path, replies, {"instant": changing()}, approvals=approvals)
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        requests = offered(agent)
        assert ["mcp__instant__noop" in r for r in requests] == [True, False, True, True]
        _, refused, _, ran = results(agent)
        assert not refused[0] and "no longer lists its tool noop" in refused[1]
        assert ran == (True, "{}")
        assert "mcp__instant__noop" not in [r.tool for r in approvals.asked]  # read: never asked
        assert servers_of(agent).catalogue.get("mcp__instant__noop").mutability == "read"
    finally:
        await agent.aclose()


async def test_a_notice_that_changes_nothing_changes_nothing_and_a_burst_is_listed_at_most_twice(tmp_path, caplog):
    """touch sends five notifications and changes nothing: the tools are listed again once or
    twice (one re-list at a time, one more for the rest of the burst), the catalogue and
    every request's tools stay the same, nothing is logged as changed."""
    replies = [{"toolCalls": [call("mcp__instant__touch", times=5)]}, {"text": "done"}]
    ws = workspace(tmp_path, replies, {"instant": changing()})
    agent = ws.create_session()
    try:
        with caplog.at_level("DEBUG", logger="dshd.mcp.servers"):
            await agent.prompt("go")
        first, second = offered(agent)
        assert first == second and "mcp__instant__echo" in first
        relisted = [r for r in caplog.records if "listed its tools again" in r.getMessage()]
        assert 1 <= len(relisted) <= 2 and all("no change" in r.getMessage() for r in relisted)
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        [state] = servers_of(agent).states()
        assert state.state == "ready" and set(state.tools) == set(first)
        assert servers_of(agent).catalogue.get("mcp__instant__noop").mutability == "read"
    finally:
        await agent.aclose()


async def test_a_failed_or_silent_relist_leaves_the_tools_as_they_were_and_the_server_up(tmp_path, caplog):
    """After spoil, tools/list is an error (broke) or never answered (mute, startupTimeoutS
    1 s): each is logged, its tools stay as they were, the server stays up and its tools
    still run."""
    replies = [
        {"toolCalls": [call("mcp__broke__spoil"), call("mcp__mute__spoil", silent=True)]},
        {"toolCalls": [call("mcp__broke__echo", message="a"), call("mcp__mute__echo", message="b")]},
        {"text": "done"},
    ]
    ws = workspace(tmp_path, replies, {"broke": changing(), "mute": changing(startupTimeoutS=1)})
    agent = ws.create_session()
    try:
        with caplog.at_level("WARNING", logger="dshd.mcp.servers"):
            await agent.prompt("go")
        headers = [e.data.tools for e in events_of(agent, "request/header")]
        assert len(headers) == 3 and all(h == headers[0] for h in headers)
        assert results(agent)[2:] == [(True, '{"message": "a"}'), (True, '{"message": "b"}')]
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "broke said its tools changed but could not list them" in said and "spoiled" in said
        assert "mute said its tools changed but did not list them within 1 s" in said
        states = {s.name: s for s in servers_of(agent).states()}
        assert all(s.state == "ready" and "mcp__" + s.name + "__noop" in s.tools for s in states.values())
    finally:
        await agent.aclose()


async def serve_toy_http_at(port: int) -> asyncio.subprocess.Process:
    """tests/fixtures/mcp_servers/toy_http.py on ``port``, once it listens."""
    served = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(TOY).with_name("toy_http.py")), str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        break
    return served


async def test_an_http_server_restarted_at_its_address_ends_the_session_once(tmp_path):
    """The server is killed and started again on the same port: it no longer knows dshd's
    session and answers its calls 404. The call that finds it is not run, the server is
    failed once saying its session ended (host:port, not the URL's path), nothing is
    reconnected; a session opened again works. Control: a 404 "Session not found" for one
    call from a server that still answers a ping is that call's error, the server stays."""
    port = _free_port()
    served = await serve_toy_http_at(port)
    try:
        replies = [
            {"toolCalls": [call("mcp__web__refused_404"), call("mcp__web__look", what="the web")]},
            {"text": "first"},
            {"toolCalls": [call("mcp__web__look", what="again")]},
            {"toolCalls": [call("mcp__web__look", what="still")]},
            {"text": "second"},
            {"toolCalls": [call("mcp__web__look", what="anew")]},
            {"text": "reopened"},
        ]
        url = f"http://127.0.0.1:{port}/mcp?team=a"
        ws = workspace(tmp_path, replies, {"web": {"url": url, "toolTimeoutS": 10}})
        agent = ws.create_session()
        told = []
        servers_of(agent).add_listener(told.append)
        try:
            await agent.prompt("first")
            [refused, looked] = results(agent)
            assert not refused[0] and "answered the refused_404 call with an error: Session not found" in refused[1]
            assert looked == (True, "looked at the web")
            [state] = servers_of(agent).states()
            assert state.state == "ready" and "mcp__web__look" in state.tools
            assert not events_of(agent, "mcp/server") and not told

            served.kill()
            await served.wait()
            served = await serve_toy_http_at(port)
            started = asyncio.get_running_loop().time()
            await agent.prompt("second")
            assert asyncio.get_running_loop().time() - started < 5
            [ended, after] = results(agent)[2:]
            reason = (
                f"its session ended: the server at 127.0.0.1:{port} no longer knows it (restarted?); "
                "open the session again to reconnect"
            )
            assert ended == (False, f"Not run: the MCP server web failed ({reason}); its tools are gone for this session")
            assert not after[0] and f"the MCP server web failed ({reason})" in after[1]
            [state] = servers_of(agent).states()
            assert state.state == "failed" and state.tools == () and state.reason == reason
            assert "/mcp" not in reason and "team" not in reason
            [failed] = events_of(agent, "mcp/server")
            assert failed.data.name == "web" and failed.data.reason == reason
            assert [(s.name, s.state) for s in told] == [("web", "failed")]
        finally:
            await agent.aclose()
        again = ws.create_session()  # reopening the session is the reconnect
        try:
            await again.prompt("reopened")
            assert results(again)[-1] == (True, "looked at anew")
        finally:
            await again.aclose()
    finally:
        if served.returncode is None:
            served.kill()
        await served.wait()


def test_the_package_runner_hint_names_the_runner_and_its_package():
    """Which commands count as a package runner, and the package the hint names."""
    from dshd.mcp.config import McpServerSpec
    from dshd.mcp.servers import runner_hint

    def hint(command: str, *args: str, sandbox="workspace", network=False) -> str:
        spec = McpServerSpec(name="s", transport="stdio", command=command, args=args, sandbox=sandbox)
        return runner_hint(spec, network)

    assert "npx is a package runner" in hint("npx", "-y", "@modelcontextprotocol/server-memory")
    assert "(npm install -g @modelcontextprotocol/server-memory)" in hint("/usr/bin/npx", "-y", "@modelcontextprotocol/server-memory")
    assert "(npm install -g pkg)" in hint("npx", "--yes", "-p", "pkg", "its-bin")
    assert "(uv tool install mcp-server-git)" in hint("uvx", "--python", "3.12", "--from", "mcp-server-git", "mcp-server-git")
    assert "(uv tool install mcp-server-time)" in hint("uvx", "mcp-server-time", "--local-timezone", "UTC")
    assert "bunx is a package runner" in hint("bunx", "some-server")
    assert "pnpm dlx is a package runner" in hint("pnpm", "dlx", "some-server")
    assert "yarn dlx is a package runner" in hint("yarn", "--silent", "dlx", "some-server")
    assert "the network and a writable cache" in hint("npx", "x")
    assert "it needs a writable cache," in hint("npx", "x", network=True)
    # a URL (which may carry a token) or an odd name is not repeated
    assert "(uv tool install <package>)" in hint("uvx", "--from", "git+https://user:tok@host/r", "r")
    assert "(npm install -g <package>)" in hint("npx", "-y", "evil\nname")
    # controls: not a runner, pnpm/yarn without dlx, or not sandboxed
    assert hint("node", "server.js") == hint("pnpm", "start") == hint("yarn", "node", "x") == ""
    assert hint("mcp-server-npx") == hint("npx", "-y", "pkg", sandbox="none") == ""


from sandbox_support import needs_sandbox  # noqa: E402 - asks once, outside any event loop


@needs_sandbox
async def test_a_sandboxed_package_runner_that_cannot_start_says_why(tmp_path):
    """The real npx in the sandbox (network off, home read-only): offline it fails at once
    (ENOTCACHED); left to fetch it waits on its registry until startupTimeoutS. Either way
    the reason says a package runner cannot work there and what to do. Nothing here needs
    the network: the package cannot exist and the sandbox has none. Control: a failing
    server that is no package runner gets no hint."""
    import shutil

    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed on this machine (the test needs the real npx)")
    package = "@dshd-test/no-such-mcp-server"
    servers = {
        "offline": {"command": "npx", "args": ["--offline", "-y", package]},  # found on PATH, as configs say it
        "fetching": {"command": npx, "args": ["-y", package], "startupTimeoutS": 3},
        "plain": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
    }
    ws = workspace(tmp_path, [{"text": "done"}], servers)
    agent = ws.create_session()
    try:
        started = asyncio.get_running_loop().time()
        await agent.prompt("go")
        assert asyncio.get_running_loop().time() - started < 10
        states = {s.name: s for s in servers_of(agent).states()}
        assert {name: s.state for name, s in states.items()} == {"offline": "failed", "fetching": "failed", "plain": "failed"}
        hint = (
            "npx is a package runner: to fetch the server it needs the network and a writable cache, which the "
            f"sandbox does not give it. Install the server once (npm install -g {package}) and set command to the "
            'program it installs, or, knowingly, set sandbox = "none" for this server in your user config'
        )
        assert states["offline"].reason.startswith("could not start: ") and states["offline"].reason.endswith("; " + hint)
        assert states["fetching"].reason == f"did not start within 3 s (startupTimeoutS); {hint}"
        assert states["plain"].reason.startswith("could not start: ") and "package runner" not in states["plain"].reason
        reasons = {e.data.name: e.data.reason for e in events_of(agent, "mcp/server")}
        assert reasons == {name: s.reason for name, s in states.items()}
    finally:
        await agent.aclose()
