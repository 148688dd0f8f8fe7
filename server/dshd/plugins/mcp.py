"""The mcp plugin: the agent's MCP tool servers.

On by default (``plugins`` lists it); with no server configured it adds nothing and the
MCP SDK is never imported. When it attaches it makes the agent's
:class:`~dshd.mcp.servers.McpServers` (offered as a feature: the doors add an ACP
session's servers through it, ``dshd doctor`` and the notices read it), starts the
configured servers (``[mcp.servers]`` and, in a trusted folder, the workspace's
``.mcp.json``: both composed by the config layers), makes each turn's first model request
wait until they are up or failed, writes ``mcp/server`` when one fails, and stops them
all with the agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dshd.agent.config import Config
from dshd.agent.tools import Tool
from dshd.mcp.config import specs_from_config
from dshd.mcp.servers import McpServers

if TYPE_CHECKING:
    from dshd.agent.loop import Agent


def tools(config: Config) -> list[Tool]:
    """None known without a running server: a logged MCP call read without its agent is
    described by its name (agent/tools.py: default_description)."""
    return []


class McpPlugin:
    def __init__(self, agent: "Agent", config: Config) -> None:
        store = agent.store

        def record(name: str, reason: str) -> None:
            if not agent.closed:
                store.commit("mcp/server", {"name": name, "state": "failed", "reason": reason}, writer="mcp")

        self.servers = McpServers(
            agent.root,
            agent.tools,
            network=agent.permissions.policy.network,
            env_names=config.tools.env,
            record=record,
            expanded_names=config.mcp.expandEnv,
            unix_sockets=config.tools.unixSockets,
        )
        agent.features.add(self.servers)
        agent.add_request_gate(self.servers.ready)
        agent.on_close(self.servers.close)
        agent.on_aclose(self.servers.aclose)
        specs = specs_from_config(config.mcp.servers, config.mcp_workspace_servers)
        if specs:
            self.servers.add(specs)


def attach(agent: "Agent", config: Config) -> McpPlugin:
    return McpPlugin(agent, config)
