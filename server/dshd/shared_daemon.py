"""`dshd daemon --workspace DIR`: the shared daemon of one workspace.

One process per user and workspace, started by the first ``dshd connect`` (or ``dshd
acp``) that found none (``dshd_connect``), serving every editor and ACP client of the
workspace over one Unix socket, all on one :class:`~dshd.daemon.host.Host` (so a session
opened twice is one live session).

- The lock: an exclusive ``flock`` on ``<sock>.lock`` (its text: the daemon's pid), taken
  before anything else and held for the daemon's whole life. Only the holder unlinks a
  stale socket and binds, so of daemons started at once exactly one serves; the others
  see it answer and leave (or, while the holder is on its way out, wait for the lock).
- Each connection: the peer's uid (``SO_PEERCRED``) must be ours, else it is closed
  unanswered; its first line names the protocol (``dsh``: LSP framing, ``acp``: NDJSON,
  optionally followed by a JSON object of options); the daemon answers
  ``ok dshd <version> <pid>`` and runs that door over the connection. ``shutdown`` /
  ``exit`` or the end of input end that connection only.
- Lifetime: with no connection for ``[daemon] idleTimeoutS`` seconds (the user config and
  the workspace file; ``--idle-timeout`` overrides), the daemon stops listening (the
  socket goes first, so a new client starts a new daemon rather than reaching this one),
  closes every session (checkpoints written, locks released) and exits. SIGTERM and
  SIGINT do the same at once.

Its stderr is ``<sock>.log`` (the forwarder that started it opened it); ``DSHD_LOG_LEVEL``
sets how much goes there (default WARNING, plus one INFO line at start and at exit).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import fcntl
import logging
import os
import signal
import socket
import stat
import sys
import time
from pathlib import Path

import dshd_connect

log = logging.getLogger("dshd.shared_daemon")

DEFAULT_IDLE_TIMEOUT_S = 60.0
PROTOCOL_LINE_TIMEOUT_S = 10.0  # a connection that names no protocol in this time is closed
MAX_PROTOCOL_LINE = 4096
LOCK_WAIT_S = 10.0  # how long a second daemon waits for a holder on its way out


# ---- the lock and the socket ------------------------------------------------------------


def take_lock(lock_path: str, socket_path: str, wait_s: float = LOCK_WAIT_S) -> int | None:
    """The lock's descriptor (flock'd, our pid written in it), or None when another daemon
    holds it and answers on the socket (it serves this workspace: nothing to do)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{lock_path} is not a regular file")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        if _answers(socket_path) or time.monotonic() > deadline:
            os.close(fd)
            return None
        time.sleep(0.02)  # the holder is leaving (its socket is gone or refuses): wait for it
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _answers(path: str) -> bool:
    """Someone listens on ``path`` (a connect succeeds; we close it at once)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def bind(path: str) -> socket.socket:
    """Listen on ``path``: a stale socket there (its daemon died; we hold the lock, so no
    one else serves it) is removed first; anything that is not a socket is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(errno.EEXIST, f"{path} exists and is not a socket: remove it")
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is made 0600: no window where it is wider
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    listener.listen(128)
    listener.setblocking(False)
    return listener


# ---- the idle timeout ---------------------------------------------------------------------


def idle_timeout_s(root: Path) -> float:
    """``[daemon] idleTimeoutS`` from the user config and the workspace file (no editor
    settings: they come per connection, and the daemon outlives any one). A config that
    does not load leaves the default: each connection's initialize reports the fault."""
    from dshd.agent.config_layers import load_layers, user_config_path
    from dshd.errors import DshError

    try:
        loaded = load_layers(root, None, user_file=user_config_path(), editor_trusted=False)
    except DshError as exc:
        log.warning("config not loaded (%s): idle timeout %g s", exc.message, DEFAULT_IDLE_TIMEOUT_S)
        return DEFAULT_IDLE_TIMEOUT_S
    return float(loaded.config.daemon.idleTimeoutS)


# ---- serving ---------------------------------------------------------------------------------


class _SocketOut:
    """What the ACP transport writes to (``write`` + ``flush``): the connection's writer."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            raise BrokenPipeError("the client closed the connection")
        self._writer.write(data)

    def flush(self) -> None:
        pass


class SharedDaemon:
    def __init__(self, root: Path, listener: socket.socket, socket_path: str, idle_s: float) -> None:
        from dshd.daemon.host import Host

        self.root = root
        self.listener = listener
        self.socket_path = socket_path
        self.idle_s = idle_s
        self.host = Host()
        self.connections: set[asyncio.Task] = set()
        self._stop = asyncio.Event()
        self._idle: asyncio.TimerHandle | None = None
        self.greeting = f"ok dshd {dshd_connect.version()} {os.getpid()}\n".encode()

    # ---- lifetime ----------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self._idle is None and not self.connections:
            self._idle = asyncio.get_running_loop().call_later(self.idle_s, self._idle_out)

    def _idle_out(self) -> None:
        self._idle = None
        if not self.connections:
            log.info("no connection for %g s: exiting", self.idle_s)
            self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        server = await asyncio.start_unix_server(
            self._on_connection, sock=self.listener, limit=dshd_connect_limit()
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        log.info("serving %s on %s (idle timeout %g s)", self.root, self.socket_path, self.idle_s)
        self._arm_idle()
        try:
            await self._stop.wait()
        finally:
            # The socket goes first: a client arriving now starts the next daemon (which
            # waits for our lock) instead of reaching one that is leaving.
            self._unlink_socket()
            server.close()
            for task in list(self.connections):
                task.cancel()
            if self.connections:
                await asyncio.wait(list(self.connections), timeout=10)
            await self.host.shutdown()

    def _unlink_socket(self) -> None:
        try:
            if stat.S_ISSOCK(os.lstat(self.socket_path).st_mode):
                os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    # ---- one connection ----------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stop.is_set():
            writer.close()
            return
        task = asyncio.current_task()
        self.connections.add(task)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("a connection failed")
        finally:
            self.connections.discard(task)
            if not writer.is_closing():
                writer.close()
            if not self._stop.is_set():
                self._arm_idle()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            uid = dshd_connect.peer_uid(sock)
        except OSError:
            uid = None
        if uid != os.getuid():
            log.warning("refused a connection from uid %s (this daemon serves uid %d only)", uid, os.getuid())
            return
        try:
            line = await asyncio.wait_for(reader.readuntil(b"\n"), PROTOCOL_LINE_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            return  # a probe (another daemon looking), or a client that never said which protocol
        protocol, _, rest = line.strip().partition(b" ")
        if len(line) > MAX_PROTOCOL_LINE or protocol not in (b"dsh", b"acp"):
            writer.write(b"error the first line must name the protocol: dsh or acp\n")
            return
        options = _options(rest)
        if options is None:
            writer.write(b"error the options after the protocol must be one JSON object\n")
            return
        writer.write(self.greeting)
        if protocol == b"dsh":
            await self._serve_dsh(reader, writer)
        else:
            await self._serve_acp(reader, writer, options)

    async def _serve_dsh(self, reader, writer) -> None:
        from dshd.daemon.app import ClientLogHandler, DshDaemon
        from dshd.daemon.server import serve_connection
        from dshd.models.errors import RedactingFormatter

        server = _with_host(DshDaemon, self.host)
        handler = ClientLogHandler(server, logging.getLevelName(os.environ.get("DSHD_CLIENT_LOG_LEVEL", "INFO").upper()))
        handler.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
        dshd_logger = logging.getLogger("dshd")
        dshd_logger.addHandler(handler)
        try:
            await serve_connection(server, reader, writer)
        finally:
            dshd_logger.removeHandler(handler)

    async def _serve_acp(self, reader, writer, options: dict) -> None:
        from dshd.acp.door import AcpDoor
        from dshd.acp.transport import LineTransport
        from dshd.agent.questions import ANSWER_TIMEOUT_S

        timeout = options.get("questionTimeoutS", ANSWER_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            writer.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"questionTimeoutS must be a positive number of seconds"}}\n')
            return
        transport = LineTransport(reader, _SocketOut(writer))
        door = _with_host(AcpDoor, self.host, self.root, question_timeout_s=float(timeout))
        connection = door.connect(transport)
        try:
            await connection.main_loop()
        finally:
            await door.shutdown()
            await connection.close()


def _options(rest: bytes) -> dict | None:
    if not rest.strip():
        return {}
    import json

    try:
        value = json.loads(rest)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _with_host(cls, host, *args, **kwargs):
    """A door's connection object on the shared host."""
    import inspect

    if "host" not in inspect.signature(cls).parameters:  # TODO(E): until both doors take the host
        return cls(*args, **kwargs)
    return cls(*args, host=host, **kwargs)


def dshd_connect_limit() -> int:
    from dshd.transport.stdio import MAX_MESSAGE

    return MAX_MESSAGE


# ---- entry point ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dshd daemon",
        description="Run the shared daemon of a workspace on its Unix socket (dshd connect starts it when needed).",
    )
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), metavar="DIR", help="the workspace (default: here)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit after this long with no connection (default: [daemon] idleTimeoutS, 60)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.idle_timeout is not None and not args.idle_timeout > 0:
        _parser().error("--idle-timeout must be positive")
    level = logging.getLevelName(os.environ.get("DSHD_LOG_LEVEL", "WARNING").upper())
    from dshd.models.errors import RedactingFormatter

    stream = logging.StreamHandler()
    stream.setFormatter(RedactingFormatter("%(asctime)s dshd[%(process)d] %(levelname)s %(name)s: %(message)s"))
    # DSHD_LOG_LEVEL for everything, and this module's INFO lines (start, exit) always.
    stream.addFilter(lambda record: record.levelno >= level or record.name == log.name and record.levelno >= logging.INFO)
    logging.basicConfig(level=min(level, logging.INFO), handlers=[stream])

    root = Path(os.path.realpath(args.workspace))
    if not root.is_dir():
        print(f"dshd daemon: no such folder: {root}", file=sys.stderr)
        return 1
    try:
        path = dshd_connect.socket_path(str(root))
    except dshd_connect.ConnectError as exc:
        print(f"dshd daemon: {exc}", file=sys.stderr)
        return 1
    lock_fd = take_lock(path[: -len(".sock")] + ".lock", path)
    if lock_fd is None:
        log.info("another daemon serves %s on %s: leaving", root, path)
        return 0
    try:
        listener = bind(path)
        idle = args.idle_timeout if args.idle_timeout is not None else idle_timeout_s(root)
        os.chdir(root)
        daemon = SharedDaemon(root, listener, path, idle)
        asyncio.run(daemon.run())
        log.info("stopped")
        return 0
    finally:
        os.close(lock_fd)  # the lock goes last: the socket is already gone
