"""The loop's own tables: ``[agent]`` (how long a turn may run) and ``[context]`` (when
a turn compacts the conversation).

Keys (defaults below)::

    [agent]   maxSteps = 32          # steps per turn before it closes with "max-steps"
              maxStepRetries = 3     # re-proposals of a rejected step before "rejected"
    [context] compactAt = 0.8        # share of [model] contextWindow that triggers a compaction
"""

from __future__ import annotations

from dshd.config_tables import ConfigTable, Table, config_error


class AgentConfig(Table):
    maxSteps: int = 32
    maxStepRetries: int = 3


class ContextConfig(Table):
    compactAt: float = 0.8  # share of [model] contextWindow that triggers a compaction


def check_agent(agent: AgentConfig) -> None:
    if agent.maxSteps < 1:
        raise config_error("agent.maxSteps", "must be at least 1")
    if agent.maxStepRetries < 0:
        raise config_error("agent.maxStepRetries", "must be 0 or more")


def check_context(context: ContextConfig) -> None:
    if not 0 < context.compactAt <= 1:
        raise config_error("context.compactAt", "must be more than 0 and at most 1")


AGENT_TABLE = ConfigTable("agent", AgentConfig, check=check_agent)
CONTEXT_TABLE = ConfigTable("context", ContextConfig, check=check_context)
