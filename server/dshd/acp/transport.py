"""ACP's framing over stdio: one JSON-RPC message per line (UTF-8, ``\\n``-terminated).

A message transport for the SDK's ``Connection`` (``send`` / ``receive`` / ``close``).
Bad lines never stop the loop and never go unanswered where JSON-RPC says to answer:

- not JSON (NaN, Infinity and 1e999 included), or a line over ``MAX_LINE`` bytes:
  -32700 Parse error, ``id: null``;
- a JSON array (ACP has no batches), a non-object, no ``"jsonrpc": "2.0"``, an id that
  is not a string or an integer (a request's ``"id": null`` too), a method that is not a string, an object that is
  neither a request, a notification nor a response: -32600 Invalid Request (with the
  id when it is usable).

Writes are synchronous (one ``write`` + ``flush`` per message), so notifications reach
the client in the order the code produced them, and before the answer that follows
them. Reads yield once per message, so messages take effect in the order they came.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, BinaryIO

from dshd.transport.stdio import MAX_MESSAGE, decode_json

log = logging.getLogger("dshd.acp")

MAX_LINE = MAX_MESSAGE


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def problem(message: Any) -> tuple[int, str, Any] | None:
    """Why a decoded line is not a JSON-RPC 2.0 message we can dispatch:
    ``(code, text, id to answer with)``; None when it is fine."""
    if isinstance(message, list):
        return -32600, "Invalid Request: batches are not supported", None
    if not isinstance(message, dict):
        return -32600, "Invalid Request: a message is a JSON object", None
    msg_id = message.get("id")
    answer_id = msg_id if _usable_id(msg_id) else None
    if message.get("jsonrpc") != "2.0":
        return -32600, 'Invalid Request: "jsonrpc" must be "2.0"', answer_id
    if "id" in message and msg_id is not None and not _usable_id(msg_id):
        return -32600, "Invalid Request: id must be a string or an integer", None
    if "method" in message:
        if "id" in message and msg_id is None:  # a request with "id": null: neither a request nor a notification
            return -32600, "Invalid Request: id must be a string or an integer, not null", None
        if not isinstance(message["method"], str):
            return -32600, "Invalid Request: method must be a string", answer_id
        if "params" in message and not isinstance(message["params"], (dict, list)):
            return -32600, "Invalid Request: params must be an object", answer_id
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return -32600, "Invalid Request: not a request, a notification or a response", answer_id
    return None


class LineTransport:
    def __init__(self, reader: asyncio.StreamReader, out: BinaryIO) -> None:
        self._reader = reader
        self._out = out
        self._broken = False

    # ---- Transport ---------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        self.write(message)

    async def receive(self) -> dict[str, Any] | None:
        # The SDK runs each request and notification as a task. Let the task made for the
        # previous message start before the next message is read: messages then take
        # effect in arrival order (a session/cancel followed at once by the answer to a
        # permission request cancels the turn before the answer is seen).
        await asyncio.sleep(0)
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = decode_json(line)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                self._answer(-32700, f"Parse error: {exc}", None)
                continue
            trouble = problem(message)
            if trouble is not None:
                self._answer(*trouble)
                continue
            return message

    async def close(self) -> None:
        try:
            self._out.flush()
        except (OSError, ValueError):
            pass

    # ---- writing -----------------------------------------------------------------------

    def write(self, message: dict[str, Any]) -> None:
        if self._broken:
            return
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode() + b"\n"
        try:
            self._out.write(data)
            self._out.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            self._broken = True
            log.warning("the client closed its end of stdout")

    def _answer(self, code: int, text: str, msg_id: Any) -> None:
        log.warning("bad message: %s", text)
        self.write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})

    # ---- reading -----------------------------------------------------------------------

    async def _read_line(self) -> bytes | None:
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None  # a last line without its newline still counts
        except asyncio.LimitOverrunError:
            # Drop the rest of the over-long line, then answer it.
            while True:
                try:
                    await self._reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as exc:
                    await self._reader.readexactly(exc.consumed)
                except asyncio.IncompleteReadError:
                    break
            self._answer(-32700, f"Parse error: a line longer than {MAX_LINE} bytes", None)
            return b""
