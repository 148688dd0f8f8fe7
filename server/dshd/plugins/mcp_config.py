"""The mcp plugin's ``[mcp]`` table: the MCP tool servers an agent starts.

Keys (defaults shown)::

    [mcp]
    expandEnv = []                # the variables .mcp.json's ${VAR} may read (user config only)

    [mcp.servers.<name>]          # name: 1 to 32 letters, digits, _ or -
    command = "uvx"               # a stdio server: command, args, env, cwd
    args = []
    env = {}                      # added to the environment commands get
    cwd = "."                     # relative to the workspace root, inside it
    url = "http://..."            # or a streamable HTTP server: url, headers, bearerTokenEnv
    headers = {}
    bearerTokenEnv = "DOCS_TOKEN" # the daemon's variable that holds the token
    enabled = true
    tools = []                    # allow-list of the server's tool names (empty: all)
    disabledTools = []
    startupTimeoutS = 10
    toolTimeoutS = 60
    approve = "auto"              # "auto" | "always" | "never"
    sandbox = "workspace"         # "workspace" | "none"

Which servers a workspace may define, and that ``approve = "never"``, ``sandbox =
"none"`` and ``expandEnv`` come only from the user config, is :mod:`dshd.agent.config_layers`; the
workspace's ``.mcp.json`` is merged in there too. Light on purpose: the composer imports
it without the plugin (and nothing of the MCP SDK).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import msgspec

from dshd.config_tables import ConfigTable, Derived, Table, config_error, key_of
from dshd.mcp.config import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TOOL_TIMEOUT_S,
    ENV_NAME,
    SERVER_NAME,
    Approve,
    SandboxChoice,
    server_problem,
)


class McpServerTable(Table):
    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    bearerTokenEnv: str | None = None
    enabled: bool = True
    tools: list[str] = msgspec.field(default_factory=list)
    disabledTools: list[str] = msgspec.field(default_factory=list)
    startupTimeoutS: float = DEFAULT_STARTUP_TIMEOUT_S
    toolTimeoutS: float = DEFAULT_TOOL_TIMEOUT_S
    approve: Approve = "auto"
    sandbox: SandboxChoice = "workspace"


class McpConfig(Table):
    servers: dict[str, McpServerTable] = msgspec.field(default_factory=dict)
    expandEnv: list[str] = msgspec.field(default_factory=list)


def check_mcp(mcp: McpConfig) -> None:
    for name in mcp.expandEnv:
        if not ENV_NAME.fullmatch(name):
            raise config_error("mcp.expandEnv", f"{name!r} is not an environment variable name (letters, digits, _)")
    for name, server in mcp.servers.items():
        if not SERVER_NAME.fullmatch(name):
            raise config_error(f"mcp.servers.{name}", "a server name is 1 to 32 letters, digits, _ or -")
        entry = {field: getattr(server, field) for field in server.__struct_fields__}
        problem = server_problem(entry)
        if problem is not None:
            raise config_error(f"mcp.servers.{name}.{problem[0]}", problem[1])


def check_mcp_layer(mcp: Any, file: str) -> None:
    """Each server of one layer on its own, so that a bad key is named with its server
    (the whole table's check would say ``mcp.servers[...]``)."""
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if not isinstance(servers, dict):
        return  # the strict check of the whole layer names it
    for name, entry in servers.items():
        try:
            msgspec.convert(entry, McpServerTable, strict=True)
        except msgspec.ValidationError as exc:
            inner = key_of(exc)
            key = f"mcp.servers.{name}" + ("" if inner == "config" else f".{inner}")
            raise config_error(key, str(exc).split(" - at ")[0], file) from None


def workspace_servers(mcp: McpConfig, workspace: Path | None, workspace_keys: Collection[str]) -> tuple[str, ...]:
    """The servers a workspace file (``.dsh/config.toml`` or ``.mcp.json``) defined or
    changed: they are the workspace's, whatever the user config says of that name."""
    return tuple(sorted(name for name in mcp.servers if f"mcp.servers.{name}" in workspace_keys))


TABLE = ConfigTable(
    "mcp",
    McpConfig,
    check=check_mcp,
    check_layer=check_mcp_layer,
    derived=(Derived("mcp_workspace_servers", tuple[str, ...], (), workspace_servers),),
)

__all__ = ["TABLE", "McpConfig", "McpServerTable", "check_mcp", "check_mcp_layer", "workspace_servers"]
