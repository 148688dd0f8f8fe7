"""A cloned repository's `.dsh/` state is never acted on as dshd's own (W-5).

The attacker makes the hostile repository the way dshd would: a real daemon (with the
attacker's own state key) takes a checkpoint, and a real restore killed with SIGKILL right
after its journal is durable leaves `.dsh/checkpoints.git/dsh-restore.json`, which would
rewrite README.md and delete important.txt. Everything under `.dsh/` is committed with
`git add -f` and the person makes a real `git clone`. Opening the first session through
the real `dshd serve` (the person's own state key) leaves every file as it was, moves the
planted repository aside with its journal inside, byte for byte, and tells the editor.

Two plantings: today's layout (no owner mark, a version-1 journal: what broke before this
wall) and dshd's current layout made with another key (marks that are not this user's).
The positive control, in each test: the same kind of journal left by the person's own
dshd on this machine (a real restore killed the same way, in the same clone) IS finished
when the next daemon opens the session, and recorded in that session's log.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import Daemon, write_workspace
from tests.e2e.support import of_type, read_log, wait_idle
from tests.sandbox_support import needs_sandbox

PLUGINS = ["tools", "checkpoints"]
SHADOW = Path(".dsh") / "checkpoints.git"
JOURNAL = "dsh-restore.json"
GIT = ["git", "-c", "user.name=someone", "-c", "user.email=someone@example.invalid", "-c", "init.defaultBranch=main"]

pytestmark = pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                                reason="git is not installed")

# A restore by dshd's own code, killed (SIGKILL, as kill -9 would) once its journal is
# durable and before the first file changes: what a daemon killed mid-restore leaves.
_KILLED_RESTORE = """
import json, os, signal, sys
from pathlib import Path
from dshd.checkpoints import ShadowRepo

def killed(self, *args):
    os.kill(os.getpid(), signal.SIGKILL)

ShadowRepo._apply = killed
ShadowRepo(Path(sys.argv[1])).restore(sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), keep_journal=True)
"""


@pytest.fixture(autouse=True)
def state_folders(tmp_path: Path) -> None:
    """The attacker's and the person's state folders (each a user's $XDG_STATE_HOME, which
    dshd uses only when it exists)."""
    for name in ("attacker-state", "person-state"):
        (tmp_path / name).mkdir()


def git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, capture_output=True, text=True, check=True).stdout


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file outside .dsh/ and .git/, by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] not in (".dsh", ".git") and path.is_file() and not path.is_symlink():
            out[str(rel)] = path.read_bytes()
    return out


def write_call(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


async def session_with_a_checkpoint(root: Path, state: Path, write: str) -> tuple[str, int, str, int]:
    """A real daemon (key in ``state``) makes a session whose one step writes ``write``:
    (session id, the "before" checkpoint's seq and tree, the log's last seq)."""
    write_workspace(root, [{"toolCalls": [write_call(write, "written by the agent\n")]}, {"text": "done"}],
                    plugins=PLUGINS)
    daemon = Daemon(root)
    try:
        client = await daemon.start(approve=lambda params: {"outcome": "allow-once"}, env={"XDG_STATE_HOME": str(state)})
        created = await client.request("dsh/session/create", {"title": "work"})
        await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "write"})
        await wait_idle(client, created["agentId"], 15)
    finally:
        await daemon.stop_all()
    sid = created["sessionId"]
    events = read_log(root, sid)
    [before] = [e for e in of_type(events, "checkpoint/taken") if e["data"]["phase"] == "before"]
    return sid, before["seq"], before["data"]["tree"], events[-1]["seq"]


def killed_restore(root: Path, state: Path, sid: str, seq: int, tree: str, paths: list[str], after_seq: int) -> bytes:
    """A restore of ``paths`` to ``tree`` by dshd's code with the key in ``state``, killed
    before its first file: the journal it leaves."""
    note = {"sessionId": sid, "afterSeq": after_seq, "checkpoint": seq, "files": paths, "forced": paths}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_RESTORE, str(root), tree, json.dumps(paths), json.dumps(note)],
        env={**os.environ, "XDG_STATE_HOME": str(state)}, capture_output=True, timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    return (root / SHADOW / JOURNAL).read_bytes()


async def hostile_clone(tmp_path: Path, *, legacy: bool) -> tuple[Path, bytes]:
    """The attacker's repository, made with dshd itself and the attacker's key, cloned by
    the person: (the clone, the planted journal)."""
    source = tmp_path / "hostile"
    source.mkdir()
    (source / "README.md").write_text("pwned\n")  # the planted checkpoint's README
    sid, seq, tree, last = await session_with_a_checkpoint(source, tmp_path / "attacker-state", "important.txt")
    (source / "README.md").write_text("# A useful project\n")
    (source / "important.txt").write_text("the person's work\n")
    journal = killed_restore(source, tmp_path / "attacker-state", sid, seq, tree, ["README.md", "important.txt"], last)
    if legacy:  # as dshd made them before this wall: no owner mark, a version-1 journal
        (source / SHADOW / "dsh-owner").unlink(missing_ok=True)
        body = json.loads(journal.split(b"\n", 1)[-1])  # after the mark (none in today's layout)
        journal = json.dumps({"version": 1, "tree": body["tree"], "paths": body["paths"], "note": body["note"]}).encode()
        (source / SHADOW / JOURNAL).write_bytes(journal)
    # git keeps no empty folder: a file in each one dshd's layout needs.
    (source / SHADOW / "objects" / "info" / "packs").touch()
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "add", "-f", ".dsh")
    git(source, "commit", "-q", "-m", "a project")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True, capture_output=True)
    assert (clone / SHADOW / JOURNAL).read_bytes() == journal  # the clone carries the planted state
    return clone, journal


async def open_first_session(clone: Path, state: Path) -> list[str]:
    """The person opens the clone's first session with the real daemon: what the editor is told."""
    daemon = Daemon(clone)
    try:
        client = await daemon.start(env={"XDG_STATE_HOME": str(state)})
        await client.request("dsh/session/create", {"title": "first"})
        await client.request("dsh/session/list", {})  # a round trip: the warnings sent before are in
        return [m.message for m in client.lsp.messages if m.type == 2]
    finally:
        await daemon.stop_all()


async def own_interrupted_restore_is_finished(clone: Path, state: Path) -> None:
    """The positive control: the person's own dshd, killed mid-restore in this clone,
    leaves a journal the next daemon finishes and records."""
    sid, seq, tree, last = await session_with_a_checkpoint(clone, state, "notes.txt")
    assert (clone / "notes.txt").exists()
    killed_restore(clone, state, sid, seq, tree, ["notes.txt"], last)
    assert (clone / "notes.txt").exists()  # killed before its first file
    daemon = Daemon(clone)
    try:
        client = await daemon.start(env={"XDG_STATE_HOME": str(state)})
        await client.request("dsh/session/open", {"sessionId": sid})
    finally:
        await daemon.stop_all()
    assert not (clone / SHADOW / JOURNAL).exists()
    assert not (clone / "notes.txt").exists()  # the restore was finished
    [record] = of_type(read_log(clone, sid), "checkpoint/restored")
    assert record["data"]["checkpoint"] == seq and record["data"]["files"] == ["notes.txt"]


@pytest.mark.parametrize("legacy", [True, False], ids=["todays-layout", "another-key"])
async def test_a_cloned_checkpoint_repository_and_journal_are_moved_aside_never_applied(tmp_path: Path, legacy: bool):
    clone, journal = await hostile_clone(tmp_path, legacy=legacy)
    before = files_of(clone)
    assert before["README.md"] == b"# A useful project\n" and "important.txt" in before
    state = tmp_path / "person-state"

    told = await open_first_session(clone, state)

    assert files_of(clone) == before  # nothing deleted, nothing rewritten
    [aside] = [p for p in (clone / ".dsh").iterdir() if p.name.startswith("checkpoints.git.foreign-")]
    assert (aside / JOURNAL).read_bytes() == journal  # kept as it came, never applied nor deleted
    assert (clone / SHADOW / "dsh-owner").is_file()  # a fresh repository of the person's own
    assert not (clone / SHADOW / JOURNAL).exists()
    [warning] = [m for m in told if "checkpoints.git" in m]
    assert aside.name in warning and "owner mark" in warning and "moved aside" in warning
    # The person's git sees none of it (W-7), the moved-aside repository included.
    assert not [line for line in git(clone, "status", "--porcelain").splitlines() if ".dsh/" in line and "??" in line]

    await own_interrupted_restore_is_finished(clone, state)


# ---- a session folder's caches ----------------------------------------------------------


def forge_projection(folder: Path, sign) -> None:
    """The session's projection.json made to say what its log does not: plan mode on, another title."""
    path = folder / "projection.json"
    body = json.loads(path.read_bytes().partition(b"\n")[2])
    body["state"]["plan"]["active"] = True
    body["state"]["title"] = "forged by the clone"
    path.write_bytes(sign(json.dumps(body, separators=(",", ":")).encode()))


def sign_legacy(body: bytes) -> bytes:
    """The header dshd wrote before this wall: a plain sha256 anyone can make."""
    return b"dshd-projection v1 sha256=" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def sign_with(state: Path):
    """The header dshd writes, made with the key in ``state`` (as that user's dshd would)."""
    script = ("import sys; from dshd.folds.replay import sign_checkpoint_body; "
              "sys.stdout.buffer.write(sign_checkpoint_body(sys.stdin.buffer.read()))")

    def sign(body: bytes) -> bytes:
        return subprocess.run([sys.executable, "-c", script], input=body, capture_output=True, check=True,
                              env={**os.environ, "XDG_STATE_HOME": str(state)}).stdout
    return sign


async def open_and_list(root: Path, state: Path, cache: Path, sid: str) -> tuple[dict, dict]:
    daemon = Daemon(root)
    try:
        client = await daemon.start(env={"XDG_STATE_HOME": str(state), "XDG_CACHE_HOME": str(cache)})
        rows = (await client.request("dsh/session/list", {}))["sessions"]
        opened = await client.request("dsh/session/open", {"sessionId": sid})
    finally:
        await daemon.stop_all()
    [row] = [r for r in rows if r["sessionId"] == sid]
    return opened, row


@pytest.mark.parametrize("legacy", [True, False], ids=["todays-layout", "another-key"])
async def test_a_cloned_sessions_projection_is_not_taken_for_its_log(tmp_path: Path, legacy: bool):
    source = tmp_path / "hostile"
    write_workspace(source)
    daemon = Daemon(source)
    try:
        client = await daemon.start(env={"XDG_STATE_HOME": str(tmp_path / "attacker-state")})
        sid = (await client.request("dsh/session/create", {"title": "honest"}))["sessionId"]
    finally:
        await daemon.stop_all()
    forge_projection(source / ".dsh" / "sessions" / sid, sign_legacy if legacy else sign_with(tmp_path / "attacker-state"))
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "add", "-f", ".dsh")
    git(source, "commit", "-q", "-m", "a project")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True, capture_output=True)
    state = tmp_path / "person-state"

    opened, row = await open_and_list(clone, state, tmp_path / "cache-1", sid)
    assert opened["plan"] == {"active": False} and row["title"] == "honest"  # the log's, strictly replayed

    # Positive control: the same forgery marked with the person's own key is taken (the
    # probe sees a trusted projection), which is why only dshd here can make that mark.
    forge_projection(clone / ".dsh" / "sessions" / sid, sign_with(state))
    opened, row = await open_and_list(clone, state, tmp_path / "cache-2", sid)
    assert opened["plan"] == {"active": True} and row["title"] == "forged by the clone"


# ---- the key itself -----------------------------------------------------------------------


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full-access"])
async def test_no_sandboxed_command_can_read_the_state_key(tmp_path: Path, mode: str):
    """A command the agent runs would forge every mark with the key: its folder is hidden in
    every sandbox. The control in the same command: a file beside that folder is read."""
    home_state = Path(tempfile.mkdtemp(prefix="dsh-state-key-test-", dir=Path.home()))  # /tmp is emptied in a sandbox
    try:
        (home_state / "beside.txt").write_text("readable\n")
        key = home_state / "dsh" / "state.key"
        command = f"cat {key} || echo HIDDEN; cat {home_state / 'beside.txt'}"
        root = tmp_path / "ws"
        write_workspace(root, [{"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]},
                               {"text": "done"}], plugins=["tools"],
                        extra_config=f'\n[tools]\nsandbox = "{mode}"\napprove = []\n')
        daemon = Daemon(root)
        daemon.trusted = True  # the [tools] table is the person's own settings here
        try:
            client = await daemon.start(env={"XDG_STATE_HOME": str(home_state)})
            created = await client.request("dsh/session/create", {})
            await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}, timeout=60)
            await wait_idle(client, created["agentId"], 15)
        finally:
            await daemon.stop_all()
        assert key.is_file()  # made when the workspace opened, before the command ran
        [result] = of_type(read_log(root, created["sessionId"]), "tool/result")
        output = result["data"]["content"]
        assert "readable" in output  # the control: the folder beside it is there
        assert "HIDDEN" in output and key.read_bytes().hex() not in output.encode().hex(), output
    finally:
        shutil.rmtree(home_state, ignore_errors=True)
