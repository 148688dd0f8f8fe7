"""A real OpenSSH server on 127.0.0.1 and a real control master to it, for the attacks on
host Unix sockets; and host listeners bound every way a socket can get onto a path.

Nothing here reads or writes the person's own ~/.ssh: the server has its own config, host
key and authorized key, and every ssh run here is given its own config file (``-F``).
The control socket lives in a fake home under /var/tmp, outside /tmp, /run and
$XDG_RUNTIME_DIR: the place a person's ``ControlPath ~/.ssh/cm-%r@%h:%p`` puts it, and the
one a list of socket folders does not cover. ssh binds it under a temporary name and links
it into place, so /proc/net/unix names the temporary one, never the path a client uses.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.sandbox_support import PYTHON

SSHD = "/usr/sbin/sshd"  # Debian's openssh-server (`./run setup` installs it)
SSH = shutil.which("ssh") or "/usr/bin/ssh"
ALIAS = "x"  # the host name clients give: the master knows where it leads
PRIVSEP_DIR = Path("/run/sshd")  # sshd run as root wants it; systemd makes it on a real host

needs_openssh = pytest.mark.skipif(
    not (os.access(SSHD, os.X_OK) and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="no OpenSSH server and client here: `./run setup` installs Debian's openssh-server",
)


def outside_socket_folders(tag: str) -> Path:
    """A fresh folder under /var/tmp: not /tmp, not /run, not $XDG_RUNTIME_DIR (checked),
    so only a wall that does not list folders keeps a sandbox away from a socket in it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir="/var/tmp"))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    for special in ("/tmp", "/run", runtime):
        if special and (folder == Path(special) or Path(special) in folder.parents):
            shutil.rmtree(folder)
            pytest.skip(f"/var/tmp is inside {special} here; the attack needs a folder outside it")
    return folder


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(predicate, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class OpenSSH:
    """``sshd -D -e`` on 127.0.0.1 (a child of the test, never a daemon), and ``ssh -M -N``
    holding a control master to it at ``home/.ssh/cm``. ``client(...)`` is the argv of an
    ssh that goes through the master, as anything that can reach the socket can."""

    def __init__(self, root: Path) -> None:
        self.root = root  # a folder of outside_socket_folders()
        self.home = root / "home"
        self.control = self.home / ".ssh" / "cm"
        self.config = root / "ssh_config"
        self.sshd: subprocess.Popen | None = None
        self.master: subprocess.Popen | None = None

    def __enter__(self) -> "OpenSSH":
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        keys = self.root / "keys"
        keys.mkdir(mode=0o700)
        (self.home / ".ssh").mkdir(parents=True, mode=0o700)
        for name in ("host", "user"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys / name)], check=True)
        shutil.copy(keys / "user.pub", keys / "authorized_keys")
        if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
            PRIVSEP_DIR.mkdir(mode=0o755)
        for attempt in range(3):  # a free port can be taken between the look and sshd's bind
            self.port = _free_port()
            (self.root / "sshd_config").write_text(
                f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
                f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPidFile none\nStrictModes no\n"
                "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "PermitRootLogin prohibit-password\n"
            )
            self.sshd = _spawn([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")], self.root / "sshd.log")
            _wait_for(lambda: "Server listening" in self.log() or self.sshd.poll() is not None, 15, "sshd")
            if self.sshd.poll() is None:
                break
        else:
            raise AssertionError(f"sshd did not start: {self.log()}")
        host_key = " ".join((keys / "host.pub").read_text().split()[:2])
        (keys / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key}\n")
        self.config.write_text(
            f"Host {ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {_user()}\n"
            f"  IdentityFile {keys / 'user'}\n  IdentitiesOnly yes\n  UserKnownHostsFile {keys / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10\n"
        )
        # The master stays in the foreground (no ControlPersist, which would fork it away):
        # a child of the test, stopped by its own pid.
        self.master = _spawn(
            [SSH, "-F", str(self.config), "-M", "-S", str(self.control), "-o", "ControlPersist=no", "-N", ALIAS],
            self.root / "master.log",
        )
        _wait_for(lambda: self.check().returncode == 0 or self.master.poll() is not None, 20, "the control master")
        if self.master.poll() is not None:
            raise AssertionError(f"ssh -M ended: {(self.root / 'master.log').read_text()} / sshd: {self.log()}")

    def log(self) -> str:
        return (self.root / "sshd.log").read_text(errors="replace")

    def client(self, remote: str, *, config: Path | str | None = None) -> list[str]:
        """An ssh through the control master running ``remote`` on the server; with no
        ``config`` none is read (``-F none``), as a command in a sandbox would run it."""
        return [SSH, "-F", str(config or "none"), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                "-S", str(self.control), ALIAS, remote]

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run([SSH, "-F", str(self.config), "-S", str(self.control), "-O", "check", ALIAS],
                              capture_output=True, text=True, timeout=30)

    def bound_names(self) -> list[str]:
        """The names /proc/net/unix shows for sockets under the fake home (what a list
        built from it would cover)."""
        names = []
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and str(self.home) in fields[7]:
                names.append(fields[7])
        return names

    def __exit__(self, *exc) -> None:
        if self.master is not None:
            _stop(self.master)
        if self.sshd is not None:
            _stop(self.sshd)


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """``argv`` started with its stderr written to ``log`` (stdin and stdout nothing)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd)
    finally:
        os.close(fd)


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


# The host's listeners, in a process of their own (binding by a relative path needs a chdir,
# which the test's own process must not make). Lines on stdin: "late" binds the late socket;
# each command is answered "ready" once done. Every connection is accepted and closed.
LISTENERS = r"""
import os, selectors, socket, sys
folder, tmp_folder, abstract = sys.argv[1:4]
sel = selectors.DefaultSelector()
def listen(name):
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    s.listen(64)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, "listener")
    return s
listen(os.path.join(folder, "absolute.sock"))
os.chdir(folder)
listen("relative.sock")
listen(os.path.join(folder, "renamed.sock.tmp-Xy7"))
os.rename(os.path.join(folder, "renamed.sock.tmp-Xy7"), os.path.join(folder, "renamed.sock"))
listen(os.path.join(folder, "linked.sock.Qz81"))
os.link(os.path.join(folder, "linked.sock.Qz81"), os.path.join(folder, "linked.sock"))
os.unlink(os.path.join(folder, "linked.sock.Qz81"))
listen(os.path.join(tmp_folder, "absolute.sock"))
listen("\0" + abstract)
os.set_blocking(0, False)
sel.register(0, selectors.EVENT_READ, "stdin")
print("ready", flush=True)
pending = b""
while True:
    for key, _ in sel.select():
        if key.data == "stdin":
            chunk = os.read(0, 4096)
            if not chunk:
                sys.exit(0)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line == b"late":
                    listen(os.path.join(folder, "late.sock"))
                print("ready", flush=True)
        else:
            try:
                conn, _ = key.fileobj.accept()
                conn.close()
            except BlockingIOError:
                pass
"""


class HostListeners:
    """Unix sockets a host process listens on, bound each way a path gets a socket:
    ``absolute`` (by its absolute path), ``relative`` (chdir, then bind "relative.sock"),
    ``renamed`` (bound under a temporary name, renamed into place), ``linked`` (bound under
    a temporary name, hard-linked into place, the temporary name removed: what ssh does),
    ``late`` (bound only when :meth:`bind_late` is called), ``tmp`` (an absolute one under
    /tmp) and ``abstract`` (@name). ``targets`` maps each to the name a client connects to."""

    def __init__(self, folder: Path, tag: str) -> None:
        self.folder = folder
        self.tmp_folder = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir="/tmp"))
        self.abstract = f"{tag}-{os.getpid()}-abstract"
        names = ("absolute", "relative", "renamed", "linked", "late")
        self.targets = {name: str(folder / f"{name}.sock") for name in names}
        self.targets["tmp"] = str(self.tmp_folder / "absolute.sock")
        self.targets["abstract"] = "@" + self.abstract
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "HostListeners":
        self.process = subprocess.Popen(
            [PYTHON, "-c", LISTENERS, str(self.folder), str(self.tmp_folder), self.abstract],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self._ready()
        return self

    def _ready(self) -> None:
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise AssertionError(f"the host listeners did not start: {line!r}")

    def bind_late(self) -> None:
        self.process.stdin.write("late\n")
        self.process.stdin.flush()
        self._ready()

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
            self.process.stdout.close()
        shutil.rmtree(self.tmp_folder, ignore_errors=True)


# `python -c LATE_PROBE go-file target...`: waits (up to 60 s) for go-file, which the test
# makes after binding the late socket, then per target "target OK" or "target ERRNO"; the
# socket() call itself is inside the try (a wall may refuse it: EPERM).
LATE_PROBE = (
    "import errno, os, socket, sys, time\n"
    "deadline = time.monotonic() + 60\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
    "for target in sys.argv[2:]:\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_UNIX)\n"
    "        s.settimeout(5)\n"
    "        s.connect('\\0' + target[1:] if target.startswith('@') else target)\n"
    "        print(target, 'OK')\n"
    "    except OSError as e:\n"
    "        print(target, errno.errorcode.get(e.errno, 'timeout'))\n"
)


def running_probe(marker: str) -> bool:
    """Whether the probe itself (the interpreter, with ``marker`` in its argv) is running,
    not only the bubblewrap or shell that starts it."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0] == PYTHON.encode() and any(marker.encode() in arg for arg in argv[1:]):
            return True
    return False
