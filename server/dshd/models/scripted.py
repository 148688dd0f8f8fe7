"""The scripted model (the embedded default, for demos and tests).

Replies come from a script, one per model request, in order across turns and sessions
of one workspace. ``delayMs`` sleeps before the reply (cancellable, like a slow model).
Once the script is spent every request gets "(script exhausted)" with no tool calls,
which ends the turn. It streams like a real provider, in small pieces, and reports a
reply's ``usage`` (inputTokens, outputTokens, cachedInputTokens?) when the script gives one;
a reply without one reports none (no estimate: the script is the truth about it).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from dshd.models.interface import (
    ModelEvent,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

if TYPE_CHECKING:
    from dshd.models.config import ScriptReply

EXHAUSTED_TEXT = "(script exhausted)"


class ScriptedModel:
    def __init__(self, replies: list["ScriptReply"]) -> None:
        self._replies = list(replies)
        self._next = 0
        self.requests: list[ModelRequest] = []  # what was asked, for tests and the demo

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = self._replies[self._next] if self._next < len(self._replies) else None
        self._next += reply is not None
        if reply is None:
            yield TextDelta(EXHAUSTED_TEXT)
            yield Stop("end-turn")
            return
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
        # A reply's optional usage is reported as a provider's would be (tokens without a network).
        script_usage = reply.usage
        usage = Usage() if script_usage is None else Usage(script_usage.inputTokens, script_usage.outputTokens, script_usage.cachedInputTokens)
        yield Stop("tool-calls" if reply.toolCalls else "end-turn", usage)
