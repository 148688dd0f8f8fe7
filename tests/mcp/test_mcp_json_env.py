"""A trusted workspace's ``.mcp.json`` with ``${VAR}`` in a server's env, end to end: the
real config layers, a real in-process agent and the toy server of
tests/fixtures/mcp_servers/toy.py started in the sandbox; the server gets the expanded
value (and only the variables it names), a server whose variable is not set is not
started, and no value reaches the session log or a reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_support import events_of, log_path
from dshd.agent import Workspace, load_config
from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from dshd.mcp.servers import McpServers

TOY = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "toy.py")
SECRET = "tok-7f3a-not-for-logs"


@pytest.mark.sandbox
async def test_a_trusted_mcp_json_server_gets_its_expanded_env(tmp_path, monkeypatch, caplog):
    caplog.set_level("DEBUG")
    monkeypatch.setenv("DSHD_TEST_MCP_TOKEN", SECRET)
    monkeypatch.delenv("DSHD_TEST_MCP_UNSET", raising=False)
    root = tmp_path / "ws"
    root.mkdir()
    marker = root / "toy.pid"  # inside the workspace: the sandboxed server may write it
    mcp_json = {
        "mcpServers": {
            "toy": {
                "command": sys.executable,
                "args": [TOY, "--marker", str(marker)],
                "env": {"TOY_VALUE": "${DSHD_TEST_MCP_TOKEN}", "DEFAULTED": "${DSHD_TEST_MCP_UNSET:-fallback}"},
            },
            "broken": {
                "command": sys.executable,
                "args": [TOY, "--marker", str(root / "broken.pid")],
                "env": {"T": "${DSHD_TEST_MCP_UNSET}"},
            },
        }
    }
    (root / ".mcp.json").write_text(json.dumps(mcp_json))
    variable = lambda name: {"name": "mcp__toy__variable", "arguments": {"name": name}}  # noqa: E731
    replies = [{"toolCalls": [variable("TOY_VALUE"), variable("DEFAULTED"), variable("DSHD_TEST_MCP_TOKEN")]}, {"text": "done"}]
    (root / "script.json").write_text(json.dumps({"replies": replies}))
    user = tmp_path / "user.toml"
    user.write_text('plugins = ["tools", "mcp"]\n\n[mcp]\nexpandEnv = ["DSHD_TEST_MCP_TOKEN"]\n')
    config = load_config(root, {"model": {"script": "script.json"}}, user_file=user, trusted=True)
    ws = Workspace(root, config, approvals=InProcessApprovals(lambda request: ApprovalAnswer("allow-once")))
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        servers = agent.features.get(McpServers)
        assert servers is not None
        [state] = servers.states()  # "broken" was left out as the file was read
        if state.state != "ready":
            assert "no sandbox can be built" in (state.reason or ""), state.reason
            pytest.skip(f"no sandbox here: {state.reason}")
        results = [(e.data.ok, e.data.content) for e in events_of(agent, "tool/result")]
        # The expanded value and the default; the daemon's variable itself stays out of the sandbox.
        assert results == [(True, SECRET), (True, "fallback"), (True, "-")]
        assert not (root / "broken.pid").exists()
        assert all(SECRET not in (e.data.reason or "") for e in events_of(agent, "mcp/server"))
    finally:
        await agent.aclose()
    # The tool's result is the model's to read (it asked for the value); no other line holds it.
    holding = [json.loads(line) for line in log_path(agent).read_text().splitlines() if SECRET in line]
    assert [h["type"] for h in holding] == ["tool/result"]
    assert SECRET not in caplog.text  # the daemon's own log lines
