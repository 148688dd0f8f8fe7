"""A new workspace's `.dsh/.gitignore` keeps session logs out of `git status`; a person's
own `.gitignore` there is left as it is."""

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
    untracked = _git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert "?? .dsh/.gitignore" in untracked
    assert not [line for line in untracked if "sessions" in line], untracked


async def test_an_existing_gitignore_is_kept(tmp_path):
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / ".gitignore").write_text("# mine\n")
    workspace = make_workspace(tmp_path)
    workspace.create_session()
    workspace.create_session()
    await workspace.shutdown()
    assert (tmp_path / ".dsh" / ".gitignore").read_text() == "# mine\n"
