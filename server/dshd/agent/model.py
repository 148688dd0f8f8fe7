"""Model adapters: one streaming interface, shaped for real tool-calling models.

An adapter turns a :class:`ModelRequest` into an async iterator of :data:`ModelEvent`:

* ``TextDelta(text)``                       - a piece of the assistant's text
* ``ToolCallStart(index, callId, name)``    - a tool call begins
* ``ToolCallDelta(index, argumentsDelta)``  - a piece of its JSON arguments text
* ``ToolCallEnd(index)``                    - its arguments are complete
* ``Stop(reason, usage)``                   - last event: "end-turn" | "tool-calls" |
                                              "max-tokens", with token usage when known

How an OpenAI-compatible chat-completions stream maps (``stream=True``,
``stream_options={"include_usage": true}``): ``choices[0].delta.content`` -> TextDelta;
``delta.tool_calls[i]`` carrying ``id``/``function.name`` -> ToolCallStart(i, id, name),
its ``function.arguments`` fragments -> ToolCallDelta(i, ...); ``finish_reason`` ->
ToolCallEnd for each open call, then Stop("tool-calls" | "end-turn" for "stop" |
"max-tokens" for "length"), with ``usage`` from the final chunk. The request's
``system`` becomes the first system message, ``messages`` map one to one, ``tools``
become ``{"type": "function", "function": {name, description, parameters}}``.

:func:`collect` folds a stream into a :class:`ModelReply`; the agent loop records only
the reply, so a provider's chunking never reaches the log.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, Union

import attrs

from dshd.agent.config import Config, ScriptReply

# ---- request ------------------------------------------------------------------


@attrs.frozen
class Message:
    """One transcript entry. role "user" | "assistant" | "tool"."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    # assistant: the calls it made; tool: the call it answers and whether it failed.
    tool_calls: tuple["ToolCallRequest", ...] = ()
    call_id: str | None = None
    ok: bool = True


@attrs.frozen
class ToolCallRequest:
    call_id: str
    name: str
    arguments: dict[str, Any]


@attrs.frozen
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@attrs.frozen
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]


# ---- stream events ----------------------------------------------------------------


@attrs.frozen
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None


@attrs.frozen
class TextDelta:
    text: str


@attrs.frozen
class ToolCallStart:
    index: int
    call_id: str
    name: str


@attrs.frozen
class ToolCallDelta:
    index: int
    arguments_delta: str


@attrs.frozen
class ToolCallEnd:
    index: int


@attrs.frozen
class Stop:
    reason: Literal["end-turn", "tool-calls", "max-tokens"]
    usage: Usage = Usage()


ModelEvent = Union[TextDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, Stop]


class ModelAdapter(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Events of one model call. Cancelling the consumer cancels the call."""
        ...


class ModelError(Exception):
    """The model call failed or its stream broke the event contract."""


# ---- reply ----------------------------------------------------------------------


@attrs.frozen
class ReplyToolCall:
    call_id: str
    name: str
    arguments: dict[str, Any] | None  # None: the arguments text was not a JSON object
    arguments_error: str | None = None


@attrs.frozen
class ModelReply:
    text: str
    tool_calls: tuple[ReplyToolCall, ...]
    stop_reason: str
    usage: Usage


async def collect(events: AsyncIterator[ModelEvent]) -> ModelReply:
    """Assemble one reply from a stream; a stream that breaks the contract is ModelError."""
    text_parts: list[str] = []
    calls: dict[int, tuple[str, str, list[str]]] = {}
    ended: set[int] = set()
    stop: Stop | None = None
    async for event in events:
        if stop is not None:
            raise ModelError("event after Stop")
        if isinstance(event, TextDelta):
            text_parts.append(event.text)
        elif isinstance(event, ToolCallStart):
            if event.index in calls:
                raise ModelError(f"tool call {event.index} started twice")
            calls[event.index] = (event.call_id, event.name, [])
        elif isinstance(event, ToolCallDelta):
            if event.index not in calls or event.index in ended:
                raise ModelError(f"arguments for tool call {event.index} outside its start/end")
            calls[event.index][2].append(event.arguments_delta)
        elif isinstance(event, ToolCallEnd):
            if event.index not in calls:
                raise ModelError(f"tool call {event.index} ended before it started")
            ended.add(event.index)
        elif isinstance(event, Stop):
            stop = event
        else:
            raise ModelError(f"unknown model event {event!r}")
    if stop is None:
        raise ModelError("stream ended without Stop")
    replies = []
    for index in sorted(calls):
        call_id, name, parts = calls[index]
        raw = "".join(parts) or "{}"
        try:
            arguments = json.loads(raw)
            error = None if isinstance(arguments, dict) else "arguments must be a JSON object"
        except json.JSONDecodeError as exc:
            arguments, error = None, f"arguments are not valid JSON: {exc}"
        if error is not None:
            arguments = None
        replies.append(ReplyToolCall(call_id, name, arguments, error))
    return ModelReply("".join(text_parts), tuple(replies), stop.reason, stop.usage)


# ---- the scripted model (SPEC 7) ------------------------------------------------------

EXHAUSTED_TEXT = "(script exhausted)"


class ScriptedModel:
    """Replies from a script, one per model request, in order across turns and sessions
    of one workspace. ``delayMs`` sleeps before the reply (cancellable, like a slow
    model). Once the script is spent every request gets "(script exhausted)" with no
    tool calls, which ends the turn. Streams like a real provider, in small pieces."""

    def __init__(self, replies: list[ScriptReply]) -> None:
        self._replies = list(replies)
        self._next = 0
        self.requests: list[ModelRequest] = []  # what was asked, for tests and the demo

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    def _take(self) -> ScriptReply:
        if self._next >= len(self._replies):
            return ScriptReply(text=EXHAUSTED_TEXT)
        reply = self._replies[self._next]
        self._next += 1
        return reply

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = self._take()
        if reply.delayMs:
            await asyncio.sleep(reply.delayMs / 1000)
        text = reply.text or ""
        for start in range(0, len(text), 16):
            yield TextDelta(text[start : start + 16])
        for index, call in enumerate(reply.toolCalls):
            # Random ids: a counter would repeat after a restart within one session log.
            yield ToolCallStart(index, f"call-{secrets.token_hex(6)}", call.name)
            arguments = json.dumps(call.arguments)
            half = len(arguments) // 2
            yield ToolCallDelta(index, arguments[:half])
            yield ToolCallDelta(index, arguments[half:])
            yield ToolCallEnd(index)
        yield Stop("tool-calls" if reply.toolCalls else "end-turn")


def model_from_config(config: Config) -> ModelAdapter:
    """The adapter the config names."""
    if config.model.provider == "scripted":
        return ScriptedModel(config.scriptReplies)
    from dshd.errors import DshError

    raise DshError("invalid-config", f"provider {config.model.provider!r} is not built yet", key="model.provider")
