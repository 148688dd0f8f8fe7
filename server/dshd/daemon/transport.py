"""LSP framing for the dsh server: ``Content-Length`` headers over an asyncio stream
(stdin through asyncio's own pipe transport, or a socket connection of the shared
daemon), no thread hop per message; each decoded message goes to the server
(daemon/server.py), which does dispatch, futures, cancellation and the LSP lifecycle.

Bad bytes never stop the loop: a header block without a usable ``Content-Length`` is
skipped; a body that is not JSON gets a -32700 Parse error; a message that is not a
JSON-RPC 2.0 object gets -32600 Invalid Request when it carries an id (a request whose id
is ``null`` too, answered with ``"id": null``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, BinaryIO, Callable

from dshd.transport.stdio import MAX_MESSAGE, decode_json

logger = logging.getLogger("dshd.daemon")

MAX_HEADER_TAIL = 128  # where a header line is searched for Content-Length
MAX_BODY = MAX_MESSAGE


def encode_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class StdoutWriter:
    """The server's writer on stdout: one ``write`` per framed message, flushed at once."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()

    def close(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass


class StreamFrameWriter:
    """The same over an asyncio stream (a socket connection): ``write`` queues the frame
    in the transport without blocking the loop; a peer gone away is BrokenPipeError, as
    on a pipe."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            raise BrokenPipeError("the connection is closed")
        self._writer.write(data)

    def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()


async def read_messages(
    reader: asyncio.StreamReader,
    on_message: Callable[[dict[str, Any]], None],
    on_bad_message: Callable[[int, str, Any], None],
) -> None:
    """Read framed JSON-RPC messages until EOF and hand each decoded object on.

    ``on_bad_message(code, text, msg_id)`` answers what cannot be dispatched.
    """
    while True:
        content_length: int | None = None
        # Header block: lines until an empty one.
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return  # EOF (possibly inside a header: nothing to answer)
            except asyncio.LimitOverrunError:
                # A huge header line is garbage: drop what is buffered and resync.
                await reader.read(MAX_BODY)
                continue
            stripped = line.strip()
            if not stripped:
                if content_length is not None:
                    break
                continue  # blank lines before any header: garbage, keep looking
            # The header may follow garbage on the same line (the unterminated tail of a
            # bad frame): look for it at the end of the line, or we never resync.
            tail = stripped[-MAX_HEADER_TAIL:].lower()
            at = tail.rfind(b"content-length:")
            if at >= 0:
                value = tail[at + len(b"content-length:") :]
                try:
                    length = int(value.strip())
                except ValueError:
                    logger.warning("ignoring bad Content-Length header %r", line[:80])
                    continue
                if 0 <= length <= MAX_BODY:
                    content_length = length
        try:
            body = await reader.readexactly(content_length)
        except asyncio.IncompleteReadError:
            return
        try:
            message = decode_json(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than Python's stack ([[[[...]]]]).
            on_bad_message(-32700, f"Parse error: {exc}", None)
            continue
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            msg_id = message.get("id") if isinstance(message, dict) else None
            on_bad_message(-32600, "Invalid Request: not a JSON-RPC 2.0 object", msg_id)
            continue
        msg_id = message.get("id")
        if msg_id is None and "id" in message and "method" in message:
            # JSON-RPC 2.0: a request's id is a string or a number; "id": null is neither
            # a request we could answer by id nor a notification (which has no id at all).
            on_bad_message(-32600, "Invalid Request: id must be a string or a number, not null", None)
            continue
        if msg_id is not None and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int, float))):
            on_bad_message(-32600, "Invalid Request: id must be a string or a number", None)
            continue
        if "method" in message and not isinstance(message["method"], str):
            on_bad_message(-32600, "Invalid Request: method must be a string", msg_id)
            continue
        try:
            on_message(message)
        except Exception:  # never let one message end the loop
            logger.exception("failed to handle a message")
