"""What ``Agent.prompt`` returns: a plain core value, written on the wire by each door's
converter (daemon/to_wire.py for ``dsh/agent/prompt``, the ACP door's PromptResponse)."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class TurnEnd:
    """How a prompt ended: the turn it ran in (None for a command that opened none) and
    the turn's stop reason as turn/close records it ("command" for such a command)."""

    turn: int | None
    stop_reason: str
    # {kind, message} of a model error, when a door has it; or the io-error (disk full,
    # read-only, EIO: with its path and errno) a turn stopped on
    error: dict[str, Any] | None = None
