"""The shared daemon outlives the client that started it.

acpx (a headless ACP client from npm) ends its agent's whole process tree when it exits:
every descendant it can find, whatever its session or process group. A daemon started as
a child of the forwarder (`dshd acp`) went down with it, and every other editor on it.
The daemon is now started fully detached: not a descendant of any client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.acp_door.clients import NODE, NODE_CACHE, dshd_acp_command
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import Runtime, alive, connect_command, daemons_of, wait_gone

ACPX = NODE_CACHE / "acp-client" / "node_modules" / ".bin" / "acpx"


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


def ancestors(pid: int) -> list[int]:
    """The parent chain of ``pid`` up to (not including) pid 1, read in /proc."""
    chain = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        chain.append(pid)
    return chain[:-1] if chain and chain[-1] <= 1 else chain


def test_the_daemon_is_no_descendant_of_the_forwarder_that_started_it(tmp_path: Path, runtime: Runtime) -> None:
    workspace = write_workspace(tmp_path / "ws")
    # Control: the probe sees a process started the old way (its own session, but a child)
    # as a descendant of whoever started it.
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert os.getpid() in ancestors(child.pid)
    finally:
        child.kill()
        child.wait()
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        assert "result" in editor.initialize()
        pid = runtime.daemon_pid()
        chain = ancestors(pid)
        assert editor.proc.pid not in chain and os.getpid() not in chain, chain
        assert os.getsid(pid) == pid  # a session of its own: the editor's terminal is not its
        assert editor.shutdown_and_exit() == 0
    assert alive(pid)  # the forwarder gone, the daemon waits for the idle timeout


def _acpx(workspace: Path, agent: str, env: dict, prompt: str = "hello") -> subprocess.CompletedProcess:
    return subprocess.run([str(ACPX), "--agent", agent, "--cwd", str(workspace), "--approve-all", "--format", "text",
                           "--timeout", "60", "exec", prompt],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not ACPX.exists() or not NODE.exists(), reason="acpx not installed: run tests/acp_door/setup.sh")
def test_acpx_ending_its_agents_tree_leaves_the_daemon_and_another_client_running(tmp_path: Path, runtime: Runtime) -> None:
    workspace = write_workspace(tmp_path / "ws", replies=[{"text": "slow answer", "delayMs": 2500}, {"text": "second"}])
    home = tmp_path / "home"  # acpx keeps its state under $HOME
    home.mkdir()
    env = {**os.environ, **runtime.env, "HOME": str(home), "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}"}

    # Control: acpx really ends its agent's tree, a descendant in a session of its own
    # (what start_new_session=True gave the daemon before) included.
    pidfile = tmp_path / "sleeper.pid"
    agent = shutil.which("sh") + f" -c 'setsid sleep 300 & echo $! > {pidfile}; exec " + " ".join(dshd_acp_command(shared=False)) + "'"
    ran = _acpx(workspace, agent, env, prompt="control")
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    sleeper = int(pidfile.read_text())
    assert wait_gone(sleeper, 10), "acpx left its agent's descendant running: the probe cannot see the attack"

    # The attack: acpx's agent is `dshd acp`, the forwarder that starts the shared daemon.
    # While its slow turn runs, a second client (an editor) attaches to the same daemon.
    agent = " ".join(dshd_acp_command(shared=True))
    acpx = subprocess.Popen([str(ACPX), "--agent", agent, "--cwd", str(workspace), "--approve-all", "--format", "text",
                             "--timeout", "60", "exec", "hello"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = runtime.daemon_pid(timeout=30)
        editor = RawDaemon(workspace, env=runtime.env, command=connect_command())
        try:
            assert "result" in editor.initialize()
            assert runtime.daemon_pids() == [pid]
            out, err = acpx.communicate(timeout=90)
            assert acpx.returncode == 0 and "slow answer" in out, (out, err)
            time.sleep(1.5)  # acpx's cleanup (SIGTERM, then SIGKILL) has run by its exit; give signals time to land
            assert alive(pid), "the shared daemon went down with acpx's agent"
            assert daemons_of(workspace) == [pid]
            # The other client still works, on the same daemon, and sees acpx's session.
            sessions = editor.request("dsh/session/list", {})["sessions"]
            assert sessions, sessions
            assert editor.proc.poll() is None
            assert editor.shutdown_and_exit() == 0
        finally:
            editor.kill()
    finally:
        if acpx.poll() is None:
            acpx.kill()
            acpx.wait()
