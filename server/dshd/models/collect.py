"""Assembling one reply from a stream, event by event.

The agent loop feeds each event to a :class:`ReplyAssembler` as it arrives (and forwards
live deltas meanwhile); only the finished :class:`ModelReply` is recorded, so a
provider's chunking never reaches the log. A stream that breaks the event contract, or a
tool call whose arguments are not a JSON object, is ``ModelError("bad-response")``:
nothing half-parsed is ever recorded.

A tool call's arguments are capped (``max_arguments`` characters of their JSON text): a
call that goes past the cap keeps nothing more (what it had is dropped at once, later
pieces are counted only), :meth:`ReplyAssembler.over_cap` says so for its live pieces,
and :meth:`ReplyAssembler.reply` hands it out with no arguments and ``refused`` naming
the cap, so a hostile or runaway model cannot make the daemon hold, forward or record
an unbounded text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from dshd.models.interface import (
    ModelError,
    ModelEvent,
    ModelReply,
    Retrying,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallRequest,
    ToolCallStart,
)


def _bad(message: str) -> ModelError:
    return ModelError("bad-response", f"the model's reply was malformed ({message}); try again, or another model")


class ReplyAssembler:
    def __init__(self, max_arguments: int | None = None, cap_words: str = "") -> None:
        """``max_arguments``: the most characters of JSON text a call's arguments may
        have (None: no cap); ``cap_words`` says where the cap comes from, for people."""
        self._text: list[str] = []
        self._calls: dict[int, tuple[str, str, list[str]]] = {}
        self._ended: set[int] = set()
        self._stop: Stop | None = None
        self._max_arguments = max_arguments
        self._cap_words = cap_words
        self._sizes: dict[int, int] = {}  # call index -> characters of arguments seen
        self._over: set[int] = set()  # calls past the cap (their parts are dropped)

    def indices(self) -> list[int]:
        """The indices of the calls started so far, in the order :meth:`reply` lists them."""
        return sorted(self._calls)

    def call(self, index: int) -> tuple[str, str]:
        """(call id, name) of a started call."""
        call_id, name, _ = self._calls[index]
        return call_id, name

    def over_cap(self, index: int) -> bool:
        """Whether a started call's arguments went past the cap (its pieces are no
        longer kept, and are not to be forwarded)."""
        return index in self._over

    def feed(self, event: ModelEvent) -> None:
        if self._stop is not None:
            raise _bad("an event came after the end of the reply")
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ToolCallStart):
            if event.index in self._calls:
                raise _bad(f"tool call {event.index} started twice")
            if not event.name:
                raise _bad(f"tool call {event.index} has no name")
            self._calls[event.index] = (event.call_id, event.name, [])
        elif isinstance(event, ToolCallDelta):
            if event.index not in self._calls or event.index in self._ended:
                raise _bad(f"arguments for tool call {event.index} outside its start and end")
            if event.index in self._over:
                return
            size = self._sizes.get(event.index, 0) + len(event.arguments_delta)
            self._sizes[event.index] = size
            if self._max_arguments is not None and size > self._max_arguments:
                self._over.add(event.index)
                self._calls[event.index][2].clear()
                return
            self._calls[event.index][2].append(event.arguments_delta)
        elif isinstance(event, ToolCallEnd):
            if event.index not in self._calls:
                raise _bad(f"tool call {event.index} ended before it started")
            self._ended.add(event.index)
        elif isinstance(event, Stop):
            self._stop = event
        elif isinstance(event, Retrying):
            if self._text or self._calls:
                raise _bad("a retry after output")
        else:
            raise _bad(f"unknown model event {type(event).__name__}")

    def reply(self) -> ModelReply:
        if self._stop is None:
            raise _bad("the stream ended before the reply was complete")
        if self._stop.reason == "max-tokens":
            # Cut at the output limit: its calls' arguments may be cut anywhere, so none is
            # parsed or run; the text and the usage are kept (the tokens were spent).
            cut = tuple(self._calls[index][1] for index in sorted(self._calls))
            return ModelReply("".join(self._text), (), "max-tokens", self._stop.usage, cut_calls=cut)
        calls = []
        for index in sorted(self._calls):
            call_id, name, parts = self._calls[index]
            if index in self._over:
                calls.append(ToolCallRequest(call_id, name, {}, refused=self._refusal(name)))
                continue
            raw = "".join(parts) or "{}"
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise _bad(f"the arguments of tool call {name!r} are not valid JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise _bad(f"the arguments of tool call {name!r} are not a JSON object")
            calls.append(ToolCallRequest(call_id, name, arguments))
        return ModelReply("".join(self._text), tuple(calls), self._stop.reason, self._stop.usage)

    def _refusal(self, name: str) -> str:
        cap = self._max_arguments or 0
        where = f" ({self._cap_words})" if self._cap_words else ""
        return (
            f"the arguments of this {name} call were over the cap of {_human(cap)} of JSON text per tool "
            f"call{where}: the call was not run and its arguments were not kept; send a large text in "
            "smaller pieces (several calls)"
        )


def output_limit_error(max_output_tokens: int | None, cut_calls: tuple[str, ...] = ()) -> ModelError:
    """The error of a reply cut at the output limit (OpenAI ``finish_reason: "length"``,
    Anthropic ``stop_reason: "max_tokens"``): the cause, never "not valid JSON"."""
    limit = f" ({max_output_tokens} tokens)" if max_output_tokens else " (the provider's default)"
    where = f" inside the arguments of its {cut_calls[-1]} call, which was not run" if cut_calls else ""
    return ModelError(
        "output-limit",
        f"the model's reply was cut at the output limit{limit}{where}: raise [model] maxOutputTokens, "
        "or ask for a smaller step",
    )


def _human(size: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} characters"


async def collect(events: AsyncIterator[ModelEvent]) -> ModelReply:
    """Assemble one reply from a whole stream (tests, tools that need no live deltas)."""
    assembler = ReplyAssembler()
    async for event in events:
        assembler.feed(event)
    return assembler.reply()
