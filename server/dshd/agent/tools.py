"""The tool catalogue: fixed for the life of an agent (PM-4, PM-16).

A tool is data the runner enforces (``agent/approvals.py``), not code that polices itself:

- ``name``, ``description`` and ``parameters`` (the JSON Schema the model sees);
- ``mutability``: ``read`` (changes nothing in the workspace), ``write`` (changes files),
  ``exec`` (runs a command); ``[tools] approve`` lists the classes that need a person's yes;
- ``preview(ctx, arguments)`` (optional): what the person is shown before a call runs
  (a :class:`Change`), or a failed :class:`ToolOutcome` that refuses the call before anyone
  is asked (bad arguments, a path outside the workspace);
- ``run(ctx, arguments)``: does the work and returns a :class:`ToolOutcome`.

A tool that raises gives a failed result with the error text; the loop never dies of a tool.

A tool gets a :class:`ToolContext`: its call, the workspace root and the live policy at
call time, and the change a person approved for it (so a write can refuse when the file
moved on while the person was looking). It never gets the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from dshd.tools.config import Mutability, Sandbox
from dshd.models import ToolSpec


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
class Policy:
    """The live permission policy of an agent (``[tools]`` at load, then ``dsh/permission/set``)."""

    sandbox: Sandbox
    network: bool
    approve: tuple[Mutability, ...]


@attrs.frozen
class Change:
    """What a person is asked to allow: a title, and the diff of an edit or the command
    and working folder of a run. The diff is made the first time it is read (``diff_of``):
    a preview also checks calls no one will be asked about, and difflib is slow on big files."""

    title: str
    diff_of: Callable[[], str] | None = attrs.field(default=None, eq=False, repr=False)
    command: str | None = None
    cwd: str | None = None

    @property
    def diff(self) -> str | None:
        return None if self.diff_of is None else self.diff_of()


@attrs.frozen
class ToolContext:
    call_id: str
    turn: int
    step: int
    root: Path  # the workspace root (resolved)
    policy: Policy
    approved: Change | None = None  # the change a person allowed for this call, if one was asked


ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]
ToolPreview = Callable[[ToolContext, dict[str, Any]], Awaitable["Change | ToolOutcome"]]


@attrs.frozen
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    mutability: Mutability = "read"
    preview: ToolPreview | None = None

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
