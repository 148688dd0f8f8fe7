"""Run one command and leave nothing behind.

The command starts in a new session (so its own process group, and no controlling
terminal), stdin from /dev/null, stdout and stderr merged into one pipe. Only the tail of
the output is kept (``output_cap`` bytes). The whole group, and every descendant found in
the process table, is killed with SIGKILL when:

- the timeout passes (``timed_out``);
- the awaiting task is cancelled (the turn was cancelled, the agent closed);
- the command itself exits (whatever it left running in the background goes with it);
- the daemon exits (:func:`kill_all`, also registered with ``atexit``).

A descendant that left the group (``setsid``) and whose parent already exited cannot be
found this way; in the sandboxed modes bubblewrap's PID namespace catches those too (the
kernel kills the whole namespace when its first process ends).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 64 * 1024
DRAIN_S = 1.0  # after the command exits, how long to wait for its output to end

_live: set[int] = set()  # process group ids of running commands


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # None when it did not exit by itself (timed out, or a signal)
    signal: int | None  # the signal that ended it, if one did
    timed_out: bool
    output: str  # the tail of stdout+stderr, decoded (invalid UTF-8 replaced)
    output_bytes: int  # everything it wrote
    kept_bytes: int  # how much of it is in ``output``
    duration_s: float


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


def kill_tree(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads and every descendant of ``pid``."""
    victims = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for victim in [pid, *victims]:
        try:
            os.kill(victim, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_all() -> None:
    """Kill every command still running (the daemon is going away)."""
    for pgid in list(_live):
        kill_tree(pgid)


atexit.register(kill_all)


async def run(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output_cap: int,
) -> RunResult:
    """Run ``argv``; raises OSError when it cannot be started (no such program)."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    _live.add(proc.pid)
    tail = bytearray()
    total = 0

    async def pump() -> None:
        nonlocal total
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            total += len(chunk)
            tail.extend(chunk)
            if len(tail) > 2 * output_cap:
                del tail[: len(tail) - output_cap]

    reader = asyncio.ensure_future(pump())
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
        # Done, or out of time: nothing it started may outlive it.
        kill_tree(proc.pid)
        await proc.wait()
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_S)
        except asyncio.TimeoutError:
            pass  # a writer we could not find still holds the pipe: keep what we have
    except BaseException:
        # Cancelled (the turn, the agent, the daemon): kill, reap, re-raise.
        kill_tree(proc.pid)
        try:
            await asyncio.shield(asyncio.wait_for(proc.wait(), 5))
        except BaseException:
            pass
        raise
    finally:
        _live.discard(proc.pid)
        reader.cancel()
    returncode = proc.returncode
    kept = bytes(tail[-output_cap:]) if output_cap else b""
    return RunResult(
        exit_code=None if timed_out or returncode is None or returncode < 0 else returncode,
        signal=-returncode if returncode is not None and returncode < 0 and not timed_out else None,
        timed_out=timed_out,
        output=kept.decode("utf-8", errors="replace"),
        output_bytes=total,
        kept_bytes=len(kept),
        duration_s=time.monotonic() - started,
    )
