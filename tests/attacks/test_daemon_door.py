"""The shared daemon's door, attacked from inside a sandbox.

A sandboxed command of any dshd (`dshd run`, `dshd serve`, `dshd doctor`, the daemon
itself) with the network on shares the machine's sockets; if it reaches the workspace's
shared daemon it can connect as a client, initialize as trusted with `full-access`, prompt,
and have the daemon's agent write outside the workspace. Two walls stop it: the sandbox
hides the daemon's socket folder, and the daemon refuses any peer that is not in its own
PID namespace (every sandbox has its own). These tests attack the second wall on its own
(the socket folder is bound into the sandbox on purpose), then the whole chain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import dshd_connect
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.sandbox_support import AVAILABLE, PYTHON, WHY_NOT
from tests.shared_daemon_support import DSH_PROBE, DSHD, Runtime, connect_command

pytestmark = [pytest.mark.sandbox, pytest.mark.skipif(not AVAILABLE, reason=f"no sandbox here: {WHY_NOT}")]


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


def _bwrap(sockets: Path, *, own_pid_namespace: bool) -> list[str]:
    """A real bubblewrap sandbox sharing the network (so the socket is reachable) with the
    daemon's socket folder bound in explicitly: what is tested is the daemon's own refusal,
    not whether a sandbox hides the folder."""
    argv = [shutil.which("bwrap"), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(sockets), str(sockets), "--die-with-parent", "--new-session"]
    if own_pid_namespace:
        argv.append("--unshare-pid")
    return argv


def _probe(sock: Path, prefix: list[str]) -> dict:
    out = subprocess.run(prefix + [PYTHON, "-I", "-c", DSH_PROBE, str(sock), "trusted"], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_peer_in_a_sandboxs_pid_namespace_is_refused_unanswered(tmp_path: Path, runtime: Runtime) -> None:
    workspace = write_workspace(tmp_path / "ws")
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        assert "result" in editor.initialize()
        [sock] = runtime.sockets.glob("*.sock")
        # Control: the same probe outside any sandbox is served (a full initialize answer).
        mine = _probe(sock, [])
        assert mine["got"].startswith("ok dshd ") and '"capabilities"' in mine["got"], mine
        # Control: inside bubblewrap but in the host's PID namespace, it is served too: the
        # wrapping itself does not break the probe, the namespace is what decides.
        shared_ns = _probe(sock, _bwrap(runtime.sockets, own_pid_namespace=False))
        assert shared_ns["got"].startswith("ok dshd "), shared_ns
        # The attack: a sandbox with its own PID namespace reaches the socket (it connects:
        # no ENOENT, EACCES, ECONNREFUSED) and is closed unanswered.
        sandboxed = _probe(sock, _bwrap(runtime.sockets, own_pid_namespace=True))
        assert "connect" not in sandboxed, sandboxed
        assert sandboxed["got"] == "", sandboxed  # no "ok dshd", no initialize answer
        log = sock.with_suffix(".log").read_text()
        assert "it is in another PID namespace" in log, log
        # dshd connect itself, in that sandbox, is told why (and does not start daemons
        # there for its whole start timeout).
        started = time.monotonic()
        forwarder = subprocess.run(_bwrap(runtime.sockets, own_pid_namespace=True) + connect_command(workspace),
                                   env={**os.environ, **runtime.env}, input=b"", capture_output=True, timeout=60)
        assert forwarder.returncode == 1 and b"closes our connections unanswered" in forwarder.stderr, forwarder.stderr
        assert time.monotonic() - started < 15
        assert not forwarder.stdout
        # The daemon serves on.
        assert _probe(sock, [])["got"].startswith("ok dshd ")
        assert editor.request("dsh/session/list", {}) is not None
        assert editor.shutdown_and_exit() == 0


# Run by the sandboxed command (and, as the control, by the test itself): `dshd connect` to
# the workspace's daemon, initialize as trusted with full-access and no approvals, open a
# session, prompt. The daemon's scripted agent then runs `touch <outside>/ESCAPED`.
# `dshd connect` is dshd's own launcher module (dshd_connect.py, the standard library only,
# with the package's __init__.py beside it for the version in the socket's name) run by this
# interpreter: the driver gets the path of a copy in the workspace, because the console
# script of a checkout under /tmp is not in a workspace-write sandbox (its /tmp is its own),
# and an attacker brings its own client anyway.
DRIVER = r"""
import json, os, subprocess, sys, threading
dshd, workspace, runtime = sys.argv[1:4]
env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
proc = subprocess.Popen([sys.executable, "-I", dshd, "connect", "--workspace", workspace, "--no-start"], env=env,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
timer = threading.Timer(60, proc.kill)
timer.daemon = True
timer.start()
def send(message):
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    proc.stdin.flush()
def answer(want):
    while True:
        length = None
        while True:
            line = proc.stdout.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message = json.loads(proc.stdout.read(length))
        if message.get("id") == want and "method" not in message:
            return message
        if "method" in message and "id" in message:  # a question: decline it
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
options = {"trusted": True, "config": {"model": {"provider": "scripted", "script": "inner.json"},
           "tools": {"sandbox": "full-access", "network": True, "approve": []}}}
send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"processId": None, "rootUri": "file://" + workspace, "capabilities": {}, "initializationOptions": options}})
got = answer(1)
if got is None or "result" not in got:
    print("driver: not served:", proc.stderr.read().decode(errors="replace").strip()[:300])
    sys.exit()
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
send({"jsonrpc": "2.0", "id": 2, "method": "dsh/session/create", "params": {}})
created = answer(2)
if created is None or "result" not in created:
    print("driver: no session:", json.dumps(created))
    sys.exit()
agent = created["result"]["agentId"]
send({"jsonrpc": "2.0", "id": 3, "method": "dsh/agent/prompt", "params": {"agentId": agent, "text": "go"}})
prompted = answer(3)
send({"jsonrpc": "2.0", "id": 4, "method": "dsh/config/get", "params": {}})
config = answer(4)
print("driver: prompted:", json.dumps(prompted), json.dumps(config and config.get("result", {}).get("effective", {}).get("model")))
proc.kill()
"""


@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
def test_a_sandboxed_command_cannot_make_the_shared_daemon_write_outside_the_workspace(tmp_path: Path, mode: str) -> None:
    """The whole chain: `dshd run` with the network on (the person's trusted config) runs a
    command that runs `dshd connect` to the workspace's shared daemon and asks it, as a
    trusted editor with full-access and no approvals, to write outside the workspace (the
    command itself writes nothing there). Control: the same driver run by the test
    (outside the sandbox) gets it done."""
    dshd = str(DSHD) if DSHD.exists() else None
    if dshd is None:
        pytest.skip("no dshd console script beside this Python")
    runtime = Runtime(base="/var/tmp")  # a workspace-write sandbox has a /tmp of its own
    outside = tmp_path / "outside"
    outside.mkdir()
    escaped = outside / "ESCAPED"
    workspace = tmp_path / "ws"
    connect = workspace / "client" / "dshd_connect.py"  # copied below, with driver.py
    driver = f"{PYTHON} -I driver.py {connect} {workspace} {runtime.path}"
    write_workspace(
        workspace,
        replies=[{"toolCalls": [{"name": "run_command", "arguments": {"command": driver, "timeoutMs": 90000}}]}, {"text": "done"}],
        plugins=["plan", "goals", "tools"],
        extra_config=f'\n[tools]\nsandbox = "{mode}"\nnetwork = true\napprove = []\n',
    )
    (workspace / "driver.py").write_text(DRIVER)
    (connect.parent / "dshd").mkdir(parents=True)
    shutil.copyfile(dshd_connect.__file__, connect)
    shutil.copyfile(Path(dshd_connect.__file__).with_name("dshd") / "__init__.py", connect.parent / "dshd" / "__init__.py")
    (workspace / "inner.json").write_text(json.dumps({"replies": [
        {"toolCalls": [{"name": "run_command", "arguments": {"command": f"touch {escaped}"}}]}, {"text": "written"}]}))
    user = tmp_path / "config-home"
    (user / "dsh").mkdir(parents=True)
    (user / "dsh" / "config.toml").write_text(f"[trust]\nfolders = [{json.dumps(str(workspace))}]\n")
    env = {**os.environ, **runtime.env, "XDG_CONFIG_HOME": str(user)}
    try:
        # An editor's forwarder starts the workspace's shared daemon. It does not initialize:
        # the first connection to initialize sets the workspace's config for all, and that
        # is the attacker's own (trusted, full-access, no approvals) in both runs below.
        with RawDaemon(workspace, env={**runtime.env, "XDG_CONFIG_HOME": str(user)}, command=connect_command()) as editor:
            runtime.daemon_pid()
            # The attack, from a sandboxed command of an in-process dshd.
            # `dshd run` would go through a shared daemon it finds: it is given another
            # runtime folder, so it runs in-process (the driver knows where to look).
            elsewhere = Runtime(base="/var/tmp")
            run = subprocess.run([dshd, "run", "--json", "--timeout", "150", "probe the daemon"], cwd=workspace,
                                 env={**env, **elsewhere.env},
                                 capture_output=True, text=True, timeout=200)
            elsewhere.stop()
            assert "driver:" in run.stdout, (run.stdout[-2000:], run.stderr[-2000:])  # the driver ran
            assert "driver: prompted" not in run.stdout, run.stdout[-2000:]
            assert not escaped.exists(), "the shared daemon wrote outside the workspace for a sandboxed command"
            # Control: the same driver, run by the test, gets the daemon's agent to write there.
            control = subprocess.run([PYTHON, "-I", str(workspace / "driver.py"), str(connect), str(workspace), str(runtime.path)],
                                     capture_output=True, text=True, timeout=120, env=env)
            assert "driver: prompted" in control.stdout, (control.stdout, control.stderr)
            assert escaped.exists(), (control.stdout, next(runtime.sockets.glob("*.log")).read_text())
            editor.kill()
    finally:
        runtime.stop()
