"""A workspace's files cannot loosen an MCP server, trusted or not: the real config layers.
`sandbox = "none"` and `approve = "never"` are taken from the person's user config only; a
trusted workspace's `.dsh/config.toml` or `.mcp.json` that sets them is ignored (and said
so), and a user server the workspace changes becomes a workspace server, sandboxed and
asked about; the editor's settings may add a server but not unsandbox it. Positive control
in the last test: the same table in the person's user config is taken as written."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_config_support import MCP_JSON, load, specs, user, ws  # noqa: F401 - ws, user: fixtures

from dshd.agent.config_layers import EDITOR_SETTINGS


def test_a_trusted_workspace_starts_its_servers_but_never_loosens_them(ws, user):
    user.write_text("[mcp.servers.mine]\ncommand = \"mine\"\nsandbox = \"none\"\napprove = \"never\"\n")
    (ws / ".dsh" / "config.toml").write_text(
        '[mcp.servers.theirs]\ncommand = "theirs"\napprove = "never"\nsandbox = "none"\n'
        '[mcp.servers.mine]\nargs = ["--changed-by-the-workspace"]\n'
    )
    (ws / ".mcp.json").write_text(json.dumps(MCP_JSON))
    loaded = load(ws, user, trusted=True)
    got = specs(loaded)
    assert set(got) == {"mine", "theirs", "files", "docs"}
    assert {name for name, s in got.items() if s.source == "workspace"} == {"mine", "theirs", "files", "docs"}
    # From the workspace file: ignored and said; a user server the workspace changed runs
    # sandboxed and asked about like any workspace server.
    assert (got["theirs"].approve, got["theirs"].sandbox) == ("auto", "workspace")
    assert (got["mine"].approve, got["mine"].sandbox, got["mine"].args) == ("auto", "workspace", ("--changed-by-the-workspace",))
    keys = {(Path(i.file).name, i.key, i.untrusted) for i in loaded.ignored}
    assert ("config.toml", "mcp.servers.theirs.approve", False) in keys
    assert ("config.toml", "mcp.servers.theirs.sandbox", False) in keys
    assert (".mcp.json", "mcpServers.old", False) in keys



def test_editor_settings_may_add_servers_but_not_loosen_them(ws, user):
    editor = {"mcp": {"servers": {"ed": {"command": "ed", "sandbox": "none", "approve": "always"}}}}
    loaded = load(ws, user, editor)
    assert specs(loaded)["ed"].sandbox == "workspace" and specs(loaded)["ed"].approve == "always"
    assert [(i.file, i.key) for i in loaded.ignored] == [(EDITOR_SETTINGS, "mcp.servers.ed.sandbox")]


def test_the_same_loosening_keys_apply_from_the_user_config_and_never_from_a_trusted_workspace(ws, user):
    """The probe and its control side by side: one table, `sandbox = "none"` and
    `approve = "never"`, taken for the person's own server and ignored for the workspace's."""
    loosened = 'command = "srv"\nsandbox = "none"\napprove = "never"\n'
    user.write_text("[mcp.servers.mine]\n" + loosened)
    (ws / ".dsh" / "config.toml").write_text("[mcp.servers.theirs]\n" + loosened)
    editor = {"mcp": {"servers": {"ed": {"command": "srv", "sandbox": "none", "approve": "never"}}}}
    got = specs(load(ws, user, editor, trusted=True))
    # Control: from the user config the keys are taken, so the probe can see them applied.
    assert (got["mine"].source, got["mine"].sandbox, got["mine"].approve) == ("user", "none", "never")
    assert (got["theirs"].source, got["theirs"].sandbox, got["theirs"].approve) == ("workspace", "workspace", "auto")
    assert got["ed"].sandbox == "workspace" and got["ed"].approve != "never"
