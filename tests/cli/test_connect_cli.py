"""`dshd connect` / `dshd acp` as commands: the forwarder imports only the standard
library (the `dshd` console script reaches it without importing the package), and says
clearly what is wrong (usage errors exit 2, an unreachable daemon exits 1)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import DSHD, Runtime, connect_command

COMMAND = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]
HEAVY = ("dshd", "dshd_protocol", "pygls", "lsprotocol", "msgspec", "attrs", "cattrs", "acp", "asyncio")


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


def run(args: list[str], cwd: Path, env: dict, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(COMMAND + args, cwd=cwd, env={**os.environ, **env}, input=stdin, capture_output=True, timeout=60)


def test_the_dshd_script_starts_at_the_launcher() -> None:
    if not DSHD.exists():
        pytest.skip("no dshd console script beside this Python")
    script = DSHD.read_text()
    assert "from dshd_connect import main" in script and "from dshd.cli" not in script


@pytest.mark.slow
def test_the_forwarder_imports_only_the_standard_library(tmp_path: Path, runtime: Runtime) -> None:
    workspace = write_workspace(tmp_path / "ws")
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:  # the daemon runs
        assert "result" in editor.initialize()
        code = (
            "import sys, dshd_connect\n"
            "conn = dshd_connect.connect(sys.argv[1], 'dsh', start=False)\n"
            f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
            "print(repr({'pid': conn.pid, 'heavy': heavy}))\n"
        )
        out = subprocess.run([sys.executable, "-c", code, str(workspace)], env={**os.environ, **runtime.env},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        found = ast.literal_eval(out.stdout)
        assert found["pid"] == runtime.daemon_pid()  # it reached the daemon: the probe works
        assert found["heavy"] == [], found
        assert editor.shutdown_and_exit() == 0


def test_usage_errors_exit_2_and_say_why(tmp_path: Path, runtime: Runtime) -> None:
    for args, text in [
        (["connect", "--bogus"], b"unknown argument '--bogus'"),
        (["connect", "--workspace"], b"--workspace needs a value"),
        (["acp", "--question-timeout", "soon"], b"--question-timeout must be a number of seconds"),
        (["acp", "--question-timeout=0"], b"--question-timeout must be positive"),
    ]:
        out = run(args, tmp_path, runtime.env)
        assert out.returncode == 2 and text in out.stderr, (args, out.stderr)
    helped = run(["connect", "--help"], tmp_path, runtime.env)
    assert helped.returncode == 0 and b"usage: dshd connect" in helped.stdout


def test_no_daemon_to_reach_exits_1_saying_why(tmp_path: Path, runtime: Runtime) -> None:
    missing = run(["connect", "--workspace", str(tmp_path / "nope")], tmp_path, runtime.env)
    assert missing.returncode == 1 and b"no such folder" in missing.stderr, missing.stderr
    none = run(["connect", "--no-start"], tmp_path, runtime.env)
    assert none.returncode == 1 and b"no dshd daemon is running" in none.stderr, none.stderr
    assert not list(runtime.sockets.glob("*.lock"))  # --no-start started nothing


def test_a_socket_path_too_long_for_unix_is_refused_saying_how_to_fix_it(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    deep.mkdir(parents=True, mode=0o700)
    out = run(["connect"], tmp_path, {"XDG_RUNTIME_DIR": str(deep)})
    assert out.returncode == 1 and b"longer than a Unix socket allows" in out.stderr, out.stderr


def test_a_daemon_that_fails_to_start_is_reported_with_its_exit_code(tmp_path: Path, runtime: Runtime) -> None:
    """The daemon is started detached (not the forwarder's child): its exit code comes over
    the status pipe. A lock file that is a folder makes it fail before it listens."""
    import dshd_connect

    workspace = write_workspace(tmp_path / "ws")
    runtime.sockets.mkdir(mode=0o700)
    lock = runtime.sockets / dshd_connect.socket_name(str(workspace)).replace(".sock", ".lock")
    lock.mkdir()
    out = run(["connect"], workspace, runtime.env)
    assert out.returncode == 1 and b"the daemon failed to start (exit 1)" in out.stderr, out.stderr
    assert b".log" in out.stderr
    lock.rmdir()  # control: the same start, with nothing in the way, serves
    none = run(["connect", "--no-start"], workspace, runtime.env)
    assert b"no dshd daemon is running" in none.stderr  # the failed start left nothing running
    frames = b""
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}},
                    {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}):
        body = json.dumps(message).encode()
        frames += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    good = run(["connect"], workspace, {**runtime.env, "DSHD_CONNECT_COPY": "1"}, stdin=frames)
    assert good.returncode == 0 and b'"capabilities"' in good.stdout, good.stderr


def test_connect_inside_the_socket_wall_says_why_without_a_traceback(tmp_path):
    """In a sandbox whose socket wall refuses AF_UNIX, `dshd connect` says it cannot make a
    Unix socket (exit 1, one `dshd:` line), never a traceback. Control: outside the wall the
    same forwarder gets as far as dialling (it names the socket path, no wall word)."""
    import shutil

    from dshd.sandbox.seccomp import program
    from tests.sandbox_support import PYTHON

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (./run setup installs it)")
    forwarder = Path(__file__).resolve().parents[2] / "server" / "dshd_connect.py"
    copy = tmp_path / "client"
    (copy / "dshd").mkdir(parents=True)
    shutil.copy(forwarder, copy / "dshd_connect.py")
    shutil.copy(forwarder.parent / "dshd" / "__init__.py", copy / "dshd" / "__init__.py")
    argv = [PYTHON, "-I", str(copy / "dshd_connect.py"), "connect", "--workspace", str(tmp_path)]
    read, write = os.pipe()
    os.write(write, program("strict"))
    os.close(write)
    walled = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
         "--seccomp", str(read), "--", *argv],
        pass_fds=(read,), stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
    )
    os.close(read)
    assert walled.returncode == 1, walled
    assert b"Traceback" not in walled.stderr
    assert walled.stderr.startswith(b"dshd: cannot make a Unix socket to reach "), walled.stderr
    assert b"Operation not permitted" in walled.stderr
    # Control: without the wall the same copy makes its socket (it may then fail to start a
    # daemon in this bare setting, but not for want of a socket).
    plain = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net", "--", *argv],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    assert b"cannot make a Unix socket" not in plain.stderr, plain.stderr
