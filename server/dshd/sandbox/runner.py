"""Run one command and leave nothing behind.

The command starts in a new session (so its own process group, and no controlling
terminal), stdin from /dev/null, stdout and stderr merged into one pipe. Only the tail of
the output is kept (``output_cap`` bytes). The whole group, and every descendant found in
the process table, is killed with SIGKILL when:

- the timeout passes (``timed_out``);
- the awaiting task is cancelled (the turn was cancelled, the agent closed);
- the command itself exits (whatever it left running in the background goes with it);
- the daemon exits (:func:`kill_all`, also registered with ``atexit``).

The command's exit is taken when the process exits, not when its output pipe closes: a
background process that keeps the pipe open must not turn an exit 0 into a timeout. A
process still holding the pipe after the exit (one that left the group with ``setsid``
and whose parent is gone, so the process table no longer ties it to the command) is
found by the pipe it holds and killed too.

What none of this catches (a process that detached *and* let go of the pipe) only a
sandbox catches: bubblewrap runs every command in its own PID namespace, and the kernel
kills the whole namespace when its first process ends; ``--die-with-parent`` covers the
daemon dying by SIGKILL.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

DRAIN_S = 1.0  # after the command exits, how long to wait for its output to end
HOLDERS_AFTER_S = 0.05  # how long the pipe may stay open after the exit before its holders are hunted

_live: set[int] = set()  # process group ids of running commands


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # None when it did not exit by itself (timed out, or a signal)
    signal: int | None  # the signal that ended it, if one did
    timed_out: bool  # True only when the timeout fired while the command was still running
    output: str  # the tail of stdout+stderr, decoded (invalid UTF-8 replaced)
    output_bytes: int  # everything it wrote
    kept_bytes: int  # how much of it is in ``output``
    duration_s: float
    # With ``sandbox_status``: True when bubblewrap failed to set its sandbox up, so the
    # command never ran (it exited 1 without reporting a command's exit code).
    setup_failed: bool = False


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc (one pass)."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    children = _children()
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _writes(fdinfo: str) -> bool:
    """Whether /proc/<pid>/fdinfo/<fd> is open for writing (the pipe's write end; a process
    that forked off the daemon a moment ago may hold the daemon's read end)."""
    for line in Path(fdinfo).read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    return False


def pipe_holders(inode: int) -> list[int]:
    """Pids (other than ours) holding the write end of the pipe ``inode``."""
    target = f"pipe:[{inode}]"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = os.scandir(f"{entry.path}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) == target and _writes(f"{entry.path}/fdinfo/{fd.name}"):
                        found.append(int(entry.name))
                        break
                except (OSError, ValueError):
                    continue
    return found


def _kill(pids: list[int]) -> None:
    for victim in pids:
        try:
            os.kill(victim, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads and every descendant of ``pid``."""
    victims = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill([pid, *victims])


def kill_all() -> None:
    """Kill every command still running (the daemon is going away)."""
    for pgid in list(_live):
        kill_tree(pgid)


atexit.register(kill_all)


class _Command(asyncio.SubprocessProtocol):
    """Keeps the output's tail; tells apart the process exiting and its pipe closing."""

    def __init__(self, output_cap: int) -> None:
        loop = asyncio.get_running_loop()
        self.output_cap = output_cap
        self.tail = bytearray()
        self.total = 0
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.total += len(data)
        self.tail.extend(data)
        if len(self.tail) > 2 * self.output_cap:
            del self.tail[: len(self.tail) - self.output_cap]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _pipe_inode(transport: asyncio.SubprocessTransport) -> int | None:
    pipe = transport.get_pipe_transport(1)
    handle = pipe.get_extra_info("pipe") if pipe is not None else None
    try:
        return os.fstat(handle.fileno()).st_ino if handle is not None else None
    except (OSError, ValueError):
        return None


async def _drain(command: _Command, inode: int | None) -> None:
    """Wait for the output to end; hunt down whoever still holds the pipe."""
    try:
        await asyncio.wait_for(asyncio.shield(command.closed), HOLDERS_AFTER_S)
        return
    except asyncio.TimeoutError:
        pass
    if inode is not None:
        _kill(pipe_holders(inode))
    try:
        await asyncio.wait_for(asyncio.shield(command.closed), DRAIN_S)
    except asyncio.TimeoutError:
        pass  # a writer we could not find still holds the pipe: keep what we have


async def run(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output_cap: int,
    sandbox_status: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> RunResult:
    """Run ``argv``; raises OSError when it cannot be started (no such program).
    ``pass_fds``: descriptors it inherits (the launcher's memfds; the caller closes them).

    ``sandbox_status``: ``argv`` is a bubblewrap argv; bubblewrap is asked to report on a
    pipe (``--json-status-fd``), so a sandbox that failed to set up is told apart from a
    command that failed (the output alone cannot say: a command can print anything)."""
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    status_read = status_write = -1
    if sandbox_status:
        status_read, status_write = os.pipe()
        os.set_blocking(status_read, False)
        argv = [argv[0], "--json-status-fd", str(status_write), *argv[1:]]
    try:
        transport, command = await loop.subprocess_exec(
            lambda: _Command(output_cap),
            *argv,
            cwd=str(cwd),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=((status_write,) if sandbox_status else ()) + tuple(pass_fds),
        )
    except BaseException:
        if sandbox_status:
            os.close(status_read)
            os.close(status_write)
        raise
    if sandbox_status:
        os.close(status_write)
    pid = transport.get_pid()
    _live.add(pid)
    inode = _pipe_inode(transport)
    timed_out = False
    try:
        done, _ = await asyncio.wait({command.exited}, timeout=timeout_s)
        if not done:
            kill_tree(pid)
            try:
                await asyncio.wait_for(asyncio.shield(command.exited), 5)
            except asyncio.TimeoutError:
                pass
            # The timer fired while it ran; if it ended on its own in that instant, say so.
            returncode = transport.get_returncode()
            timed_out = returncode is None or returncode == -signal.SIGKILL
        else:
            kill_tree(pid)  # done: nothing it started may outlive it
        await _drain(command, inode)
    except BaseException:
        # Cancelled (the turn, the agent, the daemon): kill, reap, re-raise.
        kill_tree(pid)
        try:
            await asyncio.shield(asyncio.wait_for(asyncio.shield(command.exited), 5))
        except BaseException:
            pass
        if inode is not None:
            _kill(pipe_holders(inode))
        raise
    finally:
        _live.discard(pid)
        transport.close()
        status = _read_status(status_read) if sandbox_status else None
    returncode = transport.get_returncode()
    kept = bytes(command.tail[-output_cap:]) if output_cap else b""
    return RunResult(
        exit_code=None if timed_out or returncode is None or returncode < 0 else returncode,
        signal=-returncode if returncode is not None and returncode < 0 and not timed_out else None,
        timed_out=timed_out,
        output=kept.decode("utf-8", errors="replace"),
        output_bytes=command.total,
        kept_bytes=len(kept),
        duration_s=time.monotonic() - started,
        # bubblewrap reports the command's exit ("exit-code") whenever the command ran; it
        # writes "child-pid" before its setup, so that one proves nothing.
        setup_failed=status is not None and not timed_out and returncode == 1 and b'"exit-code"' not in status,
    )


def _read_status(fd: int) -> bytes:
    """What bubblewrap wrote on its status pipe (a few small JSON documents), then closed."""
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass  # the sandboxed command may hold the write end still: what is there is enough
    except OSError:
        pass
    finally:
        os.close(fd)
    return data
