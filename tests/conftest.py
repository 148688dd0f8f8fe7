"""Shared by every test: the person's own user config (~/.config/dsh/config.toml) is never
read. Each run points XDG_CONFIG_HOME at an empty folder, so every daemon a test starts
(they inherit the environment) sees no user layer unless the test writes one."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def no_user_config(tmp_path_factory):
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config-home"))
    yield
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before
