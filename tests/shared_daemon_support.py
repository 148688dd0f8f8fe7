"""Helpers for tests that go through the shared daemon (`dshd connect`, `dshd acp`):
a private, short $XDG_RUNTIME_DIR per test (the person's own daemons are never touched),
the daemons found by their lock files, and stopping exactly the daemons a test started."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

DSHD = Path(sys.executable).with_name("dshd")


def connect_command(workspace: Path | None = None) -> list[str]:
    """`dshd connect` (the forwarder editors start)."""
    base = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]
    return base + ["connect"] + (["--workspace", str(workspace)] if workspace is not None else [])


class Runtime:
    """A private runtime folder (short: a socket path has at most 107 bytes) and the
    daemons whose lock files are in it."""

    def __init__(self, base: str = "/tmp") -> None:
        self.path = Path(tempfile.mkdtemp(prefix="dshx-", dir=base))
        os.chmod(self.path, 0o700)
        self.extra: dict[str, str] = {}  # more variables for the forwarders (DSHD_CONNECT_COPY)

    @property
    def env(self) -> dict[str, str]:
        return {"XDG_RUNTIME_DIR": str(self.path), **self.extra}

    @property
    def sockets(self) -> Path:
        return self.path / "dshd"

    def daemon_pids(self) -> list[int]:
        """Pids written in the lock files of this runtime whose process is a live
        `dshd daemon` (a pid reused by another process is not one of ours)."""
        pids = []
        for lock in self.sockets.glob("*.lock") if self.sockets.exists() else []:
            text = lock.read_text().strip()
            if text.isdigit() and is_shared_daemon(int(text)):
                pids.append(int(text))
        return pids

    def daemon_pid(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.daemon_pids()
            if pids:
                return pids[0]
            time.sleep(0.02)
        raise TimeoutError("no shared daemon runs in " + str(self.path))

    def stop(self) -> None:
        """SIGKILL the daemons this runtime's lock files name (ours only), remove it."""
        for pid in self.daemon_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self.daemon_pids():
            wait_gone(pid, 5)
        shutil.rmtree(self.path, ignore_errors=True)


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def is_shared_daemon(pid: int) -> bool:
    args = cmdline(pid)
    return "daemon" in args and "--workspace" in args and alive(pid)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


def daemons_of(workspace: Path) -> list[int]:
    """Every live `dshd daemon --workspace <workspace>` process, found in /proc (the racing
    starts that lost the lock included, while they live)."""
    want = os.path.realpath(workspace)
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            args = cmdline(int(entry.name))
            if "daemon" in args and "--workspace" in args:
                at = args.index("--workspace")
                if at + 1 < len(args) and os.path.realpath(args[at + 1]) == want and alive(int(entry.name)):
                    found.append(int(entry.name))
    return found


# A client of a daemon's socket speaking dsh by hand, run as ``python -I -c DSH_PROBE SOCKET
# [trusted]``: prints what it got as JSON ({"connect": errno} when it could not even connect;
# "send"/"recv" when the daemon closed it). ``trusted``: it claims a trusted folder, as an
# editor's settings would.
DSH_PROBE = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": exc.errno}))
    sys.exit()
params = {"processId": None, "rootUri": None, "capabilities": {}}
if sys.argv[2:] == ["trusted"]:
    params["initializationOptions"] = {"trusted": True}
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
try:
    s.sendall(b"dsh\n" + b"Content-Length: %d\r\n\r\n" % len(body) + body)
except OSError as exc:  # the daemon closed it first
    print(json.dumps({"send": exc.errno, "got": ""}))
    sys.exit()
s.settimeout(30)
data = b""
while b'"capabilities"' not in data:
    try:
        chunk = s.recv(65536)
    except OSError as exc:
        print(json.dumps({"recv": exc.errno, "got": data.decode(errors="replace")}))
        sys.exit()
    if not chunk:
        break
    data += chunk
print(json.dumps({"got": data.decode(errors="replace")}))
"""


def session_list_frames(workspace: Path) -> bytes:
    """LSP-framed messages of one short editor visit: initialize, list the sessions, shut down."""
    import json

    out = b""
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "dsh/session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ):
        body = json.dumps(message).encode()
        out += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    return out
