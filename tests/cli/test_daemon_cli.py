"""`dshd daemon status|stop|restart` and the settings-differ notice, with real processes:
real forwarders (`dshd connect`, their pipes handed to the daemon as an editor's are), the
real detached daemon, the CLI run as a person runs it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import DSHD, Runtime, alive, connect_command, wait_gone

pytestmark = pytest.mark.slow


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    replies = [{"text": f"round {n}", "delayMs": 300} for n in range(1, 40)]
    return write_workspace(tmp_path / "ws", replies=replies)


def forwarder(workspace: Path, runtime: Runtime) -> RawDaemon:
    return RawDaemon(workspace, env=runtime.env, command=connect_command())


def cli(runtime: Runtime, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DSHD), "daemon", *args], env={**os.environ, **runtime.env}, capture_output=True, text=True, timeout=timeout
    )


def model(name: str) -> dict:
    return {"config": {"model": {"model": name}}}


def shown_messages(client: RawDaemon, wait_s: float = 0.0) -> list[str]:
    """The window/showMessage texts the client got (reading on for ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client.next_response(timeout=max(0.05, deadline - time.monotonic()))
        except (TimeoutError, EOFError):
            pass
        if time.monotonic() >= deadline:
            break
    return [n["params"]["message"] for n in client.notifications if n["method"] == "window/showMessage"]


def test_a_second_client_with_another_model_is_told_which_keys_differ_and_an_equal_one_is_not(
    workspace: Path, runtime: Runtime
) -> None:
    with forwarder(workspace, runtime) as a, forwarder(workspace, runtime) as same, forwarder(workspace, runtime) as other:
        assert "result" in a.initialize(options=model("model-x"))
        a.request("dsh/session/list", {})  # A's workspace is open: its settings stand
        assert "result" in same.initialize(options=model("model-x"))
        assert "result" in other.initialize(options=model("model-y"))
        said = shown_messages(other, 1.0)
        notices = [m for m in said if m.startswith("Your settings are not in force")]
        assert len(notices) == 1, said
        assert "model.model (yours: model-y; in force: model-x)" in notices[0]
        assert "dshd serve" in notices[0] and "dshd daemon restart" in notices[0] and ":Dsh restart" in notices[0]
        # The control: equal settings, no notice (and none for the first client).
        assert not [m for m in shown_messages(same, 0.3) if "not in force" in m]
        assert not [m for m in shown_messages(a, 0.1) if "not in force" in m]
        for client in (a, same, other):
            assert client.shutdown_and_exit() == 0


@pytest.mark.parametrize("mode", ["pass", "copy"])
def test_status_then_restart_makes_a_new_daemon_and_both_clients_reattach_to_their_session(
    workspace: Path, runtime: Runtime, mode: str
) -> None:
    """``pass``: the forwarders hand their pipes to the daemon (what editors get); ``copy``:
    they copy the bytes themselves (a terminal, or DSHD_CONNECT_COPY=1)."""
    if mode == "copy":
        runtime.extra["DSHD_CONNECT_COPY"] = "1"
    assert cli(runtime, "status", "--workspace", str(workspace)).returncode == 3  # none runs yet
    a = forwarder(workspace, runtime)
    b = forwarder(workspace, runtime)
    try:
        assert "result" in a.initialize(options=model("model-x"))
        assert "result" in b.initialize(options=model("model-y"))
        created = a.request("dsh/session/create", {"title": "kept"})
        sid = created["sessionId"]
        a.request("dsh/goal/create", {"agentId": created["agentId"], "objective": "keep going", "maxRounds": 30})
        assert b.request("dsh/session/open", {"sessionId": sid})["goal"]["activation"] == "armed"
        old = runtime.daemon_pid()

        status = cli(runtime, "status", "--workspace", str(workspace), "--json")
        assert status.returncode == 0, status.stderr
        seen = json.loads(status.stdout)
        assert seen["running"] and seen["pid"] == old and seen["uptimeS"] >= 0
        assert seen["socket"].startswith(str(runtime.sockets)) and len(seen["clients"]) == 2
        assert [s["sessionId"] for s in seen["sessions"]] == [sid] and len(seen["sessions"][0]["clients"]) == 2
        text = cli(runtime, "status", "--workspace", str(workspace)).stdout
        assert f"pid {old}" in text and "clients    2" in text and sid in text

        restarted = cli(runtime, "restart", "--workspace", str(workspace), "--json")
        assert restarted.returncode == 0, restarted.stderr
        result = json.loads(restarted.stdout)
        assert result["oldPid"] == old and result["told"] == 2 and result["pid"] != old
        assert not alive(old) and alive(result["pid"])
        # Each forwarder saw its daemon die (status 1: an editor's cue to reattach), after a word.
        assert a.wait(30) == 1 and b.wait(30) == 1
        for client in (a, b):
            assert any("restarting (dshd daemon restart)" in m for m in shown_messages(client))

        # Reattach as an editor does: a new forwarder, the same session, the goal disarmed.
        with forwarder(workspace, runtime) as a2, forwarder(workspace, runtime) as b2:
            assert "result" in a2.initialize(options=model("model-x"))
            assert "result" in b2.initialize(options=model("model-y"))
            assert runtime.daemon_pid() == result["pid"]
            for client in (a2, b2):
                opened = client.request("dsh/session/open", {"sessionId": sid})
                assert opened["goal"]["activation"] == "disarmed"
            reply = a2.request("dsh/agent/prompt", {"agentId": opened["agentId"], "text": "still here?"}, timeout=60)
            assert reply["stopReason"] == "end-turn"
            for client in (a2, b2):
                assert client.shutdown_and_exit() == 0
    finally:
        a.kill()
        b.kill()


def test_stop_tells_the_clients_and_ends_the_daemon(workspace: Path, runtime: Runtime) -> None:
    a = forwarder(workspace, runtime)
    try:
        assert "result" in a.initialize()
        pid = runtime.daemon_pid()
        stopped = cli(runtime, "stop", "--workspace", str(workspace))
        assert stopped.returncode == 0, stopped.stderr
        assert f"pid {pid}" in stopped.stdout and "1 editor(s) told" in stopped.stdout
        assert wait_gone(pid, 5)
        assert a.wait(10) == 0  # ended on purpose: no reattach
        assert any("was stopped (dshd daemon stop)" in m for m in shown_messages(a))
        again = cli(runtime, "stop", "--workspace", str(workspace))
        assert again.returncode == 3 and "no dshd daemon runs" in again.stdout
    finally:
        a.kill()


def test_status_queries_do_not_keep_an_idle_daemon_alive(tmp_path: Path, runtime: Runtime) -> None:
    workspace = write_workspace(tmp_path / "idle", extra_config="\n[daemon]\nidleTimeoutS = 3\n")
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        pid = runtime.daemon_pid()
        assert a.shutdown_and_exit() == 0
    left = time.monotonic()
    while alive(pid) and time.monotonic() - left < 15:
        assert cli(runtime, "status", "--workspace", str(workspace)).returncode in (0, 3)
        time.sleep(0.3)
    assert not alive(pid), "status queries kept the daemon alive past its idle time"
    assert time.monotonic() - left < 7
