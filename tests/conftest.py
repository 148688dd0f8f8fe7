"""Shared by every test: the person's own user config (~/.config/dsh/config.toml) is never
read. Each run points XDG_CONFIG_HOME at an empty folder, so every daemon a test starts
(they inherit the environment) sees no user layer unless the test writes one."""

from __future__ import annotations

import os

import pytest
from pathlib import Path

EDITORS = Path(__file__).resolve().parent / "editors"


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
    """Markers by place: everything under tests/editors/ drives a real editor."""
    for item in items:
        if EDITORS in item.path.parents:
            item.add_marker(pytest.mark.editor)
