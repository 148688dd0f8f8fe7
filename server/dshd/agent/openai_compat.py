"""The mapping an OpenAI-compatible chat-completions adapter will use (no HTTP here).

The provider itself (config, HTTP transport, retries) comes after the core; this module
pins down that the :mod:`dshd.agent.model` interface fits such a stream, and is tested
against chunks shaped like the real ones:

* :func:`request_body` - a :class:`ModelRequest` as a streaming request body;
* :func:`sse_data` - the JSON payloads of a ``text/event-stream`` body (``data: ...``
  lines, ending at ``data: [DONE]``);
* :func:`events_from_chunks` - parsed ``chat.completion.chunk`` objects as ModelEvents.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from dshd.agent.model import (
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

_FINISH = {"stop": "end-turn", "tool_calls": "tool-calls", "function_call": "tool-calls", "length": "max-tokens"}


def request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
    for message in request.messages:
        if message.role == "user":
            messages.append({"role": "user", "content": message.text})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            messages.append(entry)
        else:
            # The API has no "failed" flag on a tool message: the content says so.
            content = message.text if message.ok else f"[tool failed] {message.text}"
            messages.append({"role": "tool", "tool_call_id": message.call_id, "content": content})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
    return body


def sse_data(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    """Chunks from server-sent-event lines; stops at ``[DONE]``."""
    for line in lines:
        line = line.strip()
        if not line.startswith("data:"):
            continue  # blank separators, comments, "event:" lines
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        try:
            yield json.loads(payload)
        except json.JSONDecodeError as exc:
            raise ModelError(f"provider sent a bad event: {exc}") from exc


async def events_from_chunks(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
    """ModelEvents from chat.completion.chunk objects (one choice, index 0).

    A tool call's first fragment carries ``id`` and ``function.name``; later fragments
    only ``index`` and ``function.arguments`` pieces. Calls end when the stream
    finishes (the API sends no per-call end), so ToolCallEnd comes before Stop.
    """
    started: list[int] = []
    finish: str | None = None
    usage = Usage()
    async for chunk in chunks:
        if chunk.get("error"):
            raise ModelError(f"provider error: {chunk['error']}")
        if chunk.get("usage"):
            usage = Usage(chunk["usage"].get("prompt_tokens"), chunk["usage"].get("completion_tokens"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                yield TextDelta(delta["content"])
            for call in delta.get("tool_calls") or []:
                index = call.get("index", 0)
                function = call.get("function") or {}
                if index not in started:
                    if not call.get("id") or not function.get("name"):
                        raise ModelError(f"tool call {index} has no id or name in its first fragment")
                    started.append(index)
                    yield ToolCallStart(index, call["id"], function["name"])
                if function.get("arguments"):
                    yield ToolCallDelta(index, function["arguments"])
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    for index in started:
        yield ToolCallEnd(index)
    if finish is None:
        raise ModelError("the stream ended without a finish_reason")
    yield Stop(_FINISH.get(finish, "end-turn"), usage)  # type: ignore[arg-type]
