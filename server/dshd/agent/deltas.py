"""Live deltas: what a model call streams before its durable events exist.

A delta is never durable and never enters the transcript. The agent hands each one to
its delta listeners (the front doors turn them into ``dsh/agent/delta`` or ACP
``agent_message_chunk`` updates); the ``assistant/message`` and ``tool/call`` events
committed when the reply is complete are the truth, and a client replaces its live text
with them.

Kinds: ``text`` (a piece of the assistant's text), ``tool-arguments`` (a piece of a tool
call's JSON arguments; ``call_id`` and ``name`` say which call), ``retry`` (the call
failed and will be tried again: ``attempt`` is the attempt about to start, ``delay_ms``
the wait before it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs

DeltaKind = Literal["text", "tool-arguments", "retry"]


@attrs.frozen
class AgentDelta:
    turn: int
    step: int
    kind: DeltaKind
    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    attempt: int | None = None
    delay_ms: int | None = None


DeltaListener = Callable[[AgentDelta], None]
