"""A real in-process agent with MCP servers from the person's user config, for the tests
of tests/mcp/ and tests/attacks/: a workspace with the scripted model, the servers it
started, what the model's requests offered and the tools' results."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from agent_support import events_of
from dshd.agent import Workspace, load_config
from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from dshd.mcp.servers import McpServers

INSTANT = str(Path(__file__).resolve().parent / "fixtures" / "mcp_servers" / "instant.py")



def toml_value(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)



def workspace(tmp_path: Path, replies: list[dict], servers: dict[str, dict], *, approvals=None, trusted=False) -> Workspace:
    """A workspace whose MCP servers come from the user config (the only place
    ``sandbox = "none"`` is taken from), with the scripted model."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    (root / "script.json").write_text(json.dumps({"replies": replies}))
    user = tmp_path / "user.toml"
    lines = ['plugins = ["tools", "mcp"]']
    for name, entry in servers.items():
        lines.append(f"[mcp.servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    user.write_text("\n".join(lines) + "\n")
    tomllib.loads(user.read_text())  # the test's own TOML is sound
    config = load_config(root, {"model": {"script": "script.json"}}, user_file=user, trusted=trusted)
    if approvals is None:  # a person who says yes to everything
        approvals = InProcessApprovals(lambda request: ApprovalAnswer("allow-once"))
    return Workspace(root, config, approvals=approvals)



def servers_of(agent) -> McpServers:
    found = agent.features.get(McpServers)
    assert found is not None
    return found



def call(tool: str, **arguments) -> dict:
    return {"name": tool, "arguments": arguments}



def results(agent) -> list[tuple[bool, str]]:
    return [(e.data.ok, e.data.content) for e in events_of(agent, "tool/result")]



def changing(**keys) -> dict:
    """A [mcp.servers] entry for the instant server whose grow/swap/touch/spoil tools change
    its list and send notifications/tools/list_changed."""
    return {"command": sys.executable, "args": ["-I", INSTANT, "--changing"], "sandbox": "none", **keys}



def offered(agent) -> list[list[str]]:
    """The instant server's tools each model request offered, in order."""
    return [[n for n in e.data.tools if n.startswith("mcp__instant__")] for e in events_of(agent, "request/header")]
