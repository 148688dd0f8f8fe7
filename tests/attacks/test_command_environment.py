"""H-5 end to end: a command gets an allowlisted environment, never the daemon's whole one.
The real dshd over stdio, started with secrets in its environment, runs `env` in each
sandbox mode. Positive control in the same test: the allowlisted names and the one the
person's user config lists do arrive, so a command that saw nothing would fail it."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.support import read_log
from tests.e2e.test_tools import calls, results, run_turn, tools_workspace
from tests.sandbox_support import needs_sandbox


@pytest.fixture
def daemons(daemons):
    daemons.trusted = True  # the [tools] tables here are the person's own settings
    return daemons


SECRETS = {
    "GITHUB_PAT": "ghp-do-not-leak",
    "PGPASS": "pg-do-not-leak",
    "DATABASE_URL": "postgres://u:db-do-not-leak@h/d",
    "HF_AUTH": "hf-do-not-leak",
    "MY_CREDS": "creds-do-not-leak",
    "OPENAI_API_KEY": "sk-do-not-leak",
}


@pytest.mark.parametrize("sandbox", [pytest.param("workspace-write", marks=needs_sandbox), "full-access"])
async def test_commands_get_the_allowlisted_environment_only(workspace, daemons, tmp_path, sandbox):
    """H-5: of the daemon's environment a command sees the allowlist and what the user config's
    [tools] env names, nothing else: not the secrets the daemon was started with, and not
    what the workspace's own config (trusted here, even) asks to pass."""
    home = tmp_path / "xdg"
    (home / "dsh").mkdir(parents=True)
    (home / "dsh" / "config.toml").write_text('[tools]\nenv = ["DSH_PERSON_CHOSE"]\n')
    tools_workspace(workspace, [calls(("run_command", {"command": "env"})), {"text": "ok"}],
                    f'sandbox = "{sandbox}"\nnetwork = true\napprove = []\nenv = ["MY_CREDS", "PGPASS"]')
    env = {**SECRETS, "DSH_PERSON_CHOSE": "arrives", "LC_TIME": "C", "XDG_CONFIG_HOME": str(home)}
    client = await daemons.start(env=env)
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert result["ok"], result
    seen = dict(line.split("=", 1) for line in result["content"].splitlines()[1:] if "=" in line)
    # Controls: the allowlist and the person's own name arrive.
    assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == os.environ["HOME"]
    assert seen["DSH_PERSON_CHOSE"] == "arrives" and seen["LC_TIME"] == "C"
    assert not set(SECRETS) & set(seen) and "XDG_CONFIG_HOME" not in seen
    assert "do-not-leak" not in json.dumps(read_log(workspace, sid))
    # The workspace's [tools] env was not taken, and the person is told so.
    got = await client.request("dsh/config/get", {})
    assert got["effective"]["tools"]["env"] == ["DSH_PERSON_CHOSE"]
    assert any(item["key"] == "tools.env" and item["file"].endswith(".dsh/config.toml") for item in got["ignored"])
