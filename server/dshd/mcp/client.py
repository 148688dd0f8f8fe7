"""One connection to one MCP server, through the official SDK (the only module that
imports it: :mod:`dshd.mcp.servers` imports this one when the first server starts).

The SDK's transports and its ``ClientSession`` are async context managers that must be
entered and left in one task, so each connection runs in a task of its own
(:meth:`Connection._hold`) that starts the server, initializes the session, lists the
tools, then holds everything open until it is told to stop or the server's process ends.
Tool calls come from the agent's turn task over the session's streams.

A streamable HTTP server has no process of dshd's to watch: its connection counts as lost
when the SDK's transport ends (its task group fails on a refused or reset POST, or its
read stream ends), and when a call ends with the SDK's "connection closed" error and a
ping then fails too (a server that answers the ping gave that error itself: it stays a
failed result only). Either way :attr:`Connection.on_gone` is called once, with the
reason, before the call that found it out returns. Nothing polls an idle server.

Its session can also end while its connection is fine: a server restarted at the same
address (or one that dropped the session) answers the session's requests with HTTP 404,
which the SDK turns into a JSON-RPC error (-32600 "Session not found" / "Session
terminated"). An HTTP hook counts 404s to POSTs that carry the session's id; a call whose
error came with one, and whose ping then gets a 404 too, ends the session the same way
(once, never reconnected). A 404 that says "method not found" is an ordinary error.

A stdio server is started by the SDK in a new session (its own process group). Its pid
is found by a marker in its environment (the SDK does not expose its process), so that
its whole tree can be killed at once (:meth:`Connection.kill`, synchronous: it works from
the agent's ``close()``), and its exit is seen at once (a pidfd). Its stderr is kept as a
short tail for the reason when it dies, never copied to the daemon's log in full.

A server's ``notifications/tools/list_changed`` calls :attr:`Connection.on_tools_changed`
(nothing more: servers.py lists the tools again through :meth:`Connection.list_tools`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import secrets
import signal
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from dshd.formats import shown
from dshd.mcp.config import McpServerSpec
from dshd.sandbox.runner import kill_tree

log = logging.getLogger(__name__)

MARKER_ENV = "DSHD_MCP_SERVER"
STDERR_TAIL = 2048  # bytes of a server's stderr kept for the reason it died
STOP_WAIT_S = 5.0  # how long a stopping connection's task may take before it is cancelled
PING_S = 5.0  # how long an HTTP server whose call's connection closed has to answer a ping
LOST_WAIT_S = 1.0  # how long such a call waits for the transport to say why it ended


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
    """The server's process ended, or its connection closed. ``not_run``: the call was
    refused before it ran (its session was unknown to the server)."""

    def __init__(self, reason: str, *, not_run: bool = False) -> None:
        super().__init__(reason)
        self.not_run = not_run


def _host_port(url: str) -> str:
    """The host (and port, when the URL gives one) of ``url``: never its user, path,
    query or fragment, which may hold a token."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return ""
    host = shown(host[:100])  # one line, whatever the config's URL held
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if host and port is not None else host


def session_ended_reason(url: str) -> str:
    where = _host_port(url)
    at = f"the server at {where}" if where else "the server"
    return f"its session ended: {at} no longer knows it (restarted?); open the session again to reconnect"


def _short_error(exc: BaseException) -> str:
    """An error as one short line; a group (the SDK's task groups) shows its first real
    error, not the cancellations it caused."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    text = str(exc).strip()
    text = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class _WatchedReadStream:
    """The HTTP transport's read stream, as the session reads it, with its end seen: a
    transport that stops by itself (its POST writer failed) only closes this stream, and
    the session alone would not say so."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended.set()
            raise

    def __aiter__(self) -> "_WatchedReadStream":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_WatchedReadStream":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


async def _all_tools(session: ClientSession) -> list[Any]:
    """Every tool the session's server lists, page by page."""
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # pages of tools; a server that never ends its list stops here
        listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += listed.tools
        cursor = listed.next_cursor
        if not cursor:
            break
    return tools


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

    def _read(self) -> bool:
        """One read of the pipe; whether more may follow at once (False: nothing there now,
        or its end)."""
        try:
            chunk = os.read(self.read_fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return False
        self.data = (self.data + chunk)[-STDERR_TAIL:]
        return True

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

    def drain(self) -> None:
        """Read what is in the pipe now: a process's exit can be seen before the loop has
        read the last words it wrote."""
        for _ in range(64):  # at most 4 MiB: the tail keeps the end of it
            if self.read_fd < 0 or not self._read():
                return

    def last_line(self) -> str | None:
        self.drain()
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
        on_tools_changed: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.root = root
        self.launch = launch
        self.headers = headers or {}
        self.on_gone = on_gone  # called once with the reason when a running server ends
        self.on_tools_changed = on_tools_changed  # the server sent notifications/tools/list_changed
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
        self._read_ended = asyncio.Event()  # the HTTP transport's read stream ended
        self.lost: str | None = None  # why an HTTP server's connection counts as lost
        self._lost_told = asyncio.Event()  # set with ``lost``
        self._session_404s = 0  # POSTs with the session's id answered 404 (its session is unknown)

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

    async def _on_message(self, message: Any) -> None:
        # The SDK spawns this for each notification: it only tells, never waits here.
        if isinstance(message, types.ToolListChangedNotification) and self.on_tools_changed is not None:
            self.on_tools_changed()

    async def list_tools(self) -> list[Any]:
        """The server's tools listed again (all pages); ServerGone when it is not running.
        The caller bounds it (servers.py: startupTimeoutS)."""
        session = self.session
        if session is None:
            raise ServerGone(self.lost or "it is not running")
        return await _all_tools(session)

    async def _hold(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.launch is not None:
                    streams = await stack.enter_async_context(self._stdio())
                else:
                    client = create_mcp_http_client(headers=self.headers or None)
                    client.event_hooks["response"].append(self._count_session_404)
                    await stack.enter_async_context(client)
                    streams = await stack.enter_async_context(
                        streamable_http_client(self.spec.url or "", http_client=client)
                    )
                read, write = streams
                if self.launch is None:
                    read = _WatchedReadStream(read, self._read_ended)
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        list_roots_callback=self._list_roots,
                        message_handler=self._on_message,
                        client_info=types.Implementation(name="dshd", version="1"),
                    )
                )
                await session.initialize()
                tools = await _all_tools(session)
                self.session = session
                if not self._ready.done():
                    self._ready.set_result(tools)
                reason = await self._until_stopped()
                if reason is not None and self.launch is None:
                    self._connection_lost(reason)
                elif reason is not None and not self._stopping and self.on_gone is not None:
                    self.on_gone(reason)
        except BaseException as exc:  # noqa: BLE001 - every way out is reported, none raised here
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else ServerGone("stopped"))
            elif self.launch is None:
                # The HTTP transport's task group failed: a POST was refused or reset.
                self._connection_lost(f"its connection was lost: {_short_error(exc)}")
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
        """Wait for a stop (None) or for the server's process, or its HTTP transport, to
        end (the reason)."""
        stop = asyncio.ensure_future(self._stop.wait())
        waits: set[asyncio.Future] = {stop}
        ended: asyncio.Future | None = None
        if self.launch is None:
            ended = asyncio.ensure_future(self._read_ended.wait())
            waits.add(ended)
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
            if ended is not None:
                ended.cancel()
            if pidfd >= 0:
                asyncio.get_running_loop().remove_reader(pidfd)
                os.close(pidfd)
        if self._stop.is_set():
            return None
        if exited is not None and exited.done():
            return self._gone_reason("its process exited")
        if ended is not None and ended.done():
            return "its connection was lost: the transport's stream ended"
        return None

    def _connection_lost(self, reason: str) -> str:
        """Once: an HTTP server's connection is lost for ``reason``; on_gone is told (not
        when dshd itself is stopping it). Answers the first reason given."""
        if self.lost is None:
            self.lost = reason
            self._lost_told.set()
            if not self._stopping and self.on_gone is not None:
                self.on_gone(reason)
        return self.lost

    async def _count_session_404(self, response: Any) -> None:
        # Called by httpx2 once a response's headers are in, before the SDK reads its body
        # and hands the call its error: the count is up to date when the call fails.
        request = response.request
        if response.status_code == 404 and request.method == "POST" and MCP_SESSION_ID in request.headers:
            self._session_404s += 1

    def _gone_reason(self, what: str) -> str:
        said = self._tail.last_line() if self._tail is not None else None
        return f"{what}; its last words on stderr: {said}" if said else what

    # ---- calls -------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """The server's ``CallToolResult``; TimeoutError past ``timeout_s``, ServerGone
        when it is not running or its HTTP connection is lost (on_gone told first), the
        SDK's error when it answered with one. Never longer than ``timeout_s`` in all."""
        session = self.session
        if session is None:
            raise ServerGone(self.lost or "it is not running")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        refused_before = self._session_404s
        try:
            return await asyncio.wait_for(session.call_tool(tool, arguments), timeout_s)
        except MCPError as exc:
            if self.launch is not None:
                raise
            if exc.code == types.CONNECTION_CLOSED:
                lost = await self._lost_after(session, exc, deadline)
                if lost is None:
                    raise  # the server answers: that error was its own
                raise ServerGone(lost) from None
            if self._session_404s > refused_before and exc.code != types.METHOD_NOT_FOUND:
                if await self._session_ended(session, deadline):
                    raise ServerGone(self.lost or session_ended_reason(""), not_run=True) from None
            raise

    async def _session_ended(self, session: ClientSession, deadline: float) -> bool:
        """After a call answered 404 with its session's id: whether the session is gone
        (a ping gets a 404 too; the connection is then failed once). A ping answered, or one
        that fails otherwise, leaves the call's error an ordinary one."""
        if self.lost is not None:
            return True
        loop = asyncio.get_running_loop()
        refused_before = self._session_404s
        try:
            await asyncio.wait_for(session.send_ping(), max(0.0, min(PING_S, deadline - loop.time())))
        except MCPError as exc:
            if self._session_404s == refused_before or exc.code == types.METHOD_NOT_FOUND:
                return self.lost is not None
        except Exception:  # noqa: BLE001 - a ping that times out or breaks: not this case
            return self.lost is not None
        else:
            return False
        self._connection_lost(session_ended_reason(self.spec.url or ""))
        return True

    async def _lost_after(self, session: ClientSession, closed: MCPError, deadline: float) -> str | None:
        """After a call's "connection closed" (the SDK's, or a server's own error with that
        code): None when the server still answers a ping, else why its connection is lost."""
        loop = asyncio.get_running_loop()
        if self.lost is None:
            try:
                await asyncio.wait_for(session.send_ping(), max(0.0, min(PING_S, deadline - loop.time())))
            except asyncio.TimeoutError:
                what = f"{closed.message}, and it did not answer a ping"
            except Exception as exc:  # noqa: BLE001 - any failure of the ping: the connection is gone
                what = _short_error(exc)
            else:
                return None
            # A refused or reset POST fails the transport's task, which says why (the
            # ConnectError): wait a moment for it before giving the call's own words.
            if self.lost is None:
                told = asyncio.ensure_future(self._lost_told.wait())
                try:
                    await asyncio.wait({told}, timeout=max(0.0, min(LOST_WAIT_S, deadline - loop.time())))
                finally:
                    told.cancel()
            if self.lost is None:
                self._connection_lost(f"its connection was lost: {what}")
        return self.lost

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
