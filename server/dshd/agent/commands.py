"""Slash commands. ``prompt("/name rest")`` runs the command named ``name`` with ``rest``.

A handler may start a turn (through ``agent.steer`` or ``agent.start_turn``); ``prompt``
then waits for that turn and returns its ``TurnEnd``. A command that starts no turn
makes ``prompt`` return ``TurnEnd(None, "command")``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import re

import attrs

from dshd.errors import DshError

_COMMAND_RE = re.compile(r"^/(?P<name>[^\s/]+)(?:\s+(?P<rest>.*))?$", re.DOTALL)


@attrs.frozen
class Command:
    name: str  # without the slash
    description: str
    # (the Agent the command runs in, rest of the line). The Agent is not named here, not
    # even as a type: the loop imports this module, and the two would form a circle.
    run: Callable[[Any, str], Awaitable[None]]


def parse_command(text: str) -> tuple[str, str]:
    """``"/plan  do x"`` -> ``("plan", "do x")``."""
    match = _COMMAND_RE.match(text)
    if match is None:
        return "", ""
    return match.group("name"), (match.group("rest") or "").strip()


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def add(self, command: Command) -> None:
        if command.name in self._commands:
            raise ValueError(f"command /{command.name} registered twice")
        self._commands[command.name] = command

    def names(self) -> list[str]:
        return sorted(self._commands)

    def resolve(self, text: str) -> tuple[Command, str]:
        name, rest = parse_command(text)
        command = self._commands.get(name)
        if command is None:
            known = ", ".join(f"/{n}" for n in self.names()) or "none"
            raise DshError("invalid-params", f"unknown command /{name} (known: {known})", field="text")
        return command, rest
