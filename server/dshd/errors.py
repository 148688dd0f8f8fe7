"""Domain errors shared by every layer (this module imports nothing of dshd).

Each error has a stable kebab-case ``kind`` and structured ``data``
(``field``, ``current``, ``phase``, ``key``, ``seq``, ``line``, ``reason``, ``pid``).
The daemon turns a ``DshError`` into a JSON-RPC error whose ``data`` is
``{"kind": kind, **data}``; the core raises it without knowing about JSON-RPC. The kinds
are the protocol's vocabulary, listed once in ``dshd_protocol.errors`` (standard library
only, the one part of the wire package the core imports).
"""

from __future__ import annotations

from typing import Any

from dshd_protocol.errors import ERROR_KINDS


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
