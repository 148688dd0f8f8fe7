"""`dshd daemon --workspace DIR`: the shared daemon of one workspace.

One process per user and workspace, started by the first ``dshd connect`` (or ``dshd
acp``) that found none (``dshd_connect``), serving every editor and ACP client of the
workspace over one Unix socket, all on one :class:`~dshd.daemon.host.Host` (so a session
opened twice is one live session).

- The lock: an exclusive ``flock`` on ``<sock>.lock`` (its text: the daemon's pid), taken
  before anything else and held for the daemon's whole life. Only the holder unlinks a
  stale socket and binds, so of daemons started at once exactly one serves; the others
  see it answer and leave (or, while the holder is on its way out, wait for the lock).
- Each connection: the peer's uid (``SO_PEERCRED``) must be ours, the peer in this
  daemon's PID namespace (so in no sandbox: each has its own) and no process this daemon
  started (an agent's command), else it is closed unanswered; its first line
  names the protocol (``dsh``: LSP framing, ``acp``: NDJSON, optionally followed by a JSON
  object of options); the daemon answers ``ok dshd <version> <pid>`` and runs that door
  over the connection, or over the client's own stdin and stdout when the options say
  ``"fds": true`` and they follow (SCM_RIGHTS). ``shutdown`` / ``exit`` or the end of
  input end that connection only.
- Lifetime: with no connection for ``[daemon] idleTimeoutS`` seconds (the user config and
  the workspace file; ``--idle-timeout`` overrides), the daemon stops listening (the
  socket goes first, so a new client starts a new daemon rather than reaching this one),
  closes every session (checkpoints written, locks released) and exits. SIGTERM and
  SIGINT do the same at once.

The forwarder starts it detached (no descendant of any client) and learns how the start
went from ``--status-fd``, a pipe the daemon holds for its life (``serving``, or ``exit
<code>`` when it leaves before that). Its stderr is ``<sock>.log`` (the forwarder that
started it opened it); ``DSHD_LOG_LEVEL``
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


class _Out:
    """What the doors write to: ``write`` (+ ``flush`` for ACP's transport, ``close``
    for the dsh server) on an asyncio transport or stream writer."""

    def __init__(self, sink) -> None:
        self._sink = sink

    def write(self, data: bytes) -> None:
        if self._sink.is_closing():
            raise BrokenPipeError("the client closed the connection")
        self._sink.write(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._sink.close()


class _PipeEnd(asyncio.Protocol):
    """The protocol of the client's stdout pipe (written by the daemon)."""

    def __init__(self) -> None:
        self.lost = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


async def _recv_line(loop, conn: socket.socket) -> tuple[bytes, bytes] | None:
    """The protocol line and what came after it (a client may send its first messages
    without waiting for the answer); None at end of input or when it is too long."""
    data = b""
    while b"\n" not in data:
        chunk = await loop.sock_recv(conn, MAX_PROTOCOL_LINE)
        if not chunk:
            return None
        data += chunk
        if len(data) > MAX_PROTOCOL_LINE and b"\n" not in data[:MAX_PROTOCOL_LINE]:
            return None
    line, _, rest = data.partition(b"\n")
    return line, rest


async def _recv_fds(loop, conn: socket.socket) -> list[int]:
    """The client's stdin and stdout, passed with SCM_RIGHTS after the answer."""
    space = socket.CMSG_SPACE(2 * 4)
    while True:
        try:
            data, ancillary, _flags, _addr = conn.recvmsg(1, space)
            break
        except (BlockingIOError, InterruptedError):
            ready = loop.create_future()
            loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(conn.fileno())
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += [int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    if data != b"F" or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        raise ConnectionError("the client did not pass its stdin and stdout")
    return fds


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
        self.started_at = time.time()
        # A restart (`dshd daemon restart`): each client's socket is held open until this
        # process exits, so its forwarder sees the daemon die (status 1) and the editor
        # reattaches, rather than a connection ended on purpose (status 0).
        self.restarting = False
        self._held: list[int] = []
        self._last_client = time.monotonic()  # when the last client's connection ended (or the start)

    # ---- lifetime ----------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self._idle is None and not self.connections:
            # Counted from the end of the last client's connection: a `dshd daemon status`
            # (a control connection) in between does not keep the daemon alive.
            left = self.idle_s - (time.monotonic() - self._last_client)
            self._idle = asyncio.get_running_loop().call_later(max(0.0, left), self._idle_out)

    def _idle_out(self) -> None:
        self._idle = None
        if not self.connections:
            log.info("no connection for %g s: exiting", self.idle_s)
            self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        log.info("serving %s on %s (idle timeout %g s)", self.root, self.socket_path, self.idle_s)
        accepting = asyncio.ensure_future(self._accept())
        self._arm_idle()
        try:
            await self._stop.wait()
        finally:
            # The socket goes first: a client arriving now starts the next daemon (which
            # waits for our lock) instead of reaching one that is leaving.
            self._unlink_socket()
            accepting.cancel()
            self.listener.close()
            for task in list(self.connections):
                task.cancel()
            if self.connections:
                await asyncio.wait(list(self.connections), timeout=10)
            await self.host.shutdown()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _addr = await loop.sock_accept(self.listener)
            except OSError as exc:  # EMFILE and the like: say so, breathe, go on
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            task = asyncio.ensure_future(self._on_connection(conn))
            self.connections.add(task)
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None

    def _unlink_socket(self) -> None:
        try:
            if stat.S_ISSOCK(os.lstat(self.socket_path).st_mode):
                os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    # ---- one connection ----------------------------------------------------------------

    async def _on_connection(self, conn: socket.socket) -> None:
        task = asyncio.current_task()
        control = False
        try:
            control = await self._serve(conn) == b"control"
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("a connection failed")
        finally:
            self.connections.discard(task)
            if not control:
                self._last_client = time.monotonic()
            if self.restarting:
                try:
                    self._held.append(os.dup(conn.fileno()))
                except OSError:
                    pass
            conn.close()
            if not self._stop.is_set():
                self._arm_idle()

    async def _serve(self, conn: socket.socket) -> bytes | None:
        """Serve one connection; returns its protocol (None before one was named)."""
        loop = asyncio.get_running_loop()
        try:
            uid = dshd_connect.peer_uid(conn)
        except OSError:
            uid = None
        if uid != os.getuid():
            log.warning("refused a connection from uid %s (this daemon serves uid %d only)", uid, os.getuid())
            return
        peer = _peer_pid(conn)
        outside = _peer_outside_our_pid_namespace(conn, peer)
        if outside is not None:
            # A process in a sandbox (any dshd's: bwrap gives each its own PID namespace)
            # must not become a client: it could loosen its own sandbox or approvals.
            log.warning("refused a connection from pid %s: %s", peer if peer is not None else "unknown", outside)
            return
        if peer is None or _runs_under_us(peer):
            # A command the agent runs (its sandbox is our child, in a PID namespace that
            # dies with it) must not become a client: it could answer its own approvals.
            log.warning("refused a connection from pid %s: a process this daemon started", peer)
            return
        try:
            line = await asyncio.wait_for(_recv_line(loop, conn), PROTOCOL_LINE_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError):
            return
        if line is None:
            return  # a probe (another daemon looking), or a client that left at once
        line, early = line
        protocol, _, rest = line.strip().partition(b" ")
        options = _options(rest)
        if protocol not in (b"dsh", b"acp", b"control"):
            await loop.sock_sendall(conn, b"error the first line must name the protocol: dsh or acp\n")
            return
        if options is None:
            await loop.sock_sendall(conn, b"error the options after the protocol must be one JSON object\n")
            return
        await loop.sock_sendall(conn, self.greeting)
        if protocol == b"control":
            await self._serve_control(loop, conn, options)
            return protocol
        if options.get("fds") is True:
            if early:
                await loop.sock_sendall(conn, b"error nothing may follow the protocol line before the answer when passing fds\n")
                return
            await self._serve_passed_fds(conn, protocol, options)
            return
        reader = asyncio.StreamReader(limit=_max_message())
        reader.feed_data(early)
        transport, stream_protocol = await loop.connect_accepted_socket(lambda: asyncio.StreamReaderProtocol(reader), conn)
        writer = asyncio.StreamWriter(transport, stream_protocol, reader, loop)
        try:
            await self._serve_door(protocol, reader, _Out(writer), options)
        finally:
            writer.close()

    async def _serve_passed_fds(self, conn: socket.socket, protocol: bytes, options: dict) -> None:
        """The client passed its own stdin and stdout: the door reads and writes them
        directly (no byte goes through the forwarder), and the socket only tells each
        side that the other is still there."""
        loop = asyncio.get_running_loop()
        fd_in, fd_out = await _recv_fds(loop, conn)
        reader = asyncio.StreamReader(limit=_max_message())
        pipe_in = os.fdopen(fd_in, "rb", buffering=0)
        pipe_out = os.fdopen(fd_out, "wb", buffering=0)
        read_transport = write_transport = None
        try:
            read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe_in)
            write_transport, _ = await loop.connect_write_pipe(_PipeEnd, pipe_out)
        except (ValueError, OSError):
            for transport, pipe in ((read_transport, pipe_in), (write_transport, pipe_out)):
                if transport is not None:
                    transport.close()
                else:
                    pipe.close()
            raise
        door = asyncio.ensure_future(self._serve_door(protocol, reader, _Out(write_transport), options))
        # The forwarder waits on the socket; it closing (killed, or its client gone) ends
        # this connection too.
        gone = asyncio.ensure_future(loop.sock_recv(conn, 1))
        try:
            await asyncio.wait({door, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            door.cancel()
            gone.cancel()
            await asyncio.gather(door, gone, return_exceptions=True)
            read_transport.close()
            write_transport.close()

    # ---- control: `dshd daemon status|stop|restart` (dshd.daemon_cli) -----------------

    async def _serve_control(self, loop, conn: socket.socket, options: dict) -> None:
        """One request (``{"op": "status" | "stop" | "restart"}``), one JSON line back. The
        peer passed the same checks as any client (our uid, our PID namespace, none of our
        commands): whoever may open a session here may stop the daemon."""
        import json

        op = options.get("op")
        if op not in ("status", "stop", "restart"):
            await loop.sock_sendall(conn, b'{"error": "op must be status, stop or restart"}\n')
            return
        answer = self.status()
        if op != "status":
            told = self._tell_clients(op)
            answer = {**answer, "stopping": True, "told": told}
        await loop.sock_sendall(conn, json.dumps(answer).encode() + b"\n")
        if op != "status":
            log.info("%s asked by dshd daemon %s", op, op)
            self.restarting = op == "restart"
            self.stop()

    def status(self) -> dict:
        """The pid, socket, uptime, the clients and the live sessions (who is attached)."""
        names = {cid: client.client_name for cid, client in self.host.clients.items()}
        sessions = []
        for workspace, _loaded in list(self.host._workspaces.values()):
            for agent in list(workspace._agents.values()):
                attached = self.host._attached.get(agent.agent_id, {})
                sessions.append({"sessionId": agent.session_id, "clients": [names.get(c, c) for c in attached]})
        return {
            "pid": os.getpid(),
            "version": dshd_connect.version(),
            "workspace": str(self.root),
            "socket": self.socket_path,
            "log": self.socket_path[: -len(".sock")] + ".log",
            "startedAt": self.started_at,
            "uptimeS": round(time.time() - self.started_at, 1),
            "clients": sorted(names.values()),
            "sessions": sessions,
        }

    def _tell_clients(self, op: str) -> int:
        """One notice to each editor (dsh connection) before the daemon goes; returns how many."""
        from dshd.daemon.app import DshDaemon

        if op == "restart":
            message = (
                "The workspace's dshd daemon is restarting (dshd daemon restart): this editor "
                "reattaches to its session; a goal that was running waits for you to resume it."
            )
        else:
            message = (
                "The workspace's dshd daemon was stopped (dshd daemon stop). Nothing is lost; "
                "the next dsh command starts it again."
            )
        told = 0
        for client in list(self.host.clients.values()):
            if isinstance(client, DshDaemon):
                try:
                    client.protocol.notify("window/showMessage", {"type": 3, "message": message})  # Info
                    told += 1
                except Exception:  # a connection on its way out: nothing to tell
                    log.debug("could not tell a client", exc_info=True)
        return told

    async def _serve_door(self, protocol: bytes, reader, out: _Out, options: dict) -> None:
        if protocol == b"dsh":
            await self._serve_dsh(reader, out)
        else:
            await self._serve_acp(reader, out, options)

    async def _serve_dsh(self, reader, out: _Out) -> None:
        from dshd.daemon.app import ClientLogHandler, DshDaemon
        from dshd.daemon.server import serve_connection
        from dshd.models.errors import RedactingFormatter

        server = DshDaemon(self.host)  # one per connection, all on the process's host
        handler = ClientLogHandler(server, logging.getLevelName(os.environ.get("DSHD_CLIENT_LOG_LEVEL", "INFO").upper()))
        handler.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
        dshd_logger = logging.getLogger("dshd")
        dshd_logger.addHandler(handler)
        try:
            await serve_connection(server, reader, out)
        finally:
            dshd_logger.removeHandler(handler)

    async def _serve_acp(self, reader, out: _Out, options: dict) -> None:
        from dshd.acp.door import AcpDoor
        from dshd.acp.transport import LineTransport
        from dshd.agent.questions import ANSWER_TIMEOUT_S

        timeout = options.get("questionTimeoutS", ANSWER_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            out.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"questionTimeoutS must be a positive number of seconds"}}\n')
            return
        transport = LineTransport(reader, out)
        door = AcpDoor(self.root, question_timeout_s=float(timeout), host=self.host)
        connection = door.connect(transport)
        try:
            await connection.main_loop()
        finally:
            await door.shutdown()
            await connection.close()


def _peer_pid(conn: socket.socket) -> int | None:
    try:
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return None
    return int.from_bytes(cred[0:4], sys.byteorder) or None


SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5: a pidfd of the peer as it connected
PIDFD_GET_PID_NAMESPACE = 0xFF05  # _IO(0xFF, 5), Linux 6.11: the pid namespace of a pidfd's process


def _peer_outside_our_pid_namespace(conn: socket.socket, pid: int | None) -> str | None:
    """Why the peer is not known to be in this daemon's PID namespace, or None when it is.

    The peer is named by a pidfd, never by its number alone: ``SO_PEERPIDFD`` (Linux 6.5)
    is the process that connected, whatever happened to its pid since; on older kernels
    ``pidfd_open`` of the ``SO_PEERCRED`` pid (Linux 5.3; that pid could have been reused
    between the connect and here, see docs/daemon.md). The namespace is then read through
    the pidfd (``PIDFD_GET_PID_NAMESPACE``, Linux 6.11) or from ``/proc/<pid>/ns/pid``,
    after which the pidfd must still be alive (so the pid still names the process read).
    Anything that cannot be read fails closed."""
    if pid is None:
        return "its pid is not visible from this daemon's PID namespace"
    try:
        ours = os.stat("/proc/self/ns/pid")
    except OSError as exc:
        return f"this daemon cannot read its own PID namespace ({exc.strerror})"
    pidfd = None
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError) as exc:
            return f"no pidfd for it ({getattr(exc, 'strerror', None) or exc})"
    try:
        theirs = _pid_namespace_of(pidfd, pid)
        if isinstance(theirs, str):
            return theirs
        if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
            return "it is in another PID namespace (a sandbox)"
        return None
    finally:
        os.close(pidfd)


def _pid_namespace_of(pidfd: int, pid: int) -> os.stat_result | str:
    """The stat of the pid namespace of the pidfd's process, or why it cannot be read."""
    import select

    try:
        ns_fd = fcntl.ioctl(pidfd, PIDFD_GET_PID_NAMESPACE)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return "it has exited"
        if exc.errno not in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
            return f"its PID namespace cannot be read ({exc.strerror})"
    else:
        try:
            return os.fstat(ns_fd)
        finally:
            os.close(ns_fd)
    # An older kernel: the pidfd's own pid (SO_PEERPIDFD's process may not be `pid`
    # any more if that one exited), then /proc, then the pidfd still alive.
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as handle:
            for line in handle.read(4096).splitlines():
                if line.startswith(b"Pid:"):
                    pid = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    if pid <= 0:
        return "it has exited or is not visible from this daemon's PID namespace"
    try:
        theirs = os.stat(f"/proc/{pid}/ns/pid")
    except OSError as exc:
        return f"its PID namespace cannot be read ({exc.strerror})"
    if select.select([pidfd], [], [], 0)[0]:  # a pidfd reads ready once its process exited
        return "it has exited"
    return theirs


def _runs_under_us(pid: int) -> bool:
    """``pid`` is this process or one of its descendants (read up the parent chain in
    /proc). A chain that cannot be read counts as ours: fail closed."""
    me = os.getpid()
    for _ in range(4096):
        if pid == me:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return True
    return True


def _options(rest: bytes) -> dict | None:
    if not rest.strip():
        return {}
    import json

    try:
        value = json.loads(rest)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _max_message() -> int:
    from dshd.transport.stdio import MAX_MESSAGE

    return MAX_MESSAGE


# ---- entry point ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dshd daemon",
        description="Run the shared daemon of a workspace on its Unix socket (dshd connect starts it when needed).",
        epilog="dshd daemon status|stop|restart [--workspace DIR] [--json]: see, stop or restart a running one.",
    )
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), metavar="DIR", help="the workspace (default: here)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit after this long with no connection (default: [daemon] idleTimeoutS, 60)",
    )
    # The write end of the pipe of the forwarder that started us (dshd_connect.Started): it
    # cannot wait for us, we are not its child.
    parser.add_argument("--status-fd", type=int, default=None, help=argparse.SUPPRESS)
    return parser


class _Status:
    """What the daemon tells the forwarder that started it: ``serving`` once it listens,
    ``exit <code>`` when it leaves before that. The pipe stays open (close-on-exec: no
    command inherits it) until the process ends, which the forwarder sees as end of file."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        if fd is not None:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                self.fd = None

    def say(self, text: str) -> None:
        if self.fd is not None:
            try:
                os.write(self.fd, text.encode() + b"\n")
            except OSError:  # the forwarder is gone: nobody to tell
                pass


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    status = _Status(args.status_fd)
    code = 1
    try:
        code = _main(args, status)
    finally:
        status.say(f"exit {code}")  # read only when it came before "serving"
    return code


def _main(args: argparse.Namespace, status: _Status) -> int:
    if args.idle_timeout is not None and not args.idle_timeout > 0:
        _parser().error("--idle-timeout must be positive")
    level = logging.getLevelName(os.environ.get("DSHD_LOG_LEVEL", "WARNING").upper())
    from dshd.models.errors import RedactingFormatter

    stream = logging.StreamHandler()
    stream.setFormatter(RedactingFormatter("%(asctime)s dshd[%(process)d] %(levelname)s %(name)s: %(message)s"))
    # DSHD_LOG_LEVEL for everything, and this module's INFO lines (start, exit) always.
    # The root stays at DSHD_LOG_LEVEL: pygls logs every message at INFO (NOTES.md: that
    # halves throughput); dshd's own INFO records also go to each editor's output panel.
    stream.addFilter(lambda record: record.levelno >= level or record.name == log.name)
    logging.basicConfig(level=level, handlers=[stream])
    client_level = logging.getLevelName(os.environ.get("DSHD_CLIENT_LOG_LEVEL", "INFO").upper())
    logging.getLogger("dshd").setLevel(min(level, client_level))
    log.setLevel(logging.INFO)

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
        status.say("serving")
        idle = args.idle_timeout if args.idle_timeout is not None else idle_timeout_s(root)
        os.chdir(root)
        daemon = SharedDaemon(root, listener, path, idle)
        asyncio.run(daemon.run())
        log.info("stopped")
        return 0
    finally:
        os.close(lock_fd)  # the lock goes last: the socket is already gone
