"""What dshd writes under `.dsh/` stays out of the person's repository (W-7).

In a real `git init` repository, a session through the real `dshd serve` takes checkpoints
and moves aside a checkpoint repository it did not make: `git status --porcelain` then
shows nothing dshd wrote under `.dsh/`, and `git add -A` stages none of it (the person's
own `.dsh/config.toml` is theirs: it shows and is staged). The positive control, in the
same test: with the `.gitignore` an older dshd wrote (`sessions/` alone) the same probe
sees the snapshots; the next session completes that file and the probe is clean again.
A `.dsh/.gitignore` that is a link is never written through, whoever opens `.dsh/`.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from dshd.checkpoints import ShadowRepo
from tests.e2e.conftest import Daemon, write_workspace
from tests.e2e.support import of_type, read_log, wait_idle

GIT = ["git", "-c", "user.name=person", "-c", "user.email=person@example.invalid", "-c", "init.defaultBranch=main"]
PERSONS = {".dsh/config.toml"}  # written by the test as the person's settings, not by dshd

pytestmark = pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
                                reason="git is not installed")


def git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, capture_output=True, text=True, check=True).stdout


def dsh_seen_by_git(root: Path) -> tuple[set[str], set[str]]:
    """(what `git status --porcelain` shows under .dsh/, what `git add -A` stages there),
    the person's own files left out; the index is put back after."""
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    shown = {line[3:] for line in status if line[3:].startswith(".dsh/")} - PERSONS
    git(root, "add", "-A")
    staged = {p for p in git(root, "diff", "--cached", "--name-only").splitlines() if p.startswith(".dsh/")} - PERSONS
    git(root, "reset", "-q")
    return shown, staged


async def a_session_with_checkpoints(root: Path, name: str) -> str:
    write_workspace(root, [{"toolCalls": [{"name": "write_file", "arguments": {"path": name, "content": "x\n"}}]},
                           {"text": "done"}], plugins=["tools", "checkpoints"])
    daemon = Daemon(root)
    try:
        client = await daemon.start(approve=lambda params: {"outcome": "allow-once"})
        created = await client.request("dsh/session/create", {"title": "work"})
        await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "write"})
        await wait_idle(client, created["agentId"], 15)
    finally:
        await daemon.stop_all()
    return created["sessionId"]


async def test_git_sees_nothing_dshd_writes_under_dsh(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README.md").write_text("hello\n")
    (root / ".dsh" / "checkpoints.git").mkdir(parents=True)  # one dshd did not make: moved aside
    (root / ".dsh" / "checkpoints.git" / "config").write_text("[core]\n\tbare = false\n")
    sid = await a_session_with_checkpoints(root, "a.txt")
    assert len(of_type(read_log(root, sid), "checkpoint/taken")) == 2
    assert list((root / ".dsh").glob("checkpoints.git.*-*")), "nothing was moved aside"
    assert dsh_seen_by_git(root) == (set(), set())

    # Positive control: the .gitignore of an older dshd lets git see the snapshots.
    (root / ".dsh" / ".gitignore").write_text("sessions/\n")
    shown, staged = dsh_seen_by_git(root)
    assert any(p.startswith(".dsh/checkpoints.git/objects/") for p in staged)
    assert any(p.startswith(".dsh/checkpoints.git/") for p in shown)

    # The next session completes that file (appended, the person's line kept).
    await a_session_with_checkpoints(root, "b.txt")
    text = (root / ".dsh" / ".gitignore").read_text()
    assert text.startswith("sessions/\n") and "checkpoints.git/\n" in text and "checkpoints.git.*\n" in text
    shown, staged = dsh_seen_by_git(root)
    assert shown == staged == {".dsh/.gitignore"}  # the older file itself, which it never ignored


def test_a_linked_gitignore_is_left_alone_by_the_checkpoint_repository(tmp_path: Path, caplog):
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    target = tmp_path / "bashrc"
    target.write_text("the person's own file\n")
    (root / ".dsh" / ".gitignore").symlink_to(target)
    with caplog.at_level(logging.WARNING):
        ShadowRepo(root).snapshot()
    assert target.read_text() == "the person's own file\n"
    assert (root / ".dsh" / ".gitignore").is_symlink()
    assert any(".gitignore was left as it is (is a symbolic link)" in r.getMessage() for r in caplog.records)
    # Positive control: without the link the same snapshot writes dshd's .gitignore.
    (root / ".dsh" / ".gitignore").unlink()
    ShadowRepo(root).snapshot()
    assert "checkpoints.git/" in (root / ".dsh" / ".gitignore").read_text()
