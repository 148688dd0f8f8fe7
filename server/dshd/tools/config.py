"""The ``[tools]`` table: the sandbox and approvals commands and file tools run under.

Keys (defaults below)::

    [tools]  sandbox = "workspace-write", network = false, approve = ["write", "exec"]
             env = []                # more variables for commands (user config only;
                                     # loader variables such as LD_PRELOAD are ignored)
             unixSockets = []        # host Unix sockets commands may reach (user config
                                     # only): absolute paths, or "*" for any Unix socket
             maxWriteBytes = 8388608 # bytes write_file/edit_file may write at most

The sandbox modes are the sandbox's own (:data:`dshd.sandbox.policy.Mode`). Which of
these a workspace may set without being trusted is :mod:`dshd.agent.config_layers`.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from dshd.config_tables import ConfigTable, Table, config_error
from dshd.sandbox.policy import Mode

Sandbox = Mode
Mutability = Literal["read", "write", "exec"]  # what a tool does: the classes approvals name

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ToolsConfig(Table):
    sandbox: Sandbox = "workspace-write"
    network: bool = False
    approve: list[Mutability] = msgspec.field(default_factory=lambda: ["write", "exec"])
    # Names of variables passed on to commands besides the allowlist (user config only).
    env: list[str] = msgspec.field(default_factory=list)
    # Host Unix sockets commands and MCP servers may reach, or "*" (user config only): a
    # downgrade of the socket wall the person names (docs/tools.md).
    unixSockets: list[str] = msgspec.field(default_factory=list)
    maxWriteBytes: int = 8 * 1024 * 1024  # what write_file/edit_file may write at most


def check_tools(tools: ToolsConfig) -> None:
    if tools.maxWriteBytes < 1:
        raise config_error("tools.maxWriteBytes", "must be at least 1 (bytes)")
    if len(set(tools.approve)) != len(tools.approve):
        raise config_error("tools.approve", "a class is listed twice")
    for name in tools.env:
        if not ENV_NAME.fullmatch(name):
            raise config_error("tools.env", f"{name!r} is not an environment variable name (letters, digits, _)")
    for path in tools.unixSockets:
        if path != "*" and (not path.startswith("/") or "\0" in path):
            raise config_error("tools.unixSockets", f"{path!r} is not an absolute path to a socket, nor \"*\"")


TABLE = ConfigTable("tools", ToolsConfig, check=check_tools)
