"""An MCP server's tool as a catalogue :class:`~dshd.agent.tools.Tool`.

- Name: ``mcp__<server>__<tool>``, every character outside ``[A-Za-z0-9_-]`` made ``_``,
  cut to 64 (what the model providers accept).
- Parameters: the server's input schema, passed through as the server wrote it.
- Mutability, from the tool's annotations (hints the server gives, which MCP says are
  untrusted; they only ever make a call *more* asked about than "read"): ``readOnlyHint``
  true -> ``read``; otherwise ``exec`` when ``destructiveHint`` or ``openWorldHint`` is
  true or absent (MCP's defaults for both are true), else ``write``; no annotations ->
  ``exec``.
- Approvals: the server's ``approve``: "auto" decides by that mutability and ``[tools]
  approve``, "always" asks every call, "never" never asks.
- Description for people: ``"<title or name> · <server>"`` (one line, escaped, at most 80
  characters), kind ``read`` for a read tool, else ``other``; no locations (a server's paths are its own, not the workspace's).
- Result: the text parts joined; an image, audio or resource part becomes a one-line
  note; ``isError`` is a failed result; text past :data:`RESULT_CAP` characters is cut
  with a note.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from dshd.agent.tools import Change, Tool, ToolContext, ToolDescription, ToolOutcome
from dshd.formats import clip, shown
from dshd.mcp.config import McpServerSpec
from dshd.tools.config import Mutability

NAME_CAP = 64
RESULT_CAP = 100_000  # characters of one result kept
# What one tool's definition may cost every model request (the server writes it, and may be
# hostile or careless): a description past DESCRIPTION_CAP characters is cut; a tool whose
# input schema is over SCHEMA_CAP bytes of JSON is left out (a cut schema is not a schema).
# The real servers dshd is tested with stay under 700 bytes of schema and 500 characters of
# description a tool.
DESCRIPTION_CAP = 2048
SCHEMA_CAP = 16 * 1024
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The catalogue name of the server's tool."""
    return _NOT_NAME.sub("_", f"mcp__{server}__{tool}")[:NAME_CAP]


def _hint(annotations: Any, name: str) -> Any:
    if annotations is None:
        return None
    if isinstance(annotations, dict):
        camel = "".join(part if i == 0 else part.title() for i, part in enumerate(name.split("_")))
        return annotations.get(camel, annotations.get(name))
    return getattr(annotations, name, None)


def mutability_of(annotations: Any) -> Mutability:
    """What a call of a tool with these annotations may do (the module docstring). Only
    ``True``/``False`` count as hints: anything else is as if absent."""
    if annotations is None:
        return "exec"
    if _hint(annotations, "read_only_hint") is True:
        return "read"
    destructive = _hint(annotations, "destructive_hint")
    open_world = _hint(annotations, "open_world_hint")
    if destructive is False and open_world is False:
        return "write"
    return "exec"


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return getattr(block, "text", "") or ""
    if kind in ("image", "audio"):
        data = getattr(block, "data", "") or ""
        return f"[{kind} part: {getattr(block, 'mime_type', None) or 'unknown type'}, {len(data) * 3 // 4} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'uri', '')}]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        mime = getattr(resource, "mime_type", None)
        return f"[resource: {getattr(resource, 'uri', '')}" + (f" ({mime})" if mime else "") + ", not shown]"
    return f"[{kind or 'unknown'} part, not shown]"


def result_outcome(result: Any) -> ToolOutcome:
    """A ``CallToolResult`` as a tool result (the module docstring)."""
    parts = [_block_text(block) for block in getattr(result, "content", None) or ()]
    text = "\n".join(part for part in parts if part)
    structured = getattr(result, "structured_content", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, sort_keys=True)
    if len(text) > RESULT_CAP:
        text = text[:RESULT_CAP] + f"\n[result cut at {RESULT_CAP} characters of {len(text)}]"
    if getattr(result, "is_error", False):
        return ToolOutcome.failure(text or "the tool reported an error (no text)")
    return ToolOutcome.success(text or "(no output)")


class ToolCaller(Protocol):
    """The running server, as its tools see it (:class:`dshd.mcp.servers.McpServers`)."""

    def refusal(self, server: str, tool: str | None = None) -> str | None: ...

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome: ...


def _clipped_arguments(arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return shown if len(shown) <= 200 else shown[:199] + "…"


def input_schema(listed: Any) -> dict[str, Any]:
    """The listed tool's input schema as it is passed to the model."""
    schema = getattr(listed, "input_schema", None)
    return schema if isinstance(schema, dict) else {"type": "object"}


def schema_bytes(listed: Any) -> int:
    """The size of the listed tool's input schema as JSON, in bytes."""
    return len(json.dumps(input_schema(listed), ensure_ascii=False).encode())


def definition_bytes(listed: Any) -> int:
    """What the tool's definition adds to a request: its schema and its description (as
    cut), in bytes."""
    return schema_bytes(listed) + len((getattr(listed, "description", None) or "")[:DESCRIPTION_CAP].encode())


def make_tool(spec: McpServerSpec, listed: Any, caller: ToolCaller) -> Tool:
    """The catalogue tool of one ``Tool`` the server listed (an SDK ``mcp_types.Tool``)."""
    server = spec.name
    remote = listed.name
    name = tool_name(server, remote)
    annotations = getattr(listed, "annotations", None)
    mutability = mutability_of(annotations)
    label = getattr(listed, "title", None) or _hint(annotations, "title") or remote
    # What the chat shows of it: one line, escaped, as the server wrote it.
    title = shown(clip(f"{label} · {server}", 80))
    parameters = input_schema(listed)
    description = (getattr(listed, "description", None) or "").strip() or f"The {remote} tool of the MCP server {server}."
    if len(description) > DESCRIPTION_CAP:
        description = description[: DESCRIPTION_CAP - 1] + "…"

    async def run(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        return await caller.call(server, remote, arguments)

    async def preview(ctx: ToolContext, arguments: dict[str, Any]) -> Change | ToolOutcome:
        # A tool of a server that failed, or that it no longer lists, is refused before
        # anyone is asked about it.
        refused = caller.refusal(server, remote)
        if refused is not None:
            return ToolOutcome.failure(f"Not run: {refused}")
        # What the person is asked about: escaped here, as the server wrote both parts.
        return Change(title=f"{title}: {shown(_clipped_arguments(arguments))}")

    def describe(arguments: dict[str, Any]) -> ToolDescription:
        return ToolDescription(title, "read" if mutability == "read" else "other")

    approval = {"auto": "policy", "always": "always", "never": "never"}[spec.approve]
    return Tool(
        name,
        description,
        parameters,
        run,
        mutability=mutability,
        preview=preview,
        describe=describe,
        approval=approval,  # type: ignore[arg-type]
    )
