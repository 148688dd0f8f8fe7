"""The model interface: one streaming shape every adapter speaks.

An adapter turns a :class:`ModelRequest` into an async iterator of :data:`ModelEvent`:

* ``TextDelta(text)``                       - a piece of the assistant's text
* ``ToolCallStart(index, callId, name)``    - a tool call begins
* ``ToolCallDelta(index, argumentsDelta)``  - a piece of its JSON arguments text
* ``ToolCallEnd(index)``                    - its arguments are complete
* ``Retrying(attempt, delayMs, error)``     - the call failed before any output and is
                                              tried again after ``delayMs`` (never after
                                              output: see :mod:`dshd.models.retry`)
* ``Stop(reason, usage)``                   - last event: "end-turn" | "tool-calls" |
                                              "max-tokens" (cut at the output limit), with
                                              token usage when known

A failed call raises :class:`ModelError` with one of :data:`ERROR_KINDS` and a message
that tells a person what to do. Cancelling the consumer (or closing the iterator) ends
the call at once: a provider closes its HTTP stream.

This package is layer 4 and imports no provider SDK at import time; each SDK is imported
only inside its provider module, when that provider makes its first call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, Union, get_args

import attrs

from dshd.folds.events import ModelErrorKind

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
    """A tool call: one the model made in its reply, or one in the transcript it is sent."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    # Set when the call is not to be run: its arguments were over the reply's cap
    # (models/collect.py), so they were neither kept nor sent on; this says why, and the
    # call is recorded with no arguments and this as its failed result.
    refused: str | None = None


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
    # System text that changes between rounds (a goal's counts): an adapter sends it AFTER
    # the messages, never inside them or the system text, so the prefix a provider's prompt
    # cache holds (tools, system, history) is what the last request sent (G-24).
    volatile: str = ""


# ---- stream events ----------------------------------------------------------------


@attrs.frozen
class Usage:
    input_tokens: int | None = None  # the whole prompt, cached part included
    output_tokens: int | None = None
    # The part of input_tokens the provider read from its prompt cache (None: not said).
    cached_input_tokens: int | None = None
    # The counts are characters/4 of the request and the reply (the provider reported none).
    estimated: bool = False


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
class Retrying:
    attempt: int  # the attempt about to start (2 = the first retry)
    delay_ms: int
    error: "ModelError"


@attrs.frozen
class Stop:
    reason: Literal["end-turn", "tool-calls", "max-tokens"]
    usage: Usage = Usage()


ModelEvent = Union[TextDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, Retrying, Stop]


class ModelAdapter(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Events of one model call. Cancelling the consumer cancels the call."""
        ...


# ---- errors ---------------------------------------------------------------------

# The kinds a turn/close records (the log's schema names them once).
ERROR_KINDS: tuple[str, ...] = get_args(ModelErrorKind)
# Kinds worth another attempt (when no output of the call went out yet).
RETRYABLE_KINDS = frozenset({"rate-limit", "connection", "timeout", "server"})


class ModelError(Exception):
    """A model call failed. ``kind`` is one of :data:`ERROR_KINDS`; ``message`` says what
    to do and never holds a secret. ``retry_after`` (seconds) is the provider's
    ``Retry-After`` when it sent one; ``retryable`` says whether another attempt may help."""

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None, retryable: bool | None = None) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown model error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.retryable = kind in RETRYABLE_KINDS if retryable is None else retryable

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}

    def __repr__(self) -> str:
        return f"ModelError({self.kind!r}, {self.message!r})"


# ---- reply ----------------------------------------------------------------------


@attrs.frozen
class ModelReply:
    text: str
    tool_calls: tuple[ToolCallRequest, ...]
    stop_reason: str
    usage: Usage
    # stop_reason "max-tokens": the names of the calls the cut reply had begun (not run).
    cut_calls: tuple[str, ...] = ()
