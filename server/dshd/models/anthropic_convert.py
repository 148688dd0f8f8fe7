"""The Anthropic Messages mapping (no HTTP here: :mod:`dshd.models.anthropic` is the
transport).

Request: ``system`` is the top-level system text; a user message is a text block; an
assistant message is its text block (when not empty) and one ``tool_use`` block per call;
tool results become ``tool_result`` blocks (``is_error`` when the tool failed) in a user
message. Consecutive messages of one role are merged (the API wants turns to alternate),
and an assistant message with nothing in it is left out. The request's ``volatile`` text
(when any) is a last text block of the last user turn.

Stream (``stream=True``): ``message_start`` (input tokens), ``content_block_start`` of
type ``text`` or ``tool_use`` (id, name), ``content_block_delta`` with ``text_delta`` or
``input_json_delta`` (pieces of the call's JSON arguments), ``content_block_stop`` (a
call's arguments are complete), ``message_delta`` (``stop_reason``, output tokens so
far, cumulative), ``message_stop``. ``ping`` and thinking blocks carry nothing for us.
Usage: the prompt is ``input_tokens`` + ``cache_creation_input_tokens`` +
``cache_read_input_tokens`` (the last is the part read from the cache). Stop reasons:
``tool_use`` -> tool-calls, ``max_tokens`` -> max-tokens, others -> end-turn.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from dshd.models.fields import field
from dshd.models.interface import (
    ModelError,
    ModelEvent,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

DEFAULT_MAX_TOKENS = 8192  # the API needs max_tokens; [model] maxOutputTokens overrides it

_STOP = {"tool_use": "tool-calls", "max_tokens": "max-tokens"}


def request_body(request: ModelRequest, model: str, *, max_tokens: int | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for message in request.messages:
        if message.role == "user":
            add("user", [{"type": "text", "text": message.text}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
            blocks += [
                {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            ]
            add("assistant", blocks)
        else:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id, "content": message.text}
            if not message.ok:
                result["is_error"] = True
            add("user", [result])
    if request.volatile:
        # G-24: what changes between rounds is a text block at the end of the last user
        # turn (after its tool results, as the API wants), so everything before it is the
        # prefix the last request sent and a prompt cache can reuse.
        add("user", [{"type": "text", "text": request.volatile}])
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]
    return body


_ERROR_KINDS = {
    "overloaded_error": "server",
    "api_error": "server",
    "rate_limit_error": "rate-limit",
    "invalid_request_error": "bad-request",
    "authentication_error": "auth",
    "permission_error": "auth",
    "request_too_large": "context-overflow",
}


def stream_error(error: Any) -> ModelError:
    """An ``error`` event inside a stream (e.g. ``overloaded_error``)."""
    kind = _ERROR_KINDS.get(str(field(error, "type", "")), "server")
    message = " ".join(str(field(error, "message", "") or "an error").split())[:300]
    return ModelError(kind, f"Anthropic reported an error mid-stream ({field(error, 'type', 'error')}): {message}; try again")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _input_tokens(usage: Any) -> int | None:
    """The whole prompt: ``input_tokens`` is only the part after the last cache
    breakpoint; what was written to and read from the cache is counted beside it."""
    parts = [_count(field(usage, k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


async def events_from_stream(events: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
    """ModelEvents from Messages stream events (dicts or the SDK's objects)."""
    tools: set[int] = set()
    open_tools: set[int] = set()
    stop_reason: str | None = None
    stopped = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None  # cache_read_input_tokens: the part read from the cache
    async for event in events:
        kind = field(event, "type")
        if kind == "message_start":
            usage = field(field(event, "message"), "usage")
            input_tokens = _input_tokens(usage)
            output_tokens = _count(field(usage, "output_tokens"))
            cached_tokens = _count(field(usage, "cache_read_input_tokens"))
        elif kind == "content_block_start":
            index, block = field(event, "index", 0), field(event, "content_block")
            block_type = field(block, "type")
            if block_type == "text":
                if field(block, "text"):
                    yield TextDelta(field(block, "text"))
            elif block_type == "tool_use":
                if not field(block, "name"):
                    raise ModelError("bad-response", f"the model sent tool call {index} without a name; try again")
                if not field(block, "id"):
                    raise ModelError("bad-response", f"the model sent tool call {index} without an id; try again")
                tools.add(index)
                open_tools.add(index)
                yield ToolCallStart(index, field(block, "id"), field(block, "name"))
                initial = field(block, "input")
                if initial:  # the API streams arguments as deltas; a proxy may send them whole here
                    yield ToolCallDelta(index, json.dumps(initial))
        elif kind == "content_block_delta":
            index, delta = field(event, "index", 0), field(event, "delta")
            delta_type = field(delta, "type")
            if delta_type == "text_delta":
                if field(delta, "text"):
                    yield TextDelta(field(delta, "text"))
            elif delta_type == "input_json_delta":
                if index not in open_tools:
                    raise ModelError("bad-response", f"arguments for block {index}, which is not an open tool call; try again")
                if field(delta, "partial_json"):
                    yield ToolCallDelta(index, field(delta, "partial_json"))
        elif kind == "content_block_stop":
            index = field(event, "index", 0)
            if index in open_tools:
                open_tools.discard(index)
                yield ToolCallEnd(index)
        elif kind == "message_delta":
            stop_reason = field(field(event, "delta"), "stop_reason") or stop_reason
            usage = field(event, "usage")  # counts here are cumulative: they replace the start's
            if _count(field(usage, "output_tokens")) is not None:
                output_tokens = _count(field(usage, "output_tokens"))
            if _input_tokens(usage) is not None:
                input_tokens = _input_tokens(usage)
            if _count(field(usage, "cache_read_input_tokens")) is not None:
                cached_tokens = _count(field(usage, "cache_read_input_tokens"))
        elif kind == "message_stop":
            stopped = True
        elif kind == "error":
            raise stream_error(field(event, "error"))
    if not stopped or stop_reason is None:
        raise ModelError("bad-response", "the stream ended before the reply was complete (no message_stop); try again")
    for index in sorted(open_tools):
        yield ToolCallEnd(index)
    reason = _STOP.get(stop_reason, "end-turn")
    if reason == "end-turn" and tools:
        reason = "tool-calls"
    yield Stop(reason, Usage(input_tokens, output_tokens, cached_tokens))  # type: ignore[arg-type]
