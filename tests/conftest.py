"""Shared by every test: the person's own user config (~/.config/dsh/config.toml) is never
read. Each run points XDG_CONFIG_HOME at an empty folder, so every daemon a test starts
(they inherit the environment) sees no user layer unless the test writes one."""

from __future__ import annotations

import os

import pytest
from pathlib import Path

TESTS = Path(__file__).resolve().parent
EDITORS = TESTS / "editors"
# Tests that run commands in bubblewrap against the real kernel, besides tests/sandbox/ and
# those marked needs_sandbox (sandbox_support.py).
SANDBOX_FILES = {
    TESTS / "e2e" / name
    for name in ("test_tools.py", "test_host_sockets.py")
} | {TESTS / "attacks" / name for name in ("test_command_cwd.py", "test_command_lifetime.py", "test_command_environment.py")}


@pytest.fixture(scope="session", autouse=True)
def no_user_config(tmp_path_factory):
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config-home"))
    yield
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


def pytest_collection_modifyitems(config, items):
    """Markers by place: everything under tests/editors/ drives a real editor; tests/sandbox/,
    the command suites and every needs_sandbox test use bubblewrap."""
    for item in items:
        if EDITORS in item.path.parents:
            item.add_marker(pytest.mark.editor)
        needs_bwrap = any(
            str(mark.kwargs.get("reason", "")).startswith("no sandbox here") for mark in item.iter_markers("skipif")
        )
        if needs_bwrap or item.path in SANDBOX_FILES or TESTS / "sandbox" in item.path.parents:
            item.add_marker(pytest.mark.sandbox)
