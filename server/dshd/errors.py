"""Domain errors shared by every layer (this module imports nothing of dshd).

Each error has a stable kebab-case ``kind`` (SPEC section 6) and structured ``data``
(``field``, ``current``, ``phase``, ``key``, ``seq``, ``line``, ``reason``, ``pid``).
The daemon turns a ``DshError`` into a JSON-RPC error whose ``data`` is
``{"kind": kind, **data}``; the core raises it without knowing about JSON-RPC.
"""

from __future__ import annotations

from typing import Any

ERROR_KINDS = (
    "invalid-params",
    "unknown-agent",
    "stale-agent",
    "stale-revision",
    "invalid-transition",
    "no-goal",
    "budget-exhausted",
    "plugin-not-loaded",
    "invalid-config",
    "replay-failed",
    "session-locked",
    "turn-open",
    "unsafe-path",
    "io-error",
)


class DshError(Exception):
    """An error a client can act on. ``kind`` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str, **data: Any) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}

    def __repr__(self) -> str:
        return f"DshError({self.kind!r}, {self.message!r}, {self.data!r})"
