"""The tool catalogue: what an agent's model may call (PM-4, PM-16). The plugins fill it
as the agent loads; an MCP server adds its tools when it is up and withdraws them if it
fails (:meth:`ToolCatalogue.withdraw`).

A tool is data the runner enforces (``agent/approvals.py``), not code that polices itself:

- ``name``, ``description`` and ``parameters`` (the JSON Schema the model sees);
- ``mutability``: ``read`` (changes nothing in the workspace), ``write`` (changes files),
  ``exec`` (runs a command); ``[tools] approve`` lists the classes that need a person's yes;
- ``preview(ctx, arguments)`` (optional): what the person is shown before a call runs
  (a :class:`Change`), or a failed :class:`ToolOutcome` that refuses the call before anyone
  is asked (bad arguments, a path outside the workspace);
- ``run(ctx, arguments)``: does the work and returns a :class:`ToolOutcome`;
- ``describe(arguments)`` (optional): what the call is, for people and clients, in the
  tool's own file: a :class:`ToolDescription` (title, ACP kind, workspace locations). Both
  doors read it through :meth:`ToolCatalogue.describe` (which escapes the title and falls
  back to :func:`default_description`), so adding a tool touches no door.

A tool that raises gives a failed result with the error text; the loop never dies of a tool.

A tool gets a :class:`ToolContext`: its call, the workspace root and the live policy at
call time, and the change a person approved for it (so a write can refuse when the file
moved on while the person was looking). It never gets the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, get_args

import attrs
import msgspec

from dshd.formats import clip, shown
from dshd.tools.config import Mutability, Sandbox
from dshd.models import ToolSpec

log = logging.getLogger(__name__)


@attrs.frozen
class ToolOutcome:
    ok: bool
    content: str
    # A person's verdict on what the call presented ({outcome, feedback?, comments?}),
    # recorded beside the text as the tool/result's ``review``: readers use this data,
    # never the text written for the model.
    review: dict[str, Any] | None = None

    @classmethod
    def success(cls, content: str, *, review: dict[str, Any] | None = None) -> "ToolOutcome":
        return cls(True, content, review)

    @classmethod
    def failure(cls, content: str, *, review: dict[str, Any] | None = None) -> "ToolOutcome":
        return cls(False, content, review)


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


# ACP's vocabulary of what a call does (a client picks its icon from it).
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))


class ToolLocation(msgspec.Struct, frozen=True, gc=False):
    """A workspace path a call touches, as the call names it (relative to the root), and
    the line it is about, if one. (msgspec, not attrs: made for every call a log replays.)"""

    path: str
    line: int | None = None


class ToolDescription(msgspec.Struct, frozen=True, gc=False):
    """What a call is, for people: ``title`` in a few words (``Read src/a.py``), ``kind``
    from :data:`ToolKind`, and the ``locations`` it touches."""

    title: str
    kind: ToolKind = "other"
    locations: tuple[ToolLocation, ...] = ()


def argument_text(arguments: dict[str, Any], key: str, width: int = 60) -> str | None:
    """A string argument as a title shows it: escaped, then clipped to one short line
    (escaped first: clipping joins lines with spaces, which would show "a\\nb" as "a b");
    None when absent or blank."""
    value = arguments.get(key)
    return clip(shown(value), width) if isinstance(value, str) and value.strip() else None


def path_location(arguments: dict[str, Any], key: str = "path", line: Any = None) -> tuple[ToolLocation, ...]:
    """The location a call's path argument names (none when it names none)."""
    path = arguments.get(key)
    if not isinstance(path, str) or not path:
        return ()
    if isinstance(line, bool) or not isinstance(line, int) or line < 0:
        line = None
    return (ToolLocation(path, line),)


def default_description(name: str, arguments: dict[str, Any]) -> ToolDescription:
    """A tool that does not describe itself (a future MCP tool): its name and a short
    summary of its plain arguments, kind ``other``, the path it names if it names one."""
    plain = [f"{key}={value}" for key, value in arguments.items() if isinstance(value, (str, int, float, bool))]
    summary = clip(shown(", ".join(plain)), 60) if plain else ""
    return ToolDescription(f"{name} {summary}" if summary else name, "other", path_location(arguments))


def describe_call(tool: "Tool | None", name: str, arguments: Any) -> ToolDescription:
    """The description clients show for one call (arguments may be partial while they
    stream in, or empty before they do): the tool's own, else the default; the title is
    always escaped here, whoever wrote it, and an unknown kind is ``other``. A describe
    that fails gives the default: a title never costs a call."""
    args = arguments if isinstance(arguments, dict) else {}
    described: Any = None
    if tool is not None and tool.describe is not None:
        try:
            described = tool.describe(args)
        except Exception:
            log.exception("describing a %s call failed; its default title is shown", name)
    if not isinstance(described, ToolDescription):
        described = default_description(name, args)
    title = shown(described.title) if isinstance(described.title, str) and described.title.strip() else shown(name)
    kind = described.kind if described.kind in TOOL_KINDS else "other"
    locations = described.locations
    if locations and not all(isinstance(loc, ToolLocation) for loc in locations):
        locations = tuple(loc for loc in locations if isinstance(loc, ToolLocation))
    if title is described.title and kind is described.kind and locations is described.locations:
        return described  # the usual case: already as it must be (every replayed call comes here)
    return ToolDescription(title, kind, tuple(locations))


ToolApproval = Literal["policy", "always", "never"]
ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]
ToolPreview = Callable[[ToolContext, dict[str, Any]], Awaitable["Change | ToolOutcome"]]
ToolDescribe = Callable[[dict[str, Any]], ToolDescription]


@attrs.frozen
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    mutability: Mutability = "read"
    preview: ToolPreview | None = None
    describe: ToolDescribe | None = None
    # Who decides whether a call needs a person's yes: "policy" ([tools] approve by
    # mutability), "always" (every call asks, no "allow for this session"), "never" (an
    # MCP server the user config says never to ask about).
    approval: ToolApproval = "policy"

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


class ToolCatalogue:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._withdrawn: set[str] = set()

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool of that name, withdrawn or not (a withdrawn tool still describes its
        past calls; its own preview refuses new ones)."""
        return self._tools.get(name)

    def withdraw(self, name: str) -> None:
        """Leave ``name`` out of what the model is offered from now on (an MCP server that
        failed): the catalogue otherwise stays as it was."""
        if name in self._tools:
            self._withdrawn.add(name)

    def restore(self, name: str) -> None:
        """Offer a withdrawn ``name`` again (an MCP server that lists that tool again)."""
        self._withdrawn.discard(name)

    def names(self) -> list[str]:
        return sorted(name for name in self._tools if name not in self._withdrawn)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools[name].spec() for name in self.names())

    def describe(self, name: str, arguments: Any) -> ToolDescription:
        """What one call of ``name`` is, as every client shows it (:func:`describe_call`)."""
        return describe_call(self._tools.get(name), name, arguments)
