"""One connection to one MCP server, through the official SDK (the only module that
imports it: :mod:`dshd.mcp.servers` imports this one when the first server starts).

The SDK's transports and its ``ClientSession`` are async context managers that must be
entered and left in one task, so each connection runs in a task of its own
(:meth:`Connection._hold`) that starts the server, initializes the session, lists the
tools, then holds everything open until it is told to stop or the server's process ends.
Tool calls come from the agent's turn task over the session's streams.

A stdio server is started by the SDK in a new session (its own process group). Its pid
is found by a marker in its environment (the SDK does not expose its process), so that
its whole tree can be killed at once (:meth:`Connection.kill`, synchronous: it works from
the agent's ``close()``), and its exit is seen at once (a pidfd). Its stderr is kept as a
short tail for the reason when it dies, never copied to the daemon's log in full.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import secrets
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from dshd.mcp.config import McpServerSpec
from dshd.sandbox.runner import kill_tree

log = logging.getLogger(__name__)

MARKER_ENV = "DSHD_MCP_SERVER"
STDERR_TAIL = 2048  # bytes of a server's stderr kept for the reason it died
STOP_WAIT_S = 5.0  # how long a stopping connection's task may take before it is cancelled


@attrs.frozen
class Launch:
    """How to start a stdio server: the whole argv (bubblewrap's, or the command's own),
    its environment and the folder it starts in."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    # The host sockets the sandbox covers (network off), as listed when the argv was made:
    # one gone by the time bubblewrap starts makes that start fail (servers.py retries once).
    covered: tuple[Path, ...] = ()


class ServerGone(Exception):
    """The server's process ended, or its connection closed."""


def _read_proc(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _child_with_marker(marker: str) -> int | None:
    """Our own child process whose environment holds ``marker`` (the server we just
    started). Newest pids first: the child is almost always the highest one, so the scan
    stops after a few entries instead of reading every process's files (a wrapped pid
    counter only makes it read more)."""
    me = os.getpid()
    needle = f"{MARKER_ENV}={marker}".encode()
    for pid in sorted((int(name) for name in os.listdir("/proc") if name.isdigit()), reverse=True):
        try:
            stat = _read_proc(f"/proc/{pid}/stat")
            if int(stat[stat.rfind(b")") + 2 :].split(None, 2)[1]) != me:
                continue
            if needle in _read_proc(f"/proc/{pid}/environ").split(b"\0"):
                return pid
        except (OSError, ValueError, IndexError):
            continue
    return None


class _Tail:
    """A pipe whose last :data:`STDERR_TAIL` bytes are kept (the server's stderr)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.data = b""
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.read_fd, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self.read_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        self.data = (self.data + chunk)[-STDERR_TAIL:]

    def close_write(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def close(self) -> None:
        self.close_write()
        if self.read_fd >= 0:
            if self._loop is not None:
                self._loop.remove_reader(self.read_fd)
            os.close(self.read_fd)
            self.read_fd = -1

    def last_line(self) -> str | None:
        lines = [line.strip() for line in self.data.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else None


class Connection:
    """A server being started, running, or stopped (see the module docstring)."""

    def __init__(
        self,
        spec: McpServerSpec,
        root: Path,
        *,
        launch: Launch | None = None,
        headers: dict[str, str] | None = None,
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.root = root
        self.launch = launch
        self.headers = headers or {}
        self.on_gone = on_gone  # called once with the reason when a running server ends
        self.pid: int | None = None
        self.session: ClientSession | None = None
        self._marker = secrets.token_hex(12)
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        # A start nobody waits for any more (the agent closed meanwhile) fails quietly.
        self._ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._tail: _Tail | None = None

    # ---- start -------------------------------------------------------------------------

    async def start(self) -> list[Any]:
        """Start the server and answer its tools (SDK ``Tool`` values); raises on failure
        (the caller bounds it with the server's ``startupTimeoutS`` and then calls
        :meth:`aclose`)."""
        self._task = asyncio.get_running_loop().create_task(self._hold(), name=f"mcp-{self.spec.name}")
        return await asyncio.shield(self._ready)

    async def _list_roots(self, context: Any) -> Any:
        # The workspace is the one root dshd offers.
        return types.ListRootsResult(roots=[types.Root(uri=self.root.as_uri(), name=self.root.name)])

    async def _hold(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.launch is not None:
                    streams = await stack.enter_async_context(self._stdio())
                else:
                    client = create_mcp_http_client(headers=self.headers or None)
                    await stack.enter_async_context(client)
                    streams = await stack.enter_async_context(
                        streamable_http_client(self.spec.url or "", http_client=client)
                    )
                read, write = streams
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        list_roots_callback=self._list_roots,
                        client_info=types.Implementation(name="dshd", version="1"),
                    )
                )
                await session.initialize()
                tools: list[Any] = []
                cursor = None
                for _ in range(100):  # pages of tools; a server that never ends its list stops here
                    listed = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    tools += listed.tools
                    cursor = listed.next_cursor
                    if not cursor:
                        break
                self.session = session
                if not self._ready.done():
                    self._ready.set_result(tools)
                reason = await self._until_stopped()
                if reason is not None and not self._stopping and self.on_gone is not None:
                    self.on_gone(reason)
        except BaseException as exc:  # noqa: BLE001 - every way out is reported, none raised here
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else ServerGone("stopped"))
            elif not self._stopping and self.on_gone is not None:
                self.on_gone(self._gone_reason(f"its connection failed ({type(exc).__name__}: {exc})"))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            if self._tail is not None:
                self._tail.close()

    @contextlib.asynccontextmanager
    async def _stdio(self):
        launch = self.launch
        assert launch is not None
        tail = self._tail = _Tail()
        tail.start()
        errlog = os.fdopen(os.dup(tail.write_fd), "w")
        params = StdioServerParameters(
            command=launch.argv[0],
            args=list(launch.argv[1:]),
            env={**launch.env, MARKER_ENV: self._marker},
            cwd=launch.cwd,
        )
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                errlog.close()
                tail.close_write()
                self.pid = _child_with_marker(self._marker)
                _live.add(self)
                try:
                    yield streams
                finally:
                    if self._stopping:
                        self.kill()  # no grace: the agent is closing
        finally:
            _live.discard(self)
            if not errlog.closed:
                errlog.close()
            self._kill_group()  # whatever it left running in its group goes with it

    def _kill_group(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    async def _until_stopped(self) -> str | None:
        """Wait for a stop (None) or for the server's process to end (the reason)."""
        stop = asyncio.ensure_future(self._stop.wait())
        waits: set[asyncio.Future] = {stop}
        exited: asyncio.Future | None = None
        pidfd = -1
        if self.pid is not None:
            try:
                pidfd = os.pidfd_open(self.pid)
            except (OSError, AttributeError):
                pidfd = -1
            if pidfd >= 0:
                loop = asyncio.get_running_loop()
                exited = loop.create_future()
                loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
                waits.add(exited)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if pidfd >= 0:
                asyncio.get_running_loop().remove_reader(pidfd)
                os.close(pidfd)
        if exited is not None and exited.done() and not self._stop.is_set():
            return self._gone_reason("its process exited")
        return None

    def _gone_reason(self, what: str) -> str:
        said = self._tail.last_line() if self._tail is not None else None
        return f"{what}; its last words on stderr: {said}" if said else what

    # ---- calls -------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """The server's ``CallToolResult``; TimeoutError past ``timeout_s``, ServerGone
        when it is not running, the SDK's error when it answered with one."""
        session = self.session
        if session is None:
            raise ServerGone("it is not running")
        return await asyncio.wait_for(session.call_tool(tool, arguments), timeout_s)

    # ---- stop --------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL the server's whole process tree now (synchronous; safe to repeat)."""
        self._stopping = True
        if self.pid is not None:
            kill_tree(self.pid)

    def stop(self) -> None:
        """Kill the server and tell its task to let go (the task ends soon after)."""
        self.kill()
        self._stop.set()

    async def aclose(self) -> None:
        self.stop()
        task = self._task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_WAIT_S)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)


# Running stdio connections of this process: killed when it exits (the sandboxed ones die
# with it anyway, by --die-with-parent; a server run with sandbox = "none" would not).
_live: set[Connection] = set()


def kill_all() -> None:
    for connection in list(_live):
        with contextlib.suppress(Exception):
            connection.kill()


atexit.register(kill_all)
