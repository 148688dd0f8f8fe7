"""Shared by the sandbox tests: probes a command runs (each prints the errno name it met,
or OK), a loopback listener, the process table, and whether bubblewrap runs here."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import sys
import time
from pathlib import Path

import pytest

from dshd.sandbox import probe

# The interpreter itself, not the venv's link to it: in workspace-write the sandbox's /tmp is
# private and empty, so a checkout (and its .venv) under /tmp is not there, but the real
# interpreter is. The probes below need only the standard library.
PYTHON = os.path.realpath(sys.executable)

# `python -c WRITE path`: OK, or the errno name of the failed write (EROFS, EACCES, ...).
WRITE = (
    "import errno, sys\n"
    "try:\n"
    "    open(sys.argv[1], 'w').write('x')\n"
    "    print('OK')\n"
    "except OSError as e:\n"
    "    print(errno.errorcode[e.errno])\n"
)
# `python -c CONNECT port`: OK, or the errno name of the failed TCP connect to 127.0.0.1.
CONNECT = (
    "import errno, socket, sys\n"
    "s = socket.socket()\n"
    "s.settimeout(5)\n"
    "try:\n"
    "    s.connect(('127.0.0.1', int(sys.argv[1])))\n"
    "    print('OK')\n"
    "except OSError as e:\n"
    "    print(errno.errorcode.get(e.errno, 'timeout'))\n"
)

# `python -c UNIX_CONNECT target...`: per target "target OK" or "target ERRNO" for a connect
# to a Unix socket (a leading @ names an abstract socket). socket() is inside the try: a
# sandbox may refuse to make the socket at all (EPERM).
UNIX_CONNECT = (
    "import errno, socket, sys\n"
    "for target in sys.argv[1:]:\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_UNIX)\n"
    "        s.settimeout(5)\n"
    "        s.connect('\\0' + target[1:] if target.startswith('@') else target)\n"
    "        print(target, 'OK')\n"
    "    except OSError as e:\n"
    "        print(target, errno.errorcode.get(e.errno, 'timeout'))\n"
)


def sandbox_available() -> tuple[bool, str]:
    result = asyncio.run(probe())
    return result.ok, result.reason


AVAILABLE, WHY_NOT = sandbox_available()
needs_sandbox = pytest.mark.skipif(not AVAILABLE, reason=f"no sandbox here: {WHY_NOT}")


class Listener:
    """A TCP listener on the host's 127.0.0.1 that accepts and closes."""

    def __enter__(self) -> "Listener":
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


def processes_with(marker: str) -> list[int]:
    """Pids whose command line holds ``marker`` (the process table, as ps reads it)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            state = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        zombie = state[state.rfind(b")") + 2 : state.rfind(b")") + 3] == b"Z"
        if marker.encode() in cmdline and not zombie:
            found.append(int(entry.name))
    return found


async def gone(marker: str, within_s: float = 10.0) -> list[int]:
    """Wait until no live process carries ``marker`` (a killed process still needs CPU to
    tear down, which a loaded machine may not give it at once); the pids left after
    ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


async def appeared(marker: str, within_s: float = 10.0) -> list[int]:
    """Wait until a live process carries ``marker`` (a child its shell left behind may not
    have been scheduled yet when the shell exits); the pids found, [] after ``within_s``."""
    deadline = time.monotonic() + within_s
    while not (found := processes_with(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return found


def sleeper(marker: str, seconds: int = 300) -> str:
    """A shell word list for a process that sleeps and carries ``marker`` in its argv."""
    return f"{PYTHON} -c 'import time; time.sleep({seconds})' {marker}"


def fake_failing_bwrap(folder: Path) -> Path:
    """A `bwrap` that fails as Ubuntu's does when AppArmor refuses user namespaces."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return fake


def real_bwrap() -> str | None:
    return shutil.which("bwrap")


class UnixListeners:
    """Unix stream sockets the host listens on, by name: each a path, or @name (abstract).
    Folders made for them are removed afterwards."""

    def __init__(self, **where: str) -> None:
        self.where = where
        self.socks: list[socket.socket] = []
        self.made: list[Path] = []

    def __enter__(self) -> "UnixListeners":
        for target in self.where.values():
            sock = socket.socket(socket.AF_UNIX)
            if target.startswith("@"):
                sock.bind("\0" + target[1:])
            else:
                folder = Path(target).parent
                if not folder.exists():
                    folder.mkdir(parents=True)
                    self.made.append(folder)
                sock.bind(target)
                self.made.insert(0, Path(target))
            sock.listen(16)
            self.socks.append(sock)
        return self

    def __exit__(self, *exc) -> None:
        for sock in self.socks:
            sock.close()
        for path in self.made:
            if path.is_dir():
                os.rmdir(path)
            else:
                path.unlink(missing_ok=True)


def connect_results(output: str) -> dict[str, str]:
    """UNIX_CONNECT's output as target -> OK or the errno name."""
    return dict(line.rsplit(" ", 1) for line in output.strip().splitlines())


def run_folder() -> Path:
    """A folder under /run a test may make sockets and links in: /run itself (root), else
    the $XDG_RUNTIME_DIR under it that a login session has; the test is skipped, saying
    why, when there is neither."""
    candidates = [Path("/run"), Path(os.environ.get("XDG_RUNTIME_DIR") or "/nonexistent")]
    for folder in candidates:
        if folder.is_dir() and (folder == Path("/run") or Path("/run") in folder.parents) and os.access(folder, os.W_OK):
            return folder
    pytest.skip("no writable folder under /run here (not root, no $XDG_RUNTIME_DIR)")
