"""The checkpoints plugin: a snapshot of the workspace's files before and after each step
whose tool calls may change them (a ``write`` or ``exec`` call), recorded as
``checkpoint/taken``; the :class:`CheckpointService` (list, diff, restore) offered in
``agent.features``; and, on attach, the end of a restore a killed daemon left.

A step whose calls only read takes none; ``[checkpoints] enabled = false`` takes none at
all (the service still lists, shows and restores the checkpoints the log already has).
A snapshot that fails is logged and the step goes on: checkpoints protect the work, they
never stop it (docs/checkpoints.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dshd.agent.config import Config
from dshd.agent.tool_steps import ToolStep
from dshd.services.checkpoints import CheckpointService

if TYPE_CHECKING:
    from dshd.agent.loop import Agent

log = logging.getLogger(__name__)


class CheckpointsPlugin:
    def __init__(self, agent: "Agent", config: Config) -> None:
        table = config.checkpoints
        self.enabled = table.enabled
        self.service = CheckpointService(
            agent.store,
            agent.root,
            max_file_bytes=table.maxFileBytes,
            turn_running=lambda: agent.turn_running,
            hold_turns=agent.hold_turns,
        )
        agent.on_close(self.service.close)
        agent.on_close(agent.features.add(self.service))
        try:
            self.service.recover()
        except Exception:
            # The files stay as the killed restore left them, and the journal with them: the
            # next attach tries again. Opening the session is not refused for it.
            log.exception("finishing an interrupted checkpoint restore in %s failed", agent.root)
        if self.enabled:
            agent.on_close(agent.tool_steps.add_before(self._before))
            agent.on_close(agent.tool_steps.add_after(self._after))

    async def _before(self, step: ToolStep) -> None:
        if step.may_change_files:
            await self.service.take(step.turn, step.step, "before")

    async def _after(self, step: ToolStep) -> None:
        if step.may_change_files:
            await self.service.take(step.turn, step.step, "after")


def attach(agent: "Agent", config: Config) -> CheckpointsPlugin:
    return CheckpointsPlugin(agent, config)


def tools(config: Config | None) -> list:
    """The tools this plugin adds to the catalogue: none (a rewind is the person's, never the
    model's)."""
    return []
