"""W-9: an MCP stdio server of the person's own user config may start in an absolute folder
outside the workspace (still in the sandbox: that folder is read-only there); a
workspace's own config and its .mcp.json stay inside the workspace (ACP's mcpServers
carry no cwd at all). Control: the same absolute folder from the user config works, so a
refusal is the source's, not the folder's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dshd.mcp.config import read_mcp_json
from tests.mcp_agent_support import INSTANT, servers_of, workspace
from tests.sandbox_support import needs_sandbox

pytestmark = needs_sandbox


def server_in(outside: Path, report: Path) -> dict:
    """A server that writes where it started and whether it could write there, then serves.
    The interpreter and the server are arguments (``exec "$@"``), not words inside the
    script: dshd shows a program's folder under /tmp (a checkout there, its venv) to the
    sandbox only when it is the command or a path argument, as a person's config names it."""
    script = (
        f'{{ pwd -P; touch probe.txt 2>/dev/null && echo writable || echo read-only; }} > {report}; '
        'exec "$@"'
    )
    return {"command": "/bin/sh", "args": ["-c", script, "server", sys.executable, INSTANT], "cwd": str(outside)}


async def test_a_user_config_server_starts_in_an_absolute_folder_outside_read_only(tmp_path):
    outside = (tmp_path / "elsewhere" / "server-home").resolve()
    outside.mkdir(parents=True)
    report = tmp_path / "ws" / "report.txt"
    ws = workspace(tmp_path, [{"text": "done"}], {"far": server_in(outside, report)})
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        [state] = servers_of(agent).states()
        assert state.state == "ready", state.reason
    finally:
        await agent.aclose()
    assert report.read_text().splitlines() == [str(outside), "read-only"]
    assert not (outside / "probe.txt").exists()


async def test_a_workspace_config_server_cannot_name_a_folder_outside(tmp_path):
    outside = (tmp_path / "elsewhere").resolve()
    outside.mkdir()
    report = tmp_path / "ws" / "report.txt"
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    entry = server_in(outside, report)
    (root / ".dsh" / "config.toml").write_text(
        "[mcp.servers.far]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in entry.items())
    )
    ws = workspace(tmp_path, [{"text": "done"}], {}, trusted=True)
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        [state] = servers_of(agent).states()
        assert state.source == "workspace" and state.state == "failed"
        assert f"cwd {outside} is outside the workspace: only your user config may name a folder outside it" in (state.reason or "")
    finally:
        await agent.aclose()
    assert not report.exists()


def test_mcp_json_cannot_name_a_folder_outside(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    outside = str((tmp_path / "elsewhere").resolve())
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "far": {"command": "/bin/true", "cwd": outside},
        "near": {"command": "/bin/true", "cwd": "sub"},
    }}))
    found = read_mcp_json(root)
    assert found is not None and set(found.servers) == {"near"}
    [(name, why)] = found.skipped
    assert name == "far" and "only your user config may name a folder outside it" in why
