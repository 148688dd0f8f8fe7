"""Committed events and live deltas -> ACP ``session/update`` payloads.

One :class:`UpdateTranslator` per open session (live: fed by the hub, dshd.api.hub) or
per history replay (``session/load``); events come as JSON (``{"seq", "type", "data"}``). It keeps only what it needs to pair things up: the name and
arguments of each tool call (for its result) and the text already streamed in the
current step (so the durable ``assistant/message`` adds only what the deltas had not
sent).

    user/message        the person's: user_message_chunk (replay only: the client already
                        shows what its person typed); dshd's own notes (source "plugin":
                        a goal round's "continue", plan narration): agent_message_chunk,
                        quoted and labelled, with ``_meta.dsh`` saying who wrote it.
                        Every message has its own messageId (user-<seq>, assistant-<turn>.<step>)
    assistant/message   agent_message_chunk (what deltas had not streamed yet); with the
                        provider's usage and ``[model] contextWindow`` known, also
                        usage_update {used: input + output tokens, size: the window,
                        _meta.dsh {inputTokens, cachedInputTokens?, outputTokens, estimated?}}
    tool/call           tool_call: kind, title, locations (the tool's own description,
                        Tool.describe, from the agent's catalogue), rawInput, diff for edits (a
                        live write_file's old side is the file as it is before it runs),
                        the plan for exit_plan_mode (titled "Plan: <heading>"); status pending
    tool start          tool_call_update in_progress, when the call really runs (after its
                        approval); a call refused or rejected first goes pending -> failed
    tool/result         tool_call_update: completed | failed, the result as content
                        A reply that looks like a tool call written as text (a JSON
                        object naming an offered tool: nothing ran) gets a quoted note after it
    mcp/server          an MCP server that failed to start, died or hung: a quoted note
                        naming it and why (messageId notice-<seq>), live and on replay
    delta text          agent_message_chunk
    delta tool-arguments  tool_call (pending, title from the name) once per call

Plan mode and goal changes come from their services' listeners (live.py), not from
events: the client hears them when they are committed, with the values it acts on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)

from dshd.agent.deltas import AgentDelta
from dshd.agent.tools import ToolCatalogue, ToolDescription
from dshd.api.escape import shown, shown_lines
from dshd.api.words import mcp_server_failed_text
from dshd.api.written_calls import notice_text, written_tool_call
from dshd.plugins import known_tools
from dshd.plugins.plan import TOOL_NAME as EXIT_PLAN_MODE
from dshd.tools.files import read_text
from dshd.tools.paths import resolve as resolve_path
from dshd.tools.paths import shown as shown_path

log = logging.getLogger("dshd.acp")

_EDITS = {"edit_file", "write_file"}


def text(value: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=value))


def agent_text(value: str, message_id: str | None = None) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_update="agent_message_chunk", content=TextContentBlock(type="text", text=value), message_id=message_id
    )


def _str(arguments: dict[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) and value else None


def current_text(root: Path, path: Any) -> str | None:
    """The workspace file's text now (for the old side of a write_file diff), read as the
    file tools read (inside the workspace, regular files, links only while inside), or
    None when there is none to show (no such file, refused, not text)."""
    try:
        root = root.resolve()
        target = resolve_path(root, path, write=True)
        return read_text(root, target, shown_path(root, target))
    except Exception:  # a new file, or one the tools would refuse: no old side
        return None


def tool_locations(root: Path, description: ToolDescription) -> list[ToolCallLocation] | None:
    """The workspace paths the call touches (the tool's own description), as absolute paths."""
    return [ToolCallLocation(path=str(root / loc.path), line=loc.line) for loc in description.locations] or None


def _edit_diff(root: Path, name: str, arguments: dict[str, Any], old_text: str | None = None) -> FileEditToolCallContent | None:
    path = _str(arguments, "path")
    if path is None:
        return None
    path = shown(path)  # a client shows it as the diff's name: escaped, as every title is
    if name == "edit_file" and isinstance(arguments.get("oldText"), str) and isinstance(arguments.get("newText"), str):
        return FileEditToolCallContent(
            type="diff", path=str(root / path), old_text=arguments["oldText"], new_text=arguments["newText"]
        )
    if name == "write_file" and isinstance(arguments.get("content"), str):
        # old_text: the file as it was before the write (None: a new file).
        return FileEditToolCallContent(type="diff", path=str(root / path), old_text=old_text, new_text=arguments["content"])
    return None


def tool_call_content(root: Path, name: str, arguments: dict[str, Any], old_text: str | None = None) -> list[Any] | None:
    """What the call shows before it runs: an edit's diff, the plan under review."""
    if name in _EDITS:
        diff = _edit_diff(root, name, arguments, old_text)
        return [diff] if diff is not None else None
    if name == EXIT_PLAN_MODE and _str(arguments, "plan"):
        return [text(shown_lines(arguments["plan"]))]
    return None


def _call_fields(
    root: Path, description: ToolDescription, name: str, arguments: dict[str, Any], old_text: str | None = None
) -> dict[str, Any]:
    """A pending call as the client shows it: announced now, or completed after its
    arguments streamed. Title (escaped), kind and locations are the tool's own (Tool.describe)."""
    return {
        "title": description.title,
        "kind": description.kind,
        "status": "pending",
        "locations": tool_locations(root, description),
        "raw_input": arguments,
        "content": tool_call_content(root, name, arguments, old_text),
    }


def tool_call_start(
    root: Path, description: ToolDescription, call_id: str, name: str, arguments: dict[str, Any], old_text: str | None = None
) -> ToolCallStart:
    fields = _call_fields(root, description, name, arguments, old_text)
    return ToolCallStart(session_update="tool_call", tool_call_id=call_id, **fields)


def tool_call_details(
    root: Path, description: ToolDescription, call_id: str, name: str, arguments: dict[str, Any], old_text: str | None = None
) -> ToolCallProgress:
    """The full call, for a tool_call already announced while its arguments streamed."""
    fields = _call_fields(root, description, name, arguments, old_text)
    return ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, **fields)


def tool_running(call_id: str) -> ToolCallProgress:
    """The call started running (after its approval, if it needed one)."""
    return ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, status="in_progress")


def tool_result_update(
    root: Path, call_id: str, name: str | None, arguments: dict[str, Any], ok: bool, content: str, old_text: str | None = None
) -> ToolCallProgress:
    # What the client shows is escaped (a listing's names, a command's output: api/escape.py);
    # raw_output keeps the text as the tool gave it.
    shown: list[Any] = [text(shown_lines(content))] if content else []
    if ok and name in _EDITS:
        # The diff says it better than the result's unified-diff text.
        diff = _edit_diff(root, name, arguments, old_text)
        if diff is not None:
            shown = [diff]
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="completed" if ok else "failed",
        content=shown,
        raw_output={"ok": ok, "content": content},
    )


def user_text(data: dict[str, Any], message_id: str | None = None) -> UserMessageChunk | AgentMessageChunk:
    """A user/message: the person's words as a user message; a note dshd itself added (a
    goal round's "continue", a plan-mode note: source "plugin") as an agent message of its
    own (its ``messageId``), so a client never shows it as something the person said."""
    if data.get("source") != "plugin":
        return UserMessageChunk(
            session_update="user_message_chunk",
            content=TextContentBlock(type="text", text=data["text"]),
            message_id=message_id,
        )
    meta: dict[str, Any] = {"dsh": {"source": "plugin", "plugin": data.get("plugin")}}
    goal_round = data.get("goalRound")
    label = "Plan mode" if data.get("plugin") == "plan" else "Note from dshd"
    if isinstance(goal_round, dict):
        meta["dsh"]["goalRound"] = goal_round
        label = f"Goal round {goal_round.get('round')}"
    quoted = "\n".join("> " + line if line else ">" for line in data["text"].splitlines())
    return AgentMessageChunk(
        session_update="agent_message_chunk",
        content=TextContentBlock(type="text", text=f"\n\n> **{label}**\n{quoted}\n\n"),
        message_id=message_id,
        field_meta=meta,
    )


def usage_meta(usage: dict[str, Any]) -> dict[str, Any]:
    """One model call's tokens as ``_meta.dsh`` carries them: input (of which read from the
    provider's prompt cache), output, and ``estimated`` when the provider reported none and
    dshd counted characters/4 (ACP's usage has no word for an estimate)."""
    out: dict[str, Any] = {"inputTokens": usage.get("inputTokens", 0), "outputTokens": usage.get("outputTokens", 0)}
    if usage.get("cachedInputTokens"):
        out["cachedInputTokens"] = usage["cachedInputTokens"]
    if usage.get("estimated") is True:
        out["estimated"] = True
    return out


class UpdateTranslator:
    def __init__(self, root: Path, *, live: bool, context_window: int | None = None, tools: ToolCatalogue | None = None) -> None:
        self.root = root
        # Calls are described by their tools (Tool.describe): the agent's catalogue, or
        # every known plugin's tools when there is no agent to ask.
        self.tools = tools if tools is not None else known_tools()
        self.live = live
        self.context_window = context_window
        self._calls: dict[str, tuple[str, dict[str, Any], str | None]] = {}  # name, arguments, old text
        self._announced: set[str] = set()
        self._streamed = ""
        self._step = (0, 0)  # (turn, step) of the last request: the id of its reply
        self._offered: frozenset[str] | None = None  # the tools the last request offered

    def event(self, event: dict[str, Any]) -> list[Any]:
        """The updates for one committed event (as JSON: ``{"seq", "type", "data", ...}``)."""
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "user/message":
            if self.live and data.get("source") == "user":
                return []
            return [user_text(data, f"user-{event.get('seq')}")]
        if kind == "request/header":
            self._streamed = ""
            self._step = (event.get("turn") or 0, data.get("step") or 0)
            tools = data.get("tools")
            self._offered = frozenset(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else None
            return []
        if kind == "assistant/message":
            return self._assistant(data["text"]) + self._written_call(data["text"]) + self._usage(data.get("usage"))
        if kind == "tool/call":
            call_id, name, arguments = data["callId"], data["name"], dict(data.get("arguments") or {})
            # Live, the call has not run yet: the file as it is now is the old side of a
            # write's diff. A replay cannot know it (the write happened), so it has none.
            old = current_text(self.root, arguments.get("path")) if self.live and name == "write_file" else None
            self._calls[call_id] = (name, arguments, old)
            description = self.tools.describe(name, arguments)
            if call_id in self._announced:
                return [tool_call_details(self.root, description, call_id, name, arguments, old)]
            return [tool_call_start(self.root, description, call_id, name, arguments, old)]
        if kind == "tool/result":
            call_id = data["callId"]
            name, arguments, old = self._calls.pop(call_id, (None, {}, None))
            self._announced.discard(call_id)
            return [tool_result_update(self.root, call_id, name, arguments, data["ok"], data["content"], old)]
        if kind == "mcp/server" and data.get("state") == "failed":
            said = mcp_server_failed_text(str(data.get("name", "?")), data.get("reason"))
            return [agent_text(f"\n\n> **Note from dshd**\n> {said}\n\n", f"notice-{event.get('seq')}")]
        return []

    def tool_started(self, call_id: str) -> list[Any]:
        """pending -> in_progress, once the call runs (live only; a replay shows each call's end)."""
        return [tool_running(call_id)] if call_id in self._calls else []

    def delta(self, delta: AgentDelta) -> list[Any]:
        if delta.kind == "text" and delta.text:
            self._streamed += delta.text
            return [agent_text(delta.text, f"assistant-{delta.turn}.{delta.step}")]
        if delta.kind == "tool-arguments" and delta.call_id and delta.call_id not in self._announced:
            self._announced.add(delta.call_id)
            # Before its arguments are known: what the call will do ("Read a file").
            description = self.tools.describe(delta.name or "tool", {})
            return [
                ToolCallStart(
                    session_update="tool_call",
                    tool_call_id=delta.call_id,
                    title=description.title,
                    kind=description.kind,
                    status="pending",
                )
            ]
        return []

    def _written_call(self, reply: str) -> list[Any]:
        """A reply that looks like a tool call written as text (nothing ran): said after it,
        as the chat's notice says it (dshd.api.written_calls)."""
        offered = self._offered if self._offered is not None else self.tools.names()
        tool = written_tool_call(reply, offered)
        if tool is None:
            return []
        message_id = "assistant-{}.{}".format(*self._step)
        return [agent_text(f"\n\n> **Note from dshd**\n> {notice_text(tool)}\n\n", message_id)]

    def _usage(self, usage: Any) -> list[Any]:
        """How full the context is after this call: what went in plus what came out."""
        if not isinstance(usage, dict) or not self.context_window:
            return []
        used = usage.get("inputTokens", 0) + usage.get("outputTokens", 0)
        return [UsageUpdate(session_update="usage_update", used=used, size=self.context_window, field_meta={"dsh": usage_meta(usage)})]

    def _assistant(self, final: str) -> list[Any]:
        streamed, self._streamed = self._streamed, ""
        message_id = "assistant-{}.{}".format(*self._step)
        if not streamed:
            return [agent_text(final, message_id)] if final else []
        if final.startswith(streamed):
            rest = final[len(streamed) :]
            return [agent_text(rest, message_id)] if rest else []
        # Deltas are not the truth; ACP cannot take back text already sent.
        log.warning("streamed text differs from the committed reply; the client keeps what was streamed")
        return []
