"""Another local user squats /tmp/dshd-<uid>, the shared daemon's socket folder for anyone
without $XDG_RUNTIME_DIR: made first as their own folder, or as a link. dshd then uses a
private folder of this user's instead ($XDG_STATE_HOME/dsh/run, else
~/.local/state/dsh/run), and both clients find the same daemon there; when even that
cannot hold a socket, it says which folder, whose, and what to do.

Run for real: a real unprivileged user (made here with useradd when missing), `dshd
connect` run as that user with setpriv, the squatter's folder chowned to another uid.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import split_frames
from tests.shared_daemon_support import daemons_of, is_shared_daemon, wait_gone

REPO = Path(__file__).resolve().parents[2]
USER = "dshdsquat"
SQUATTER_UID = 65534  # nobody
SYSTEM_PYTHON = "/usr/bin/python3"  # the venv's interpreter lives under /root, which the user cannot read
SITE = REPO / ".venv" / "lib" / "python3.11" / "site-packages"

pytestmark = pytest.mark.skipif(
    os.getuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd") or not Path(SYSTEM_PYTHON).exists()
    or not SITE.is_dir(),
    reason="needs root, setpriv, useradd and a system Python 3.11 to run dshd as a real unprivileged user",
)


class User:
    def __init__(self) -> None:
        try:
            entry = pwd.getpwnam(USER)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", USER], check=True, capture_output=True)
            entry = pwd.getpwnam(USER)
        self.uid, self.gid, self.home = entry.pw_uid, entry.pw_gid, Path(entry.pw_dir)
        if not self.home.is_dir():
            self.home.mkdir(mode=0o700)
            os.chown(self.home, self.uid, self.gid)
        self.shared = Path(f"/tmp/dshd-{self.uid}")
        self.fallback = self.home / ".local" / "state" / "dsh" / "run"

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment of the user's own: no $XDG_RUNTIME_DIR (what sends dshd to /tmp)."""
        return {"HOME": str(self.home), "USER": USER, "LOGNAME": USER, "PATH": "/usr/bin:/bin",
                "PYTHONPATH": ":".join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO / "server"), str(REPO / "protocol"), str(SITE)])),
                "DSHD_LOG_LEVEL": "INFO", **extra}

    def clear(self) -> None:
        """Stop the daemons this user's folders name, remove the folders (as root)."""
        for folder in (self.shared, self.fallback):
            if folder.is_dir() and not folder.is_symlink():
                for lock in folder.glob("*.lock"):
                    text = lock.read_text().strip()
                    if text.isdigit() and is_shared_daemon(int(text)):
                        os.kill(int(text), signal.SIGKILL)
                        wait_gone(int(text), 10)
        if self.shared.is_symlink() or self.shared.is_file():
            self.shared.unlink()
        elif self.shared.exists():
            shutil.rmtree(self.shared)
        shutil.rmtree(self.fallback, ignore_errors=True)


@pytest.fixture
def user():
    u = User()
    u.clear()
    yield u
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


def _frames(workspace: Path) -> bytes:
    out = b""
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "dsh/session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ):
        body = json.dumps(message).encode()
        out += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    return out


def connect_as(user: User, workspace: Path, **env: str) -> subprocess.CompletedProcess:
    """`dshd connect --workspace WS` as the user (the forwarder copies a file's bytes)."""
    script = workspace.parent / "input.bin"
    script.write_bytes(_frames(workspace))
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
