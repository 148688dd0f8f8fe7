"""A secret an MCP server is given never reaches an editor: the real `dshd serve` over stdio,
a trusted `.mcp.json` with `${VAR}` in a server's command, args, env, url and headers, the
variable listed in the person's `[mcp] expandEnv`. `dsh/config/get` shows each field as the
file has it, and `(set)` for env and headers, never the value; positive control in the same
test: every field is there, as written, so an answer that left them out could not pass."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import write_workspace
from tests.e2e.test_methods import call


async def test_config_get_never_shows_a_value_mcp_json_expanded(workspace: Path, daemons, tmp_path: Path) -> None:
    """A trusted .mcp.json with ${VAR} in command, args, env, url and headers, the variable
    listed in [mcp] expandEnv of the user config: the answer holds the text as written and
    "(set)", never the value (searched in the whole answer)."""
    secret = "cfg-get-7c1e-never-shown"
    write_workspace(workspace)
    field = "${DSHD_TEST_CFG_SECRET}"
    servers = {
        "run": {"command": f"/opt/{field}/srv", "args": [f"--token={field}"], "env": {"T": field}},
        "web": {"type": "http", "url": f"https://mcp.example/{field}", "headers": {"Authorization": f"Bearer {field}"}},
        "unlisted": {"command": "x", "args": ["${DSHD_TEST_CFG_OTHER:-fallback}"]},
    }
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    xdg = tmp_path / "xdg"
    (xdg / "dsh").mkdir(parents=True)
    (xdg / "dsh" / "config.toml").write_text('[mcp]\nexpandEnv = ["DSHD_TEST_CFG_SECRET"]\n')
    env = {"XDG_CONFIG_HOME": str(xdg), "DSHD_TEST_CFG_SECRET": secret, "DSHD_TEST_CFG_OTHER": "other-value-not-listed"}
    daemons.trusted = True
    client = await daemons.start(env=env)
    report = await call(client, "dsh/config/get", {})
    shown = report["effective"]["mcp"]["servers"]
    assert shown["run"]["command"] == f"/opt/{field}/srv" and shown["run"]["args"] == [f"--token={field}"]
    assert shown["web"]["url"] == f"https://mcp.example/{field}"
    assert shown["run"]["env"] == {"T": "(set)"} and shown["web"]["headers"] == {"Authorization": "(set)"}
    assert shown["unlisted"]["args"] == ["${DSHD_TEST_CFG_OTHER:-fallback}"]  # as written (it ran as "fallback")
    assert report["effective"]["mcp"]["expandEnv"] == ["DSHD_TEST_CFG_SECRET"]
    whole = json.dumps(report)
    assert secret not in whole and "other-value-not-listed" not in whole
