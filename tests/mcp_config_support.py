"""MCP configuration as the person and a repository write it, for the tests of tests/mcp/ and
tests/attacks/: a workspace with a `.dsh/`, a user config file of its own, the config layers
loaded over them, and the servers they start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshd.agent.config_layers import load_layers
from dshd.mcp.config import specs_from_config

@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".dsh").mkdir(parents=True)
    return root


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "xdg" / "dsh" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def load(ws: Path, user: Path | None = None, editor: dict | None = None, trusted: bool = False):
    return load_layers(ws, editor, user_file=user, editor_trusted=trusted)


def specs(loaded):
    return {s.name: s for s in specs_from_config(loaded.config.mcp.servers, loaded.config.mcp_workspace_servers)}


MCP_JSON = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "."], "env": {"A": "1"}},
        "docs": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Team": "a"}},
        "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "odd": {"command": "x", "oauth": {}},
    }
}


SECRET = "s3cret-token-value"


def write_mcp_json(ws: Path, servers: dict) -> None:
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
