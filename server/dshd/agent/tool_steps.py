"""The tool-step seam: hooks around the tools of one step.

A step whose reply calls tools runs, in order: its ``tool/call`` events are committed,
then every ``before`` hook is awaited, then the tools run one by one (each
``tool/result`` committed), then every ``after`` hook is awaited, before the next step
is proposed. A hook gets the :class:`ToolStep`: the turn, the step, and each call's
tool name with the catalogue's mutability (``read``, ``write``, ``exec``; a name the
catalogue does not know cannot run, and counts as ``read``).

A hook that raises is logged and the step goes on: hooks observe the work (the
checkpoints plugin snapshots the files here) and never decide it. A cancelled turn
cancels the awaited hook like any other await; ``after`` hooks run only when the step's
tools all ran. Plugins register here; the loop imports none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs

log = logging.getLogger(__name__)


@attrs.frozen
class ToolStep:
    turn: int
    step: int
    calls: tuple[tuple[str, str], ...]  # (tool name, mutability), in call order

    @property
    def may_change_files(self) -> bool:
        """A call of the step writes files or runs a command."""
        return any(mutability in ("write", "exec") for _name, mutability in self.calls)


ToolStepHook = Callable[[ToolStep], Awaitable[None]]


class ToolSteps:
    def __init__(self) -> None:
        self.before_hooks: list[ToolStepHook] = []
        self.after_hooks: list[ToolStepHook] = []

    def add_before(self, hook: ToolStepHook) -> Callable[[], None]:
        """Await ``hook(step)`` after a step's calls are recorded, before its first tool runs."""
        return _added(self.before_hooks, hook)

    def add_after(self, hook: ToolStepHook) -> Callable[[], None]:
        """Await ``hook(step)`` once a step's last tool result is recorded."""
        return _added(self.after_hooks, hook)

    async def before(self, turn: int, step: int, calls: list[tuple[str, str]]) -> None:
        await _run(self.before_hooks, ToolStep(turn, step, tuple(calls)), "before")

    async def after(self, turn: int, step: int, calls: list[tuple[str, str]]) -> None:
        await _run(self.after_hooks, ToolStep(turn, step, tuple(calls)), "after")


def _added(hooks: list[ToolStepHook], hook: ToolStepHook) -> Callable[[], None]:
    hooks.append(hook)

    def remove() -> None:
        if hook in hooks:
            hooks.remove(hook)

    return remove


async def _run(hooks: list[ToolStepHook], step: ToolStep, when: str) -> None:
    for hook in list(hooks):
        try:
            await hook(step)
        except Exception:
            # The step goes on: a hook only observes the work (docs/choices.md).
            log.exception("a %s-tools hook failed in turn %d step %d (the step goes on)", when, step.turn, step.step)
