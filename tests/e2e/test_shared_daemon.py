"""One daemon per workspace, through real processes: `dshd connect` forwarders (what
editors start) and the `dshd daemon` they start, on a private $XDG_RUNTIME_DIR per test.

Covered: the first connect starts the daemon and later ones reuse it; one client's
shutdown/exit ends its connection only; forwarders racing at start end with one daemon;
a daemon killed with SIGKILL leaves a stale socket and lock that the next connect
replaces; another uid is refused (by the folder's mode, and by SO_PEERCRED when the
folder is opened up; the forwarder then refuses the folder); idle exit after
``[daemon] idleTimeoutS``; SIGKILL in the middle of a turn loses nothing acknowledged,
the client reattaches and nothing runs by itself; SIGKILL at random moments of a stream
of durable writes loses none that was acknowledged. (The serve fuzzer runs through the
forwarder too: tests/e2e/test_fuzz_serve.py.) The last client leaving disarms the goal and
the daemon exits after the idle time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dshd import __version__
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events
from tests.shared_daemon_support import DSH_PROBE, Runtime, alive, connect_command, daemons_of, session_list_frames, wait_gone

pytestmark = pytest.mark.slow


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


def forwarder(workspace: Path, runtime: Runtime, **kw) -> RawDaemon:
    return RawDaemon(workspace, env=runtime.env, command=connect_command(), **kw)


def socket_file(runtime: Runtime) -> Path:
    [sock] = runtime.sockets.glob("*.sock")
    return sock


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("mode", ["pass", "copy"])
def test_the_first_connect_starts_the_daemon_and_the_next_reuses_it(workspace: Path, runtime: Runtime, mode: str) -> None:
    """``pass``: the forwarder hands its stdin and stdout to the daemon (pipes, as editors
    give); ``copy``: it copies every byte itself (what it does for a terminal or a file)."""
    if mode == "copy":
        runtime.extra["DSHD_CONNECT_COPY"] = "1"
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        pid = runtime.daemon_pid()
        created = a.request("dsh/session/create", {"title": "shared"})
        # The socket is named for the workspace's real path and dshd's version, in a private folder.
        name = hashlib.sha256((os.path.realpath(workspace) + __version__).encode()).hexdigest()[:16]
        sock = socket_file(runtime)
        assert sock.name == f"{name}.sock"
        assert stat.S_IMODE(runtime.sockets.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert (runtime.sockets / f"{name}.lock").read_text().strip() == str(pid)
        with forwarder(workspace, runtime) as b:
            assert "result" in b.initialize()
            assert runtime.daemon_pids() == [pid] and daemons_of(workspace) == [pid]
            listed = b.request("dsh/session/list", {})["sessions"]
            assert created["sessionId"] in [row["sessionId"] for row in listed]
            # shutdown + exit from one client ends that connection only
            assert a.shutdown_and_exit() == 0
            assert alive(pid)
            again = b.request("dsh/session/list", {})["sessions"]
            assert created["sessionId"] in [row["sessionId"] for row in again]
            assert b.shutdown_and_exit() == 0
            assert b.stdout_faults == [] and a.stdout_faults == []
    assert alive(pid)  # idle, not gone: the default idle timeout is 60 s


def test_stdin_from_a_regular_file_is_copied_through(workspace: Path, runtime: Runtime, tmp_path: Path) -> None:
    """A file cannot be handed to an event loop: the forwarder copies it (and the answers)."""
    frames = session_list_frames(workspace)
    script = tmp_path / "input.bin"
    script.write_bytes(frames)
    with open(script, "rb") as stdin:
        out = subprocess.run(connect_command(), cwd=workspace, env={**os.environ, **runtime.env}, stdin=stdin,
                             capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    from tests.e2e.raw_client import split_frames

    messages, faults, rest = split_frames(out.stdout)
    assert faults == [] and rest == b""
    answered = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert "capabilities" in answered[1]["result"] and answered[2]["result"]["sessions"] == []
    assert answered[3]["result"] is None


def test_forwarders_racing_at_start_end_with_one_daemon(workspace: Path, runtime: Runtime) -> None:
    racers = [forwarder(workspace, runtime) for _ in range(4)]  # spawned together, before any daemon
    try:
        for racer in racers:
            assert "result" in racer.initialize(), racer.stderr_bytes
        pid = runtime.daemon_pid()
        wait_until(lambda: daemons_of(workspace) == [pid], 15, f"still more than one daemon: {daemons_of(workspace)}")
        created = racers[0].request("dsh/session/create", {"title": "raced"})
        for racer in racers[1:]:
            assert created["sessionId"] in [row["sessionId"] for row in racer.request("dsh/session/list", {})["sessions"]]
        log = next(runtime.sockets.glob("*.log")).read_text()
        # The race really happened: more than one daemon started; exactly one served.
        assert log.count(" serving ") == 1, log
        assert log.count("another daemon serves") >= 1, log
        for racer in racers:
            assert racer.shutdown_and_exit() == 0
    finally:
        for racer in racers:
            racer.kill()


def test_a_killed_daemon_leaves_a_stale_socket_and_lock_that_the_next_connect_replaces(
    workspace: Path, runtime: Runtime
) -> None:
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        created = a.request("dsh/session/create", {"title": "before the kill"})
        pid = runtime.daemon_pid()
        sock = socket_file(runtime)
        lock = sock.with_suffix(".lock")
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 10)
        assert a.wait(10) == 1  # the forwarder says its daemon died: the editor's cue to restart it
    # Stale: the socket file and the lock file stay, and nobody listens.
    assert stat.S_ISSOCK(sock.lstat().st_mode) and lock.read_text().strip() == str(pid)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(ConnectionRefusedError):
        probe.connect(str(sock))
    probe.close()
    with forwarder(workspace, runtime) as b:
        assert "result" in b.initialize()
        fresh = runtime.daemon_pid()
        assert fresh != pid and lock.read_text().strip() == str(fresh)
        opened = b.request("dsh/session/open", {"sessionId": created["sessionId"]})
        assert opened["sessionId"] == created["sessionId"]
        assert b.shutdown_and_exit() == 0


def _probe(sock: Path, as_nobody: bool) -> dict:
    argv = ["/usr/bin/python3", "-I", "-c", DSH_PROBE, str(sock)]
    if as_nobody:
        argv = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] + argv
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to run a client as uid 65534")
def test_another_uid_is_refused(workspace: Path, runtime: Runtime) -> None:
    os.chmod(runtime.path, 0o711)  # others may pass through the runtime folder, not list it
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        sock = socket_file(runtime)
        # Control: the probe itself works, as this uid.
        mine = _probe(sock, as_nobody=False)
        assert mine["got"].startswith("ok dshd ") and '"capabilities"' in mine["got"], mine
        # 1. The folder is 0700: another user cannot even reach the socket.
        assert _probe(sock, as_nobody=True) == {"connect": 13}  # EACCES
        # 2. Opened up by hand: the kernel lets them connect, the daemon's SO_PEERCRED check
        #    closes the connection unanswered.
        os.chmod(runtime.sockets, 0o755)
        os.chmod(sock, 0o666)
        theirs = _probe(sock, as_nobody=True)
        assert "connect" not in theirs and theirs["got"] == "", theirs  # connected, then closed (or reset) unanswered
        assert _probe(sock, as_nobody=False)["got"].startswith("ok dshd ")  # still served to us
        log = sock.with_suffix(".log").read_text()
        assert "refused a connection from uid 65534" in log, log
        # 3. Our forwarder fails closed on a folder open to others.
        refused = subprocess.run(connect_command(), cwd=workspace, env={**os.environ, **runtime.env},
                                 input=b"", capture_output=True, timeout=30)
        assert refused.returncode == 1 and b"is open to others" in refused.stderr, refused.stderr
        os.chmod(runtime.sockets, 0o700)
        assert a.shutdown_and_exit() == 0


def test_the_daemon_exits_after_the_idle_timeout_with_no_connection(workspace: Path, runtime: Runtime) -> None:
    write_workspace(workspace, extra_config="\n[daemon]\nidleTimeoutS = 1.5\n")
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        pid = runtime.daemon_pid()
        sock = socket_file(runtime)
        time.sleep(2.5)
        assert alive(pid)  # a connection open longer than the timeout keeps it
        assert a.request("dsh/session/list", {}) is not None
        assert a.shutdown_and_exit() == 0
    left = time.monotonic()
    assert wait_gone(pid, 15)
    waited = time.monotonic() - left
    assert 1.0 < waited < 12, waited
    assert not sock.exists()  # the socket goes with it; the lock file stays, unlocked
    import fcntl

    with open(sock.with_suffix(".lock"), "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    # and the next connect starts a fresh daemon
    with forwarder(workspace, runtime) as b:
        assert "result" in b.initialize()
        assert runtime.daemon_pid() != pid
        assert b.shutdown_and_exit() == 0


def test_sigkill_mid_turn_loses_nothing_acknowledged_and_runs_nothing_by_itself(workspace: Path, runtime: Runtime) -> None:
    write_workspace(workspace, replies=[{"text": "round 1 never ends", "delayMs": 60_000}])
    (workspace / "after.json").write_text(json.dumps({"replies": [{"text": "round 2"}]}))
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        created = a.request("dsh/session/create", {"title": "crash"})
        agent, sid = created["agentId"], created["sessionId"]
        goal = a.request("dsh/goal/create", {"agentId": agent, "objective": "survive", "maxRounds": 2})
        wait_until(lambda: log_events(workspace, sid)[-1]["type"] == "request/header", 20, "the round never started")
        a.request("dsh/session/list", {})  # every notification sent so far is read by now
        told = {n["params"]["event"]["seq"]: n["params"]["event"] for n in a.notifications if n["method"] == "dsh/session/event"}
        assert told and max(told) >= 4
        pid = runtime.daemon_pid()
        os.kill(pid, signal.SIGKILL)
        assert a.wait(10) == 1
    before = log_events(workspace, sid)
    assert before[-1]["type"] == "request/header"  # the turn is open in the log
    by_seq = {event["seq"]: event for event in before}
    for seq, event in told.items():  # every event a client was told of is on disk, as told
        assert by_seq[seq] == event
    with forwarder(workspace, runtime) as b:
        assert "result" in b.initialize(options={"config": {"model": {"provider": "scripted", "script": "after.json"}}})
        opened = b.request("dsh/session/open", {"sessionId": sid})
        assert opened["goal"]["phase"] == "active" and opened["goal"]["activation"] == "disarmed"
        assert opened["goal"]["revision"] == goal["revision"]
        after_open = log_events(workspace, sid)
        assert after_open[: len(before)] == before
        assert [(e["type"], e["data"]) for e in after_open[len(before) :]] == [
            ("turn/close", {"turn": 1, "stopReason": "interrupted"})
        ]
        time.sleep(1.0)
        assert log_events(workspace, sid) == after_open  # nothing started by itself
        assert b.shutdown_and_exit() == 0


def test_sigkill_at_random_moments_through_the_forwarder_loses_nothing_acknowledged(workspace: Path, runtime: Runtime) -> None:
    """Kill chaos through `dshd connect`: a pipeline of plan toggles, each a durable event,
    and SIGKILL of the shared daemon at a random moment; every toggle answered "committed"
    is in the log, which stays sound; the next connect starts a fresh daemon that opens the
    session."""
    import random

    rng = random.Random(20261201)
    session = None
    answered: list[int] = []
    sent_total: list[int] = []
    for round_no in range(4):
        with forwarder(workspace, runtime) as d:
            assert "result" in d.initialize(), d.stderr_bytes
            if session is None:
                session = d.request("dsh/session/create", {"title": "chaos"})["sessionId"]
            agent = d.request("dsh/session/open", {"sessionId": session})["agentId"]
            active = d.request("dsh/plan/get", {"agentId": agent})["active"]
            before = [e for e in log_events(workspace, session) if e["type"] == "plan/mode"]
            pid = runtime.daemon_pid()
            kill_at = time.monotonic() + rng.uniform(0.2, 1.2)
            sent = 0
            while time.monotonic() < kill_at:  # a steady stream, one toggle a millisecond
                active = not active
                d.send({"jsonrpc": "2.0", "id": f"t{sent}", "method": "dsh/plan/set", "params": {"agentId": agent, "active": active}})
                sent += 1
                time.sleep(0.001)
            # Then a burst sent at once: the kill lands while some of it waits for its fsync,
            # however fast the daemon kept up with the stream (the control below needs that).
            for _ in range(50):
                active = not active
                d.send({"jsonrpc": "2.0", "id": f"t{sent}", "method": "dsh/plan/set", "params": {"agentId": agent, "active": active}})
                sent += 1
            os.kill(pid, signal.SIGKILL)
            assert wait_gone(pid, 10)
            committed = 0
            while True:
                try:
                    reply = d.next_response(timeout=15)
                except EOFError:
                    break
                if reply.get("result", {}).get("outcome") == "committed":
                    committed += 1
            assert d.wait(10) == 1  # the daemon died under it
            assert d.stdout_faults == []
        after = [e for e in log_events(workspace, session) if e["type"] == "plan/mode"]
        assert after[: len(before)] == before
        assert len(after) - len(before) >= committed, (round_no, committed, len(after) - len(before))
        answered.append(committed)
        sent_total.append(sent)
        verify = subprocess.run([sys.executable, "-m", "dshd", "log", "verify", "--json",
                                 str(workspace / ".dsh" / "sessions" / session / "log.jsonl")],
                                capture_output=True, text=True, timeout=60)
        assert json.loads(verify.stdout)["ok"] is True, verify.stdout
    # The kills fell inside the stream: some toggles were acknowledged, not all of them.
    assert sum(answered) > 0 and any(a < n for a, n in zip(answered, sent_total)), (answered, sent_total)
    with forwarder(workspace, runtime) as last:
        assert "result" in last.initialize()
        assert last.request("dsh/session/open", {"sessionId": session})["sessionId"] == session
        assert last.shutdown_and_exit() == 0


def test_the_last_client_leaving_disarms_the_goal_and_the_daemon_exits_after_the_idle_time(
    workspace: Path, runtime: Runtime
) -> None:
    """Two clients on a session whose goal runs rounds: the first leaving changes nothing;
    the last leaving disarms the goal (the round running ends, no next one starts); a
    client coming back finds it disarmed; with nobody left the daemon exits after
    ``[daemon] idleTimeoutS``."""
    replies = [{"text": f"round {n}", "delayMs": 400} for n in range(1, 30)]
    write_workspace(workspace, replies=replies, extra_config="\n[daemon]\nidleTimeoutS = 4\n")
    a = forwarder(workspace, runtime)
    b = forwarder(workspace, runtime)
    try:
        assert "result" in a.initialize() and "result" in b.initialize()
        created = a.request("dsh/session/create", {"title": "watched"})
        sid = created["sessionId"]
        a.request("dsh/goal/create", {"agentId": created["agentId"], "objective": "keep going", "maxRounds": 25})
        opened = b.request("dsh/session/open", {"sessionId": sid})
        assert opened["agentId"] == created["agentId"] and opened["goal"]["activation"] == "armed"
        assert a.shutdown_and_exit() == 0  # one of two leaves: the rounds go on
        rounds = lambda: sum(1 for e in log_events(workspace, sid) if e["type"] == "user/message" and "goalRound" in e["data"])  # noqa: E731
        going = rounds()
        wait_until(lambda: rounds() > going, 10, "the rounds stopped while a client was still attached")
        pid = runtime.daemon_pid()
        assert b.shutdown_and_exit() == 0  # the last one leaves
        time.sleep(1.5)  # the round running then ends (400 ms), and none follows
        settled = rounds()
        time.sleep(1.0)
        assert rounds() == settled, "a round started with nobody attached"
        assert alive(pid)
        with forwarder(workspace, runtime) as c:  # back before the idle time ran out: the same daemon
            assert "result" in c.initialize()
            assert runtime.daemon_pid() == pid
            again = c.request("dsh/session/open", {"sessionId": sid})
            assert again["goal"]["phase"] == "active" and again["goal"]["activation"] == "disarmed"
            assert c.shutdown_and_exit() == 0
        left = time.monotonic()
        assert wait_gone(pid, 15)
        assert 3.0 < time.monotonic() - left < 12
    finally:
        a.kill()
        b.kill()


def test_sigterm_stops_the_daemon_cleanly(workspace: Path, runtime: Runtime) -> None:
    """SIGTERM: the connections end, every session is closed (its lock released, its
    checkpoint written), the socket goes, then the lock; the forwarder's client sees the end
    of its output."""
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        created = a.request("dsh/session/create", {"title": "stopped"})
        session_dir = workspace / ".dsh" / "sessions" / created["sessionId"]
        pid = runtime.daemon_pid()
        sock = socket_file(runtime)
        assert not (session_dir / "projection.json").exists()  # written when the session closes
        os.kill(pid, signal.SIGTERM)
        assert wait_gone(pid, 15)
        assert a.wait(10) in (0, 1)  # its daemon ended the connection (as it left)
    assert not sock.exists()
    assert (session_dir / "projection.json").exists()  # closed, not abandoned
    import fcntl

    for lock in (sock.with_suffix(".lock"), session_dir / "log.lock"):  # both released
        with open(lock, "rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _raw_first_line(sock: Path, line: bytes) -> bytes:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(20)
    probe.connect(str(sock))
    probe.sendall(line)
    data = b""
    while chunk := probe.recv(4096):
        data += chunk
        if b"\n" in data:
            break
    probe.close()
    return data


def test_a_first_line_that_names_no_protocol_is_answered_and_closed(workspace: Path, runtime: Runtime) -> None:
    with forwarder(workspace, runtime) as a:
        assert "result" in a.initialize()
        sock = socket_file(runtime)
        assert _raw_first_line(sock, b"dsh\n").startswith(b"ok dshd ")  # control: a good line is answered
        assert _raw_first_line(sock, b"http/1.1\n").startswith(b"error the first line must name the protocol")
        assert _raw_first_line(sock, b"acp [1]\n").startswith(b"error the options after the protocol must be one JSON object")
        assert a.request("dsh/session/list", {}) is not None  # the daemon serves on
        assert a.shutdown_and_exit() == 0


SOCKET_PROBE = r"""
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sys.argv[1])
    s.sendall(b"dsh\n")
    got = s.recv(4096)
except OSError as exc:
    got = ("error %d" % exc.errno).encode()
print("probe:", got.decode(errors="replace").strip() or "closed")
"""


@pytest.mark.sandbox
def test_a_command_the_agent_runs_cannot_become_a_client(workspace: Path, tmp_path: Path) -> None:
    """An agent's command that reaches the daemon's socket (full-access with the network on
    shares the machine's sockets) is refused: it could answer its own approvals. Control:
    the same probe run by the test, not by the daemon, is answered. (Where the sandbox also
    hides the socket folder, the probe does not even find it: that passes too.)"""
    from tests.sandbox_support import AVAILABLE, PYTHON, WHY_NOT

    if not AVAILABLE:
        pytest.skip(f"no sandbox here: {WHY_NOT}")
    runtime = Runtime(base="/var/tmp")  # a workspace-write sandbox has a /tmp of its own
    try:
        import dshd_connect

        sock = Path(dshd_connect.socket_path(str(workspace), env=runtime.env))  # where the daemon will listen
        command = f"{PYTHON} -I probe.py {sock}"
        replies = [{"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "done"}]
        write_workspace(workspace, replies=replies, plugins=["plan", "goals", "tools"],
                        extra_config='\n[tools]\nsandbox = "full-access"\nnetwork = true\napprove = []\n')
        (workspace / "probe.py").write_text(SOCKET_PROBE)
        with forwarder(workspace, runtime) as a:
            assert "result" in a.initialize(options={"trusted": True})  # network = true is the person's own
            assert socket_file(runtime) == sock
            mine = subprocess.run([PYTHON, "-I", str(workspace / "probe.py"), str(sock)], capture_output=True, text=True, timeout=30)
            assert mine.stdout.startswith("probe: ok dshd "), mine  # the probe works, from outside
            created = a.request("dsh/session/create", {})
            assert a.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "probe"}, timeout=60)["stopReason"] == "end-turn"
            [result] = [e for e in log_events(workspace, created["sessionId"]) if e["type"] == "tool/result"]
            assert result["data"]["ok"], result["data"]
            content = result["data"]["content"]
            assert "probe: ok dshd" not in content, content
            if "probe: error 2" not in content:  # the folder is not hidden here: the daemon refuses
                # It reached the socket (no ENOENT, EACCES or ECONNREFUSED): closed unanswered.
                assert any(f"probe: {end}" in content for end in ("closed", "error 104", "error 32")), result["data"]
                log = sock.with_suffix(".log").read_text()
                # Every command runs in a PID namespace of its own: refused for that first (a
                # process of the daemon's own namespace that it started is refused too).
                assert "it is in another PID namespace" in log, log
            assert a.shutdown_and_exit() == 0
    finally:
        runtime.stop()


def test_one_socket_as_stdin_and_stdout_is_copied_through(workspace: Path, runtime: Runtime) -> None:
    """A client that gives `dshd connect` one socket for both (socat does): copied, and it works."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(connect_command(), cwd=workspace, env={**os.environ, **runtime.env},
                            stdin=theirs, stdout=theirs, stderr=subprocess.PIPE)
    theirs.close()
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}}).encode()
        ours.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        ours.settimeout(60)
        data = b""
        while b'"id": 1' not in data and b'"id":1' not in data:
            chunk = ours.recv(65536)
            assert chunk, proc.stderr.read() if proc.poll() is not None else "closed"
            data += chunk
        assert b'"capabilities"' in data
        assert runtime.daemon_pid()
    finally:
        ours.close()
        assert proc.wait(20) in (0, 1)


def test_dshd_serve_accepts_and_ignores_the_daemon_table(workspace: Path) -> None:
    write_workspace(workspace, extra_config="\n[daemon]\nidleTimeoutS = 0.5\n")
    with RawDaemon(workspace) as d:
        assert "result" in d.initialize()  # accepted: no invalid-config
        time.sleep(1.5)  # longer than the idle timeout, with nothing asked
        assert d.proc.poll() is None and d.request("dsh/session/list", {}) == {"sessions": []}
        assert d.shutdown_and_exit() == 0
