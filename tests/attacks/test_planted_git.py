"""Planted git configuration and hooks: a cloned repository's own `.dsh/checkpoints.git` (a
clean filter, `core.fsmonitor`, a hook), one that is a link, and a hostile environment or
home `~/.gitconfig` (GIT_DIR, GIT_CONFIG_*, a filter) never make the shadow repository run
their code or write where they point. Positive controls in the same tests: plain git, on a
copy of the same repository or in the same environment, does run the planted program."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from dshd.checkpoints import ShadowRepo
from tests.checkpoints.test_shadow import (  # noqa: F401 - workspace: a fixture
    _plant_hostile_repository,
    digest_tree,
    tree_listing,
    workspace,
    write,
)


def test_a_planted_shadow_repository_is_moved_aside_and_its_filter_never_runs(workspace: Path, tmp_path: Path):
    marker = tmp_path / "marker"
    _plant_hostile_repository(workspace, marker)
    # Positive control: plain git on a copy of that repository does run the filter.
    control = tmp_path / "control"
    shutil.copytree(workspace, control, symlinks=True)
    subprocess.run(["git", "--git-dir", str(control / ".dsh/checkpoints.git"), "--work-tree", str(control),
                    "add", "README.md"], check=True, capture_output=True)
    assert marker.exists()
    marker.unlink()
    shadow = ShadowRepo(workspace)
    first = shadow.snapshot()
    write(workspace, "src/app.py", "print('changed')\n")
    second = shadow.snapshot()
    shadow.diff(first.tree, second.tree)
    shadow.restore(first.tree, ["src/app.py"], {})
    assert not marker.exists()
    aside = [p.name for p in (workspace / ".dsh").iterdir() if p.name.startswith("checkpoints.git.untrusted-")]
    assert len(aside) == 1 and shadow.moved_aside == workspace / ".dsh" / aside[0]
    # The filter did not run: the file is stored as it is, and .gitattributes itself is in.
    assert tree_listing(workspace, first.tree)[".gitattributes"] == "100644"



def test_a_linked_shadow_repository_is_moved_aside_without_touching_its_target(workspace: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere.git"
    (tmp_path / "other").mkdir()
    ShadowRepo(tmp_path / "other").snapshot()
    os.rename(tmp_path / "other" / ".dsh" / "checkpoints.git", elsewhere)  # even one of ours, at the end of a link
    before = digest_tree(elsewhere)
    (workspace / ".dsh").mkdir()
    os.symlink(elsewhere, workspace / ".dsh" / "checkpoints.git")
    ShadowRepo(workspace).snapshot()
    assert not (workspace / ".dsh" / "checkpoints.git").is_symlink()
    assert digest_tree(elsewhere) == before



def test_the_callers_git_environment_and_home_config_are_ignored(workspace: Path, tmp_path: Path, monkeypatch):
    marker = tmp_path / "marker"
    home = tmp_path / "home"
    write(home, "evil.sh", f"#!/bin/sh\ntouch {marker}\ncat\n")
    (home / "evil.sh").chmod(0o755)
    write(home, ".gitconfig", f'[filter "evil"]\n\tclean = {home}/evil.sh\n')
    write(workspace, ".gitattributes", "* filter=evil\n")
    # Positive control: plain git in this environment runs the filter.
    control = tmp_path / "control"
    write(control, "a.txt", "a\n")
    write(control, ".gitattributes", "* filter=evil\n")
    subprocess.run(["git", "init", "-q", str(control)], check=True)
    subprocess.run(["git", "-C", str(control), "add", "a.txt"], check=True, env={**os.environ, "HOME": str(home)})
    assert marker.exists()
    marker.unlink()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", f"{home}/evil.sh")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    shadow = ShadowRepo(workspace)
    shadow.snapshot()
    write(workspace, "README.md", "again\n")
    shadow.snapshot()
    assert not marker.exists()
    assert not (tmp_path / "elsewhere").exists()
