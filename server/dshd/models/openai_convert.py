"""The OpenAI Chat Completions mapping (no HTTP here: :mod:`dshd.models.openai` is the
transport). Tested against chunks shaped like the real ones from OpenAI, vLLM,
llama.cpp's server and ollama, which differ:

* a tool call's ``id`` and ``function.name`` come on its first fragment (OpenAI, vLLM),
  or on every fragment, or the whole call comes in one chunk (llama.cpp, ollama); a
  missing ``index`` means the call's position in that chunk; a missing ``id`` gets one
  made up here (the log needs one);
* ``usage`` arrives in its own last chunk with no choices (OpenAI with
  ``include_usage``; the chunks before carry ``usage: null``), in the last chunk with the
  finish, or not at all; ``prompt_tokens_details.cached_tokens`` is the cached part of
  ``prompt_tokens``;
* ``content`` may be ``""`` or ``null`` beside tool calls;
* ``finish_reason`` may be ``"stop"`` although tool calls came (ollama) or
  ``"tool_calls"`` with none: the calls that arrived decide, ``"length"`` is max-tokens.

Request: the request's ``system`` becomes the first system message, ``messages`` map one
to one, its ``volatile`` text (when any) is a last system message after them, ``tools``
become ``{"type": "function", "function": {name, description, parameters}}``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterable
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


def request_body(request: ModelRequest, model: str, *, max_tokens: int | None = None, max_tokens_key: str = "max_tokens") -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
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
    if request.volatile:
        # G-24: what changes between rounds goes last, so every message before it is the
        # prefix the last request sent and a server's prompt cache can reuse.
        messages.append({"role": "system", "content": request.volatile})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if max_tokens is not None:
        body[max_tokens_key] = max_tokens
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
    """Chunks from server-sent-event lines; stops at ``[DONE]`` (tests and benches)."""
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
            raise ModelError("bad-response", f"the provider sent an event that is not JSON ({exc})") from None


def _error_text(error: Any) -> str:
    message = field(error, "message") if not isinstance(error, str) else error
    return str(message or error)[:500]


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(usage: Any) -> Usage:
    """``prompt_tokens`` is the whole prompt; ``prompt_tokens_details.cached_tokens`` the
    part of it read from the server's prompt cache (OpenAI; llama.cpp's server too)."""
    cached = _count(field(field(usage, "prompt_tokens_details"), "cached_tokens"))
    return Usage(_count(field(usage, "prompt_tokens")), _count(field(usage, "completion_tokens")), cached)


async def events_from_chunks(chunks: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
    """ModelEvents from ``chat.completion.chunk`` objects (dicts or the SDK's objects;
    one choice, index 0). Calls end when the stream finishes (the API sends no per-call
    end), so every ToolCallEnd comes right before Stop."""
    started: dict[int, str] = {}
    finish: str | None = None
    usage = Usage()
    async for chunk in chunks:
        error = field(chunk, "error")
        if error:  # OpenRouter and some proxies report a failure inside the stream
            raise ModelError("server", f"the provider reported an error mid-stream: {_error_text(error)}; try again")
        chunk_usage = field(chunk, "usage")
        if chunk_usage:
            usage = _usage(chunk_usage)
        for choice in field(chunk, "choices", ()):
            if field(choice, "index", 0) != 0:
                continue
            delta = field(choice, "delta")
            content = field(delta, "content")
            if content:
                yield TextDelta(content)
            for position, call in enumerate(field(delta, "tool_calls", ())):
                index = field(call, "index", position)
                function = field(call, "function")
                name = field(function, "name")
                if index not in started:
                    if not name:
                        raise ModelError("bad-response", f"the model sent tool call {index} without a name; try again")
                    started[index] = field(call, "id") or f"call-{secrets.token_hex(6)}"
                    yield ToolCallStart(index, started[index], name)
                arguments = field(function, "arguments")
                if arguments:
                    if not isinstance(arguments, str):  # a server that sends an object, not its text
                        arguments = json.dumps(arguments)
                    yield ToolCallDelta(index, arguments)
            if field(choice, "finish_reason"):
                finish = field(choice, "finish_reason")
    if finish is None:
        raise ModelError("bad-response", "the stream ended before the reply was complete (no finish_reason); try again")
    for index in started:
        yield ToolCallEnd(index)
    if finish == "length":
        reason = "max-tokens"
    elif started:
        reason = "tool-calls"
    else:
        reason = "end-turn"
    yield Stop(reason, usage)  # type: ignore[arg-type]
