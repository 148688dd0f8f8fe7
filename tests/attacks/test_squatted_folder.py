"""Another local user squats /tmp/dshd-<uid>, the shared daemon's socket folder for anyone
without $XDG_RUNTIME_DIR: made first as their own folder, or as a link. dshd then uses a
private folder of this user's instead ($XDG_STATE_HOME/dsh/run, else
~/.local/state/dsh/run), and both clients find the same daemon there; when even that
cannot hold a socket, it says which folder, whose, and what to do.

Run for real: a real unprivileged user (made here with useradd when missing), `dshd
connect` run as that user with setpriv, the squatter's folder chowned to another uid.

That user, its /tmp/dshd-<uid> and its state folder are one per machine, shared by every
run (xdist workers, other clones): a test holds a machine-wide lock on them, and starts
and ends with none of the user's processes and none of its dshd folders (whatever an
earlier, killed run left).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import split_frames
from tests.shared_daemon_support import alive, daemons_of, session_list_frames

REPO = Path(__file__).resolve().parents[2]
USER = "dshdsquat"
SQUATTER_UID = 65534  # nobody
SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's interpreter may live where the user cannot read
SITE = Path(sysconfig.get_paths()["purelib"])  # this venv's packages, for the system Python (3.11 both)
LOCK = "/var/tmp/dshd-squat-user.lock"  # one user per machine: one test at a time uses it

pytestmark = [
    pytest.mark.skipif(
        os.getuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd") or not Path(SYSTEM_PYTHON).exists()
        or not SITE.is_dir(),
        reason="needs root, setpriv, useradd and a system Python 3.11 to run dshd as a real unprivileged user",
    ),
    pytest.mark.xdist_group("squat-user"),  # one worker (the lock below keeps other runs out)
]


@contextmanager
def machine_lock() -> Iterator[None]:
    """The test user and its folders to ourselves, against other workers and other runs."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class User:
    def __init__(self) -> None:
        try:
            entry = pwd.getpwnam(USER)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", USER], check=True, capture_output=True)
            entry = pwd.getpwnam(USER)
        self.uid, self.gid, self.home = entry.pw_uid, entry.pw_gid, Path(entry.pw_dir)
        assert self.uid != 0, f"{USER} is root"
        self.shared = Path(f"/tmp/dshd-{self.uid}")
        self.state = self.home / ".local" / "state" / "dsh"
        self.fallback = self.state / "run"
        self.code = [REPO / "server", REPO / "protocol", SITE]  # what the user imports dshd from

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment of the user's own: no $XDG_RUNTIME_DIR (what sends dshd to /tmp)."""
        return {"HOME": str(self.home), "USER": USER, "LOGNAME": USER, "PATH": "/usr/bin:/bin",
                "PYTHONPATH": ":".join(str(path) for path in self.code),
                "DSHD_LOG_LEVEL": "INFO", **extra}

    def processes(self) -> list[int]:
        """This user's live processes (any of their uids is the user's)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    status = (entry / "status").read_text()
                except OSError:
                    continue
                uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
                if str(self.uid) in uids and alive(int(entry.name)):
                    found.append(int(entry.name))
        return found

    def clear(self) -> None:
        """As root: kill every process of this (test-only) user (daemons of earlier runs
        included), remove its /tmp/dshd-<uid> and its dshd state folder, and leave it a home
        of its own to put a new one in."""
        deadline = time.monotonic() + 10
        while pids := self.processes():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            assert time.monotonic() < deadline, f"{USER}'s processes {pids} do not die"
            time.sleep(0.02)
        if self.shared.is_symlink() or self.shared.is_file():
            self.shared.unlink()
        elif self.shared.exists():
            shutil.rmtree(self.shared)
        if not self.home.is_dir() or self.home.is_symlink():
            if self.home.is_symlink() or self.home.exists():
                self.home.unlink()
            self.home.mkdir(mode=0o700, parents=True)
        os.chown(self.home, self.uid, self.gid, follow_symlinks=False)
        for folder in (self.home / ".local", self.home / ".local" / "state"):
            st = folder.lstat() if folder.is_symlink() or folder.exists() else None
            if st is not None and (not stat.S_ISDIR(st.st_mode) or st.st_uid != self.uid):
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(folder)
                else:
                    folder.unlink()
        if self.state.is_symlink() or self.state.is_file():
            self.state.unlink()
        elif self.state.exists():
            shutil.rmtree(self.state)


def _reachable_by(user: User, paths: list[Path]) -> bool:
    """Whether the user can read every file (and enter every folder) of ``paths``."""
    probe = (
        "import os, sys\n"
        "for top in sys.argv[1:]:\n"
        "    if not os.access(top, os.R_OK | os.X_OK): sys.exit(1)\n"
        "    for folder, dirs, files in os.walk(top):\n"
        "        for name in dirs:\n"
        "            path = os.path.join(folder, name)\n"
        "            if not os.path.islink(path) and not os.access(path, os.R_OK | os.X_OK): sys.exit(1)\n"
        "        for name in files:\n"
        "            if not os.access(os.path.join(folder, name), os.R_OK): sys.exit(1)\n"
    )
    argv = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "--",
            SYSTEM_PYTHON, "-I", "-c", probe, *map(str, paths)]
    return subprocess.run(argv, capture_output=True, cwd="/", env={"PATH": "/usr/bin:/bin"}, timeout=120).returncode == 0


@pytest.fixture(scope="session")
def code() -> Iterator[list[Path]]:
    """Where the user imports dshd from: the clone and this venv when the user can read
    them, else (a clone or venv under /root, a 0700 folder, root's umask 077) a copy of
    them the user can read, for this session."""
    with machine_lock():
        user = User()
        reachable = _reachable_by(user, user.code)
    if reachable:
        yield user.code
        return
    staged = Path(tempfile.mkdtemp(prefix="dshd-squat-code-", dir="/var/tmp"))
    try:
        paths = []
        for path, name in zip(user.code, ("server", "protocol", "site-packages")):
            shutil.copytree(path, staged / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
            paths.append(staged / name)
        for folder, _dirs, files in os.walk(staged):
            os.chmod(folder, 0o755)
            for name in files:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode & 0o7777 | 0o444)
        yield paths
    finally:
        shutil.rmtree(staged, ignore_errors=True)


@pytest.fixture
def user(code: list[Path]) -> Iterator[User]:
    with machine_lock():
        u = User()
        u.code = code
        u.clear()
        try:
            yield u
        finally:
            u.clear()


@pytest.fixture
def workspace(user: User):
    base = Path(tempfile.mkdtemp(prefix="dshd-squat-", dir="/var/tmp"))
    ws = write_workspace(base / "ws")
    for folder, _dirs, files in os.walk(base):
        os.chown(folder, user.uid, user.gid)
        for name in files:
            os.chown(os.path.join(folder, name), user.uid, user.gid)
    yield ws
    shutil.rmtree(base, ignore_errors=True)


def connect_as(user: User, workspace: Path, **env: str) -> subprocess.CompletedProcess:
    """`dshd connect --workspace WS` as the user (the forwarder copies a file's bytes)."""
    script = workspace.parent / "input.bin"
    script.write_bytes(session_list_frames(workspace))
    os.chown(script, user.uid, user.gid)
    argv = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "--",
            SYSTEM_PYTHON, "-c", "import sys; from dshd_connect import main; sys.exit(main())",
            "connect", "--workspace", str(workspace)]
    with open(script, "rb") as stdin:
        return subprocess.run(argv, stdin=stdin, capture_output=True, timeout=120, cwd=workspace, env=user.env(**env))


def served(out: subprocess.CompletedProcess) -> bool:
    messages, faults, _rest = split_frames(out.stdout)
    answers = {m.get("id"): m for m in messages if "method" not in m}
    return out.returncode == 0 and not faults and "capabilities" in answers.get(1, {}).get("result", {}) \
        and answers.get(2, {}).get("result") == {"sessions": []}


def the_daemon_in(folder: Path) -> int:
    [lock] = folder.glob("*.lock")
    return int(lock.read_text())


def test_without_a_squatter_the_shared_tmp_folder_is_used(user: User, workspace: Path) -> None:
    """Control: the same two clients, nobody in the way: /tmp/dshd-<uid>, made 0700."""
    first = connect_as(user, workspace)
    assert served(first), first.stderr
    st = user.shared.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == user.uid and stat.S_IMODE(st.st_mode) == 0o700
    pid = the_daemon_in(user.shared)
    assert served(connect_as(user, workspace))
    assert daemons_of(workspace) == [pid]
    assert not user.fallback.exists()


@pytest.mark.parametrize("squat", ["folder", "link", "open"])
def test_a_squatted_tmp_folder_falls_back_to_a_private_folder_of_the_users(user: User, workspace: Path, squat: str) -> None:
    bait = Path(tempfile.mkdtemp(prefix="dshd-bait-", dir="/var/tmp"))
    try:
        if squat == "folder":  # another user's folder, open to them only
            user.shared.mkdir(mode=0o700)
            os.chown(user.shared, SQUATTER_UID, SQUATTER_UID)
        elif squat == "open":  # the user's own, but open to others: someone may have put a socket in
            user.shared.mkdir()
            os.chown(user.shared, user.uid, user.gid)
            os.chmod(user.shared, 0o777)
        else:  # a link to a folder the squatter reads and the user could write
            os.chmod(bait, 0o777)
            os.chown(bait, SQUATTER_UID, SQUATTER_UID)
            user.shared.symlink_to(bait)
            os.lchown(user.shared, SQUATTER_UID, SQUATTER_UID)
        first = connect_as(user, workspace)
        assert served(first), first.stderr
        second = connect_as(user, workspace)
        assert served(second), second.stderr
        # Both found one daemon, in the user's private folder.
        st = user.fallback.lstat()
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == user.uid and stat.S_IMODE(st.st_mode) == 0o700
        pid = the_daemon_in(user.fallback)
        assert daemons_of(workspace) == [pid]
        [log] = user.fallback.glob("*.log")
        assert log.read_text().count(" serving ") == 1
        assert any(user.fallback.glob("*.sock"))
        # Nothing went to the squatter.
        assert list(bait.iterdir()) == []
        if squat == "folder":
            assert user.shared.lstat().st_uid == SQUATTER_UID
    finally:
        shutil.rmtree(bait, ignore_errors=True)


def test_no_usable_fallback_says_which_folder_whose_and_what_to_do(user: User, workspace: Path) -> None:
    user.shared.mkdir(mode=0o700)
    os.chown(user.shared, SQUATTER_UID, SQUATTER_UID)
    deep = user.home / ("s" * 60) / ("t" * 40)  # a state folder too long for a socket path
    deep.mkdir(parents=True, exist_ok=True)
    for folder in (deep.parent, deep):
        os.chown(folder, user.uid, user.gid)
    try:
        out = connect_as(user, workspace, XDG_STATE_HOME=str(deep))
        said = out.stderr.decode()
        assert out.returncode == 1, said
        assert f"/tmp/dshd-{user.uid}" in said and "belongs to uid 65534 (nobody)" in said, said
        assert f"{deep}/dsh/run" in said and "longer than" in said, said
        assert f"sudo rm -rf /tmp/dshd-{user.uid}" in said and "XDG_RUNTIME_DIR" in said, said
        assert daemons_of(workspace) == []
        # Control: the same state folder, nobody squatting: served from /tmp.
        user.clear()
        assert served(connect_as(user, workspace, XDG_STATE_HOME=str(deep)))
    finally:
        shutil.rmtree(deep.parent, ignore_errors=True)
