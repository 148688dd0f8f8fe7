"""A new workspace's `.dsh/.gitignore` keeps what dshd writes there out of `git status`; a
person's own `.gitignore` there keeps its lines and only gets the ones it lacks added."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from agent_support import make_workspace

from dshd.agent.workspace import DSH_GITIGNORE


def _git(root, *args) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_session_logs_do_not_show_as_untracked(tmp_path):
    _git(tmp_path, "init", "-q")
    workspace = make_workspace(tmp_path, [{"text": "hi"}])
    agent = workspace.create_session("first")
    await agent.prompt("hello")
    await workspace.shutdown()
    assert (tmp_path / ".dsh" / ".gitignore").read_text() == DSH_GITIGNORE
    assert any((tmp_path / ".dsh" / "sessions").iterdir())
    untracked = _git(tmp_path, "status", "--porcelain", "--untracked-files=all", "--ignored").splitlines()
    # dshd's own files, this one included, are ignored: nothing of .dsh/ is untracked.
    assert "!! .dsh/.gitignore" in untracked
    assert not [line for line in untracked if line.startswith("??") and ".dsh" in line], untracked


async def test_an_existing_gitignore_is_kept_and_only_completed(tmp_path):
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / ".gitignore").write_text("# mine\nsessions/\n*.bak")
    workspace = make_workspace(tmp_path)
    workspace.create_session()
    workspace.create_session()
    await workspace.shutdown()
    text = (tmp_path / ".dsh" / ".gitignore").read_text()
    assert text.startswith("# mine\nsessions/\n*.bak\n")  # the person's lines stay as they were
    added = [line for line in text.splitlines()[3:] if not line.startswith("#")]
    assert added == ["checkpoints.git/", "checkpoints.git.*"]  # once, though two sessions were made
