"""LSP framing (``Content-Length`` headers, JSON bodies) for dshd's own command-line
clients of the dsh door: ``dshd goal`` (a blocking socket) and ``dshd run`` (asyncio
streams). Standard library only; how the bytes move is each client's. The daemon's side
of the framing, which must survive any bytes, is ``daemon/transport.py``."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FramingError", "Frames", "frame"]


class FramingError(ValueError):
    """The daemon sent bytes that are no JSON-RPC message (the message says what)."""


def frame(message: dict[str, Any]) -> bytes:
    """One message as its frame: the header, then the UTF-8 JSON body."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    raise FramingError("the daemon sent a message without Content-Length")


class Frames:
    """The bytes read so far; :meth:`next` takes whole messages off the front."""

    def __init__(self, first: bytes = b"") -> None:
        self._buffer = bytearray(first)

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk

    def next(self) -> dict[str, Any] | None:
        """The next whole message, or None until more bytes are fed."""
        head_end = self._buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        length = _content_length(bytes(self._buffer[:head_end]))
        start = head_end + 4
        if len(self._buffer) < start + length:
            return None
        body = bytes(self._buffer[start : start + length])
        del self._buffer[: start + length]
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise FramingError("the daemon sent something that is not a JSON-RPC message")
        return message
