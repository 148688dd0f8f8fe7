"""The tool catalogue: fixed for the life of an agent (PM-4, PM-16).

A tool is ``(name, description, parameters JSON Schema, run)``; ``run(ctx, arguments)``
is async and returns a :class:`ToolOutcome`. A tool that raises gives a failed result
with the error text; the loop never dies of a tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from dshd.agent.model import ToolSpec

if TYPE_CHECKING:
    from dshd.agent.loop import Agent


@attrs.frozen
class ToolOutcome:
    ok: bool
    content: str

    @classmethod
    def success(cls, content: str) -> "ToolOutcome":
        return cls(True, content)

    @classmethod
    def failure(cls, content: str) -> "ToolOutcome":
        return cls(False, content)


@attrs.frozen
class ToolContext:
    agent: "Agent"
    call_id: str
    turn: int
    step: int


@attrs.frozen
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


class ToolCatalogue:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools[name].spec() for name in self.names())
