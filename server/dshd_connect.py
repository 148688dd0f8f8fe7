"""`dshd connect` and `dshd acp`: the forwarder editors and ACP clients start, and the
launcher of the `dshd` command.

This module imports only the standard library (never ``dshd``: importing the package
would cost the 0.5-1 s the forwarder exists to save). It finds the workspace's daemon by
its Unix socket, starts it when there is none, and hands its own stdin and stdout to the
daemon (when they are pipes or sockets: the daemon then serves them directly), or else
copies bytes both ways between its stdio and the socket until either side ends.

Socket: ``$XDG_RUNTIME_DIR/dshd/<16 hex>.sock`` (``/tmp/dshd-<uid>/`` when the runtime
folder is not set or not ours, and this user's ``$XDG_STATE_HOME/dsh/run/`` when another
user took that one first), the hex being the first 16 of
``sha256(realpath(workspace) + dshd version)``. The folder must be a real folder of ours
with mode 0700; anything else fails closed. A connection starts with one line naming the
protocol (``dsh`` or ``acp``, an ACP line may carry a JSON object of options); the daemon
answers ``ok dshd <version> <pid>`` and from then on the bytes are the protocol's own. A
connection that ends before that answer came from a daemon on its way out: the
forwarder connects again (starting a daemon when needed) without losing a byte, because
it reads nothing from its own input before the answer.

``main`` is the ``dshd`` console script: ``dshd connect`` and ``dshd acp`` (without
``--stdio``) run here; everything else imports :mod:`dshd.cli`.
"""

from __future__ import annotations

import os
import sys

import _socket

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PROTOCOLS = ("dsh", "acp", "control")  # control: dshd daemon status|stop|restart (dshd.daemon_cli)
GREETING = b"ok dshd "  # the daemon's answer to the protocol line: b"ok dshd <version> <pid>\n"
START_TIMEOUT_S = 20.0  # how long to wait for a daemon we started to listen
_SO_PEERCRED = getattr(_socket, "SO_PEERCRED", 17)
_MAX_UNIX_PATH = 107


class ConnectError(Exception):
    """Why there is no daemon to talk to (said to the person on stderr)."""


def version() -> str:
    """dshd's version, read from the package's ``__init__.py`` beside this module (the
    one place it is written) without importing the package."""
    init = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dshd", "__init__.py")
    with open(init, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise ConnectError(f"no __version__ in {init}")


def _sha256_hex(data: bytes) -> str:
    try:
        from _sha256 import sha256  # Python 3.11: the builtin, without hashlib's OpenSSL load
    except ImportError:  # 3.12+ keeps it in _sha2
        try:
            from _sha2 import sha256  # type: ignore[no-redef]
        except ImportError:
            from hashlib import sha256  # type: ignore[no-redef]
    return sha256(data).hexdigest()


def _private_dir(path: str, uid: int) -> str:
    """Make ``path`` (mode 0700) or check the one there: a real folder, ours, 0700."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConnectError(f"cannot make the socket folder {path}: {exc.strerror}") from None
    st = os.lstat(path)
    import stat

    if not stat.S_ISDIR(st.st_mode):
        raise ConnectError(f"the socket folder {path} is not a folder (a link or a file): remove it")
    if st.st_uid != uid:
        raise ConnectError(f"the socket folder {path} belongs to {_whose(st.st_uid)}, not to you (uid {uid}): remove it")
    if st.st_mode & 0o077:
        raise ConnectError(
            f"the socket folder {path} is open to others (mode {st.st_mode & 0o777:o}): `chmod 700` it or remove it"
        )
    return path


def _whose(uid: int) -> str:
    """``uid 1001 (alice)``: a uid and, when it has one, its user name."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _ours(path: str, uid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    import stat

    return st.st_uid == uid and stat.S_ISDIR(st.st_mode)


# A socket's path is at most 107 bytes: the folder leaves room for "/<16 hex>.sock".
_MAX_SOCKET_DIR = 107 - len("/0123456789abcdef.sock")


def state_dir(env, uid: int) -> str:
    """This user's dshd state folder, the one rule for it: ``$XDG_STATE_HOME/dsh``, else
    ``<home>/.local/state/dsh`` (the home of ``$HOME`` when it is a folder of ours, else
    the one the user database names). The sandbox hides it whole (the state key and the
    fallback socket folder live in it)."""
    state = env.get("XDG_STATE_HOME")
    if not (state and os.path.isabs(state) and _ours(state, uid)):
        home = env.get("HOME")
        if not (home and os.path.isabs(home) and _ours(home, uid)):
            import pwd

            try:
                home = pwd.getpwuid(uid).pw_dir
            except KeyError:
                raise ConnectError(f"uid {uid} has no entry in the user database (no home folder)") from None
        state = os.path.join(home, ".local", "state")
    return os.path.join(os.path.normpath(state), "dsh")


def fallback_socket_dir(env, uid: int) -> str:
    """This user's private folder for the sockets when ``/tmp/dshd-<uid>`` is not usable:
    ``run`` in :func:`state_dir`."""
    return os.path.join(state_dir(env, uid), "run")


def _check_ancestors(path: str, uid: int) -> None:
    """Nobody but us and root can replace ``path`` or a folder above it: each (real) folder
    up to / is ours or root's, and not writable by others unless sticky (as /tmp is)."""
    import stat

    real = os.path.realpath(path)
    while True:
        st = os.stat(real)
        if st.st_uid not in (0, uid):
            raise ConnectError(f"the folder {real} (above {path}) belongs to {_whose(st.st_uid)}, who could replace the socket folder")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise ConnectError(f"the folder {real} (above {path}) is writable by others (mode {st.st_mode & 0o777:o})")
        parent = os.path.dirname(real)
        if parent == real:
            return
        real = parent


def socket_dir(env: dict | None = None) -> str:
    """The folder of this user's daemon sockets (made on first use, mode 0700). ``env``:
    variables over this process's environment (as the daemon started with them sees it).

    ``$XDG_RUNTIME_DIR/dshd`` when the runtime folder is ours (a fault there is the
    person's own: it fails closed, saying so); else ``/tmp/dshd-<uid>``; and when that one
    is taken (another user's folder, a link, a file, or open to others: /tmp is everyone's,
    anyone may make it first) this user's private :func:`fallback_socket_dir`."""
    env = os.environ if env is None else {**os.environ, **env}
    uid = os.getuid()
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            st = os.stat(runtime)
        except OSError:
            st = None
        if st is not None and st.st_uid == uid and os.path.isdir(runtime):
            return _private_dir(os.path.join(runtime, "dshd"), uid)
    shared = f"/tmp/dshd-{uid}"
    try:
        return _private_dir(shared, uid)
    except ConnectError as taken:
        why = str(taken)
    fallback = fallback_socket_dir(env, uid)
    if len(fallback.encode()) > _MAX_SOCKET_DIR:
        raise ConnectError(
            f"{why}; dshd cannot fall back to {fallback} either: it is longer than a Unix socket's "
            f"folder may be ({_MAX_SOCKET_DIR} bytes). Remove {shared} (`sudo rm -rf {shared}` if it is "
            f"not yours) or set XDG_RUNTIME_DIR (or XDG_STATE_HOME) to a short folder of yours"
        )
    try:
        os.makedirs(os.path.dirname(fallback), mode=0o700, exist_ok=True)
        _check_ancestors(os.path.dirname(fallback), uid)
        return _private_dir(fallback, uid)
    except (ConnectError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConnectError(
            f"{why}; dshd cannot fall back to {fallback} either: {reason}. Remove {shared} "
            f"(`sudo rm -rf {shared}` if it is not yours) or set XDG_RUNTIME_DIR to a folder of yours"
        ) from None


def candidate_socket_dirs(env: dict | None = None) -> list[str]:
    """Every folder :func:`socket_dir` may choose for this user (whether or not it exists),
    made nothing: what a sandbox hides, whichever of them a daemon listens in."""
    env = os.environ if env is None else {**os.environ, **env}
    uid = os.getuid()
    found = []
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        found.append(os.path.join(os.path.normpath(runtime), "dshd"))
    found.append(f"/tmp/dshd-{uid}")
    try:
        found.append(fallback_socket_dir(env, uid))
    except ConnectError:
        pass
    return found


def socket_name(workspace: str, dshd_version: str | None = None) -> str:
    """``<16 hex>.sock``: one name per workspace (its real path) and dshd version."""
    key = os.path.realpath(workspace) + (dshd_version or version())
    return _sha256_hex(key.encode("utf-8", "surrogateescape"))[:16] + ".sock"


def socket_path(workspace: str, env: dict | None = None) -> str:
    """Where the daemon of ``workspace`` listens (``<sock>.lock`` and ``<sock>.log`` beside it)."""
    return os.path.join(socket_dir(env), socket_name(workspace))


def peer_uid(sock) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    cred = sock.getsockopt(_socket.SOL_SOCKET, _SO_PEERCRED, 12)  # struct ucred {pid, uid, gid}
    return int.from_bytes(cred[4:8], sys.byteorder)


def protocol_line(protocol: str, options: dict | None = None) -> bytes:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}")
    if not options:
        return protocol.encode() + b"\n"
    import json

    return protocol.encode() + b" " + json.dumps(options, separators=(",", ":")).encode() + b"\n"


class Connection:
    """A connection the daemon answered: the socket, any bytes that came after the
    answer (the protocol's own), and the daemon's pid."""

    def __init__(self, sock, first: bytes, pid: int | None) -> None:
        self.sock, self.first, self.pid = sock, first, pid


UNANSWERED = "unanswered"  # what _dial returns when a daemon closed the connection unanswered


def _dial(path: str, line: bytes) -> Connection | str | None:
    """A connection that the daemon answered; None when nobody listens; ``UNANSWERED``
    when the daemon ended it before answering (it was on its way out, or it refuses us:
    we run in a sandbox)."""
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError as exc:  # a sandbox's socket wall: no Unix socket can be made here
        raise ConnectError(f"cannot make a Unix socket to reach {path}: {exc.strerror} (inside a sandbox?)") from None
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        raise ConnectError(f"cannot connect to {path}: {exc.strerror}") from None
    try:
        if peer_uid(sock) != os.getuid():
            raise ConnectError(f"{path} is served by another user's process: refusing it")
        sock.sendall(line)
        sock.settimeout(START_TIMEOUT_S)
        answer = b""
        while b"\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:  # a daemon on its way out closed it: dial again
                sock.close()
                return UNANSWERED
            answer += chunk
            if len(answer) > 4096:
                raise ConnectError(f"{path} answered with something that is not dshd")
        sock.settimeout(None)
    except (ConnectionResetError, BrokenPipeError):
        sock.close()
        return UNANSWERED
    except TimeoutError:
        sock.close()
        raise ConnectError(f"the daemon at {path} did not answer in {START_TIMEOUT_S:g} s") from None
    except ConnectError:
        sock.close()
        raise
    first, _, rest = answer.partition(b"\n")
    if not first.startswith(GREETING):
        sock.close()
        raise ConnectError(f"the daemon at {path} refused the connection: {first[:200].decode(errors='replace')}")
    return Connection(sock, rest, daemon_pid(first))


def _daemon_argv(workspace: str) -> list[str]:
    # The package beside this file is the version the socket is named for: put its folder
    # first on the child's path (for the child only; nothing leaks into its environment).
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); from dshd.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, "daemon", "--workspace", workspace]


# Runs between the forwarder and the daemon: forks the daemon in a session of its own and
# exits at once, so the daemon is reparented (to init or the nearest subreaper) and is no
# descendant of the client that started the forwarder. A client that ends its agent's whole
# process tree (acpx does) then cannot reach it. Only the standard library, no site.
_DETACH = (
    "import os, sys\n"
    "status = int(sys.argv[1])\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    try:\n"
    "        os.execv(sys.argv[2], sys.argv[2:])\n"
    "    except OSError as exc:\n"
    "        os.write(status, ('exit 127 cannot run %s: %s\\n' % (sys.argv[2], exc.strerror)).encode())\n"
    "        os._exit(127)\n"
    "os._exit(0)\n"
)


class Started:
    """A daemon this forwarder started, fully detached: not our child, so its exit status
    comes over a pipe (``status``, our read end) instead. The daemon holds the write end
    for its whole life and writes ``serving`` once it listens, or ``exit <code>`` when it
    leaves before that; end of file means it is gone."""

    def __init__(self, status_fd: int) -> None:
        self.status_fd = status_fd
        self.said = b""
        self.gone = False

    def poll(self) -> bool:
        """Read what the daemon said so far; True once it is gone."""
        import select

        while not self.gone and select.select([self.status_fd], [], [], 0)[0]:
            chunk = os.read(self.status_fd, 4096)
            if not chunk:
                self.gone = True
            elif len(self.said) < 4096:
                self.said += chunk
        return self.gone

    def exit_code(self) -> int | None:
        """The code it said it left with before serving (0: another daemon serves), 0 when it
        had served, None when it died without a word (killed, or crashed)."""
        lines = self.said.splitlines()
        if b"serving" in lines:
            return 0
        for line in lines:
            if line.startswith(b"exit "):
                word = line.split()[1]
                return int(word) if word.lstrip(b"-").isdigit() else 1
        return None

    def close(self) -> None:
        if self.status_fd >= 0:
            os.close(self.status_fd)
            self.status_fd = -1


def start_daemon(workspace: str, path: str, env: dict | None = None) -> Started:
    """Start the workspace's daemon fully detached (a session of its own, reparented away
    from us), its stderr appended to ``<sock>.log``. Racing starts are fine: the daemon that
    gets ``<sock>.lock`` serves, the others leave."""
    import subprocess

    log_fd = os.open(path[: -len(".sock")] + ".log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    status_r, status_w = os.pipe()  # both close-on-exec; pass_fds hands the write end on
    try:
        argv = _daemon_argv(workspace) + ["--status-fd", str(status_w)]
        detach = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _DETACH, str(status_w), *argv],
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            pass_fds=(status_w,),
            start_new_session=True,  # the editor's terminal signals and hangups are not the daemon's
            env=None if env is None else {**os.environ, **env},  # the variables the socket was named under
        )
        detach.wait()  # at once: it only forks
    except BaseException:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
        os.close(log_fd)
    return Started(status_r)


def connect(
    workspace: str,
    protocol: str = "dsh",
    options: dict | None = None,
    *,
    start: bool = True,
    timeout_s: float = START_TIMEOUT_S,
    env: dict | None = None,
) -> Connection:
    """A connection to ``workspace``'s daemon speaking ``protocol``, after its answer.
    Starts the daemon when none listens (``start``); raises :class:`ConnectError` saying
    why when there is none."""
    import time

    workspace = os.path.realpath(workspace)
    if not os.path.isdir(workspace):
        raise ConnectError(f"no such folder: {workspace}")
    path = socket_path(workspace, env)
    if len(path.encode()) > _MAX_UNIX_PATH:
        raise ConnectError(f"the socket path {path} is longer than a Unix socket allows ({_MAX_UNIX_PATH} bytes): set XDG_RUNTIME_DIR to a shorter folder")
    line = protocol_line(protocol, options)
    deadline = time.monotonic() + timeout_s
    child: Started | None = None
    pause = 0.002
    refused = 0
    refusing = (
        f"the daemon at {path} closes our connections unanswered: it refuses clients in a "
        f"sandbox (a command an agent runs cannot be a client); see {path[:-5]}.log"
    )
    try:
        while True:
            got = _dial(path, line)
            if isinstance(got, Connection):
                return got
            if not start:
                if got == UNANSWERED:
                    raise ConnectError(refusing + " (or it was on its way out: try again)")
                raise ConnectError(f"no dshd daemon is running for {workspace} (no one listens on {path})")
            if child is not None and child.poll():
                code = child.exit_code()
                child.close()
                if code is None:
                    raise ConnectError(f"the daemon died before it listened; see {path[:-5]}.log")
                if code != 0:
                    raise ConnectError(f"the daemon failed to start (exit {code}); see {path[:-5]}.log")
                # It left because another daemon held the lock (that one serves now, or is
                # on its way out and the next one must start), or it served and left. A
                # daemon that serves and still closes us unanswered, time after time, is
                # refusing us: say so rather than start daemons for nothing.
                refused = refused + 1 if got == UNANSWERED else 0
                if refused >= 3:
                    raise ConnectError(refusing)
                child = None
            if child is None:
                child = start_daemon(workspace, path, env)
            if time.monotonic() > deadline:
                raise ConnectError(f"the daemon did not start listening on {path} in {timeout_s:g} s; see {path[:-5]}.log")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    finally:
        if child is not None:
            child.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def daemon_pid(greeting: bytes) -> int | None:
    """The daemon's pid from its answer ``ok dshd <version> <pid>``."""
    parts = greeting.split()
    return int(parts[3]) if len(parts) >= 4 and parts[3].isdigit() else None


def _died(pid: int | None) -> bool:
    """The daemon process is gone or on its way out (a zombie, or exiting: PF_EXITING),
    as after kill -9, rather than alive and ending one connection as asked."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return True
    # fields[0] is the state, fields[6] the flags (field 9 of proc(5)); PF_EXITING = 0x4
    return fields[0] in (b"Z", b"X", b"x") or int(fields[6]) & 0x4 != 0


def forward(sock, first: bytes = b"", stdin_fd: int = 0, stdout_fd: int = 1, pid: int | None = None) -> int:
    """Copy stdin -> socket and socket -> stdout until the daemon ends the connection.
    End of stdin is passed on as a half close (the daemon ends that connection only).
    Returns 0 when the daemon ended the connection (after ``exit``, or at the end of
    input), 1 when the daemon died under it (the client's cue to reconnect)."""
    import select

    if first:
        _write_all(stdout_fd, first)
    sock_fd = sock.fileno()
    poller = select.poll()
    poller.register(sock_fd, select.POLLIN)
    poller.register(stdin_fd, select.POLLIN)
    stdin_open = True
    recv, send = sock.recv, sock.sendall
    while True:
        for fd, _events in poller.poll():
            if fd == sock_fd:
                try:
                    data = recv(262144)
                except ConnectionResetError:
                    data = b""
                if not data:
                    return EXIT_FAIL if _died(pid) else EXIT_OK
                try:
                    _write_all(stdout_fd, data)
                except BrokenPipeError:
                    return EXIT_OK  # the client went away
            else:
                data = os.read(stdin_fd, 262144)
                if data:
                    try:
                        send(data)
                    except (BrokenPipeError, ConnectionResetError):
                        return EXIT_FAIL if _died(pid) else EXIT_OK
                elif stdin_open:
                    stdin_open = False
                    poller.unregister(stdin_fd)
                    try:
                        sock.shutdown(_socket.SHUT_WR)
                    except OSError:
                        pass


# ---- command line --------------------------------------------------------------------------

CONNECT_USAGE = """usage: dshd connect [--workspace DIR] [--no-start]

Talk dsh (JSON-RPC with LSP framing) on stdio to the workspace's shared daemon, starting
it when none runs (what editors start by default; `dshd serve` runs one in-process
daemon for this client alone).

  --workspace DIR   the workspace (default: the current folder)
  --no-start        fail when no daemon runs instead of starting one
"""

ACP_USAGE = """usage: dshd acp [--stdio] [--question-timeout SECONDS] [--no-start]

Serve the Agent Client Protocol (ACP v1) on stdio for the workspace in the current
folder, through the workspace's shared daemon (started when none runs), so a session is
the same live session every editor sees.

  --stdio                       serve in this process instead (no shared daemon)
  --question-timeout SECONDS    how long a plan review or an approval waits for the
                                person before it fails closed
  --no-start                    fail when no daemon runs instead of starting one
"""


def _usage_error(usage: str, message: str) -> int:
    sys.stderr.write(usage + f"\ndshd: {message}\n")
    return EXIT_USAGE


def _parse(argv: list[str], usage: str, allowed: dict[str, bool]) -> dict | int:
    """Tiny option parser (argparse costs a few ms to import): ``allowed`` maps an option
    to whether it takes a value."""
    found: dict[str, str | bool] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            sys.stdout.write(usage)
            return EXIT_OK
        name, eq, value = arg.partition("=")
        if name not in allowed:
            return _usage_error(usage, f"unknown argument {arg!r}")
        if allowed[name]:
            if not eq:
                if not args:
                    return _usage_error(usage, f"{name} needs a value")
                value = args.pop(0)
            found[name] = value
        elif eq:
            return _usage_error(usage, f"{name} takes no value")
        else:
            found[name] = True
    return found


def _passable(fd: int) -> bool:
    """A pipe or a socket: what the daemon's event loop can read and write directly."""
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _same_file(fd_a: int, fd_b: int) -> bool:
    """One socket as both stdin and stdout. asyncio's write side of a socket watches it
    for reading to learn that the peer closed, so data arriving there could read as that:
    such a pair is copied, not handed over."""
    a, b = os.fstat(fd_a), os.fstat(fd_b)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def hand_over(conn: Connection, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Pass our stdin and stdout to the daemon (SCM_RIGHTS), which then reads and writes
    them itself: no byte goes through this process. Then wait until the daemon ends the
    connection; our own copies point at /dev/null meanwhile, so the client sees the end
    of output as soon as the daemon closes its copies (or dies)."""
    fds = stdin_fd.to_bytes(4, sys.byteorder) + stdout_fd.to_bytes(4, sys.byteorder)
    conn.sock.sendmsg([b"F"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, stdin_fd)
    os.dup2(null, stdout_fd)
    os.close(null)
    try:
        while conn.sock.recv(4096):
            pass
    except OSError:
        pass
    return EXIT_FAIL if _died(conn.pid) else EXIT_OK


def _run(workspace: str, protocol: str, options: dict | None, start: bool) -> int:
    # Pipes and sockets (what editors and ACP clients give a child) are handed to the
    # daemon; anything else (a terminal, a file) is copied through this process.
    passing = not os.environ.get("DSHD_CONNECT_COPY") and _passable(0) and _passable(1) and not _same_file(0, 1)
    if passing:
        options = {**(options or {}), "fds": True}
    try:
        conn = connect(workspace, protocol, options, start=start)
    except ConnectError as exc:
        sys.stderr.write(f"dshd: {exc}\n")
        return EXIT_FAIL
    try:
        if passing:
            if conn.first:
                _write_all(1, conn.first)
            return hand_over(conn)
        return forward(conn.sock, conn.first, pid=conn.pid)
    except KeyboardInterrupt:
        return EXIT_FAIL


def connect_main(argv: list[str]) -> int:
    opts = _parse(argv, CONNECT_USAGE, {"--workspace": True, "--no-start": False})
    if isinstance(opts, int):
        return opts
    return _run(str(opts.get("--workspace", os.getcwd())), "dsh", None, not opts.get("--no-start"))


def acp_main(argv: list[str]) -> int:
    """The ACP forwarder (``dshd acp --stdio`` is the in-process door, in dshd.cli)."""
    opts = _parse(argv, ACP_USAGE, {"--question-timeout": True, "--no-start": False})
    if isinstance(opts, int):
        return opts
    options = None
    if "--question-timeout" in opts:
        try:
            seconds = float(opts["--question-timeout"])
        except ValueError:
            return _usage_error(ACP_USAGE, "--question-timeout must be a number of seconds")
        if not seconds > 0 or seconds == float("inf"):
            return _usage_error(ACP_USAGE, "--question-timeout must be positive")
        options = {"questionTimeoutS": seconds}
    return _run(os.getcwd(), "acp", options, not opts.get("--no-start"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["connect"]:
        return connect_main(argv[1:])
    if argv[:1] == ["acp"] and "--stdio" not in argv[1:]:
        return acp_main(argv[1:])
    from dshd.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
