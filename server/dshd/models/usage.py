"""Token usage: what a reply's usage looks like in the log, and the estimate made when a
provider reports none.

Characters/4 (rounded up) is the rough rule for English and code that the context
estimate also uses. A provider that reports no usage (some OpenAI-compatible servers,
some proxies) would leave a goal's token budget unspent for ever; :func:`with_estimate`
fills in what is missing from characters/4 of the request and of the reply as it
streamed, and marks the usage ``estimated`` so every reader can say so (``~12k``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs

from dshd.models.interface import (
    Message,
    ModelEvent,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
)


def text_tokens(chars: int) -> int:
    """Characters/4, rounded up."""
    return -(-chars // 4)


def message_chars(message: Message) -> int:
    size = len(message.text)
    for call in message.tool_calls:
        size += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False))
    return size


def tools_chars(tools: Iterable[ToolSpec]) -> int:
    return sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)


def request_chars(request: ModelRequest) -> int:
    """Characters of everything a request sends: system text, tool specs, messages and
    the text sent after them (``volatile``)."""
    return len(request.system) + tools_chars(request.tools) + sum(map(message_chars, request.messages)) + len(request.volatile)


def usage_record(usage: Usage) -> dict[str, Any]:
    """The log's ``assistant/message.usage`` for a usage with both counts."""
    record: dict[str, Any] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cached_input_tokens:
        record["cachedInputTokens"] = min(usage.cached_input_tokens, usage.input_tokens or 0)
    if usage.estimated:
        record["estimated"] = True
    return record


async def with_estimate(events: AsyncIterator[ModelEvent], request: ModelRequest) -> AsyncIterator[ModelEvent]:
    """``events`` as they come, with the last ``Stop``'s missing counts estimated:
    input from the request, output from the reply's text, call names and arguments."""
    reply_chars = 0
    async for event in events:
        if isinstance(event, TextDelta):
            reply_chars += len(event.text)
        elif isinstance(event, ToolCallDelta):
            reply_chars += len(event.arguments_delta)
        elif isinstance(event, ToolCallStart):
            reply_chars += len(event.name)
        elif isinstance(event, Stop):
            usage = event.usage
            if usage.input_tokens is None or usage.output_tokens is None:
                usage = attrs.evolve(
                    usage,
                    input_tokens=text_tokens(request_chars(request)) if usage.input_tokens is None else usage.input_tokens,
                    output_tokens=text_tokens(reply_chars) if usage.output_tokens is None else usage.output_tokens,
                    estimated=True,
                )
                event = Stop(event.reason, usage)
        yield event
