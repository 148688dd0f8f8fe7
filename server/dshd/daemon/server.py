"""The dshd language server: pygls 2 for the LSP lifecycle and request bookkeeping,
our own stdio framing (transport.py) and our own strict params handling (handlers.py).

Why the overrides below exist (each one is a pygls 2.1.1 behaviour, see NOTES.md):
- ``structure_message``: pygls turns untyped params into namedtuples (a new class per
  message) and drops typed requests whose params fail to structure without answering.
  We keep ``dsh/*`` params (and those of methods LSP does not define) as the raw JSON
  value and validate them in the handler.
- ``_handle_response``: a reply that arrives after we stopped waiting (a person answering
  a plan review late) raises InvalidStateError inside pygls (pygls issue #621).
- ``_send_handler_result``: domain errors are answers, not server faults: no traceback
  logged, no ``window/showMessage``.
- exit code: pygls always exits 0; LSP says 1 when ``exit`` came without ``shutdown``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from concurrent.futures import Future
from typing import Any

import msgspec

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)

from dshd import __version__
from dshd.transport import stdio
from dshd.daemon import transport
from dshd.daemon.rpc_errors import DshRpcError
from dshd.models import errors

logger = logging.getLogger("dshd.daemon")

DSH_PREFIX = "dsh/"
ALREADY_INITIALIZED = "Invalid Request: already initialized (initialize was already answered)"

_encode = msgspec.json.Encoder().encode


def _dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...`` through dicts only; None where a step is missing."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _is_lsp_notification(method: str) -> bool:
    entry = types.METHOD_TO_TYPES.get(method)
    return entry is not None and entry[1] is None and entry[0].__name__.endswith("Notification")


_PLAIN = (str, int, float, bool, type(None))


def _plain_json(value: Any) -> bool:
    """Only dicts with str keys, lists and JSON scalars (no attrs or msgspec values,
    which msgspec would write with their Python field names)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                if type(inner) not in _PLAIN:
                    stack.append(inner)
        elif kind is list:
            stack.extend(inner for inner in item if type(inner) not in _PLAIN)
        elif kind not in _PLAIN:
            return False
    return True


class DshProtocol(LanguageServerProtocol):
    _server: "DshServer"

    def structure_message(self, data: dict[str, Any]):
        method = data.get("method")
        # dsh/* and methods LSP does not define: raw params (pygls's fallback type for an
        # unknown method needs a ``params`` member and answers -32603 without one).
        if isinstance(method, str) and (method.startswith(DSH_PREFIX) or self.get_message_type(method) is None):
            if "id" in data:
                return JsonRPCRequestMessage(
                    id=data["id"], method=method, jsonrpc=data["jsonrpc"], params=data.get("params")
                )
            return JsonRPCNotification(method=method, jsonrpc=data["jsonrpc"], params=data.get("params"))
        if method is None and "id" in data and "error" not in data:
            # Replies to our own requests (dsh/questions/ask) stay raw: validated by the asker.
            if self._result_types.get(data["id"], None) is None:
                self._result_types.pop(data["id"], None)
                return JsonRPCResponseMessage(id=data["id"], jsonrpc=data["jsonrpc"], result=data.get("result"))
        return super().structure_message(data)

    def _handle_response(self, msg_id, result=None, error=None):
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            logger.info("late reply to %s ignored (the daemon stopped waiting)", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _send_handler_result(self, future: Future, *, msg_id):
        if not future.cancelled() and isinstance(future.exception(), DshRpcError):
            self._request_futures.pop(msg_id, None)
            exc = future.exception()
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def send_notification(self, method: str, params: dict[str, Any]) -> None:
        """A notification of plain JSON values (and msgspec structs), encoded by msgspec:
        the daemon's own news, a live delta per token among them. (pygls's ``notify()``
        builds and unstructures an attrs envelope per message; ``json.dumps`` alone costs
        several times msgspec's encode.) An attrs value must be made wire JSON first
        (``to_wire``): msgspec would write its snake_case field names."""
        if self.writer is None:
            return
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        try:
            body = _encode(message)
        except (UnicodeEncodeError, TypeError):
            # A lone surrogate (a provider that split a character's \ud83d\ude00 escape
            # across two chunks: json.dumps writes it as an escape, msgspec refuses it),
            # or a value only pygls's hook knows: the general path.
            self._send_data(message)
            return
        self._write_frame(body)

    def _write_frame(self, body: bytes) -> None:
        try:
            self.writer.write(transport.encode_frame(body))
        except BrokenPipeError:
            logger.error("the client closed the connection")
            self._server.connection_lost()

    def _send_data(self, data: Any):
        # json.dumps with pygls' default hook, but framed in one write and never logged
        # at INFO (per-message logging halves throughput, NOTES.md).
        if not data or self.writer is None:
            return
        if type(data) is JsonRPCResponseMessage and type(data.result) is dict and _plain_json(data.result):
            # A dsh/* result of plain JSON values: msgspec encodes it directly (a list of
            # 1,000 sessions: ~1 ms, against ~10-20 ms through the converter's unstructure).
            # Anything else (an LSP result's attrs class) takes the converter's path.
            try:
                body = _encode({"jsonrpc": data.jsonrpc, "id": data.id, "result": data.result})
            except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
                pass  # a lone surrogate: the general path writes it as an escape
            else:
                self._write_frame(body)
                return
        try:
            body = json.dumps(data, default=self._serialize_message, separators=(",", ":")).encode()
            self._write_frame(body)
        except Exception:
            logger.exception("failed to send a message")
            msg_id = getattr(data, "id", None)
            if msg_id is not None and getattr(data, "method", None) is None:
                # A result that does not serialize is our bug: still answer the request.
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32603, "message": "internal error: unserializable result"}}
                ).encode()
                self.writer.write(transport.encode_frame(body))

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        result = yield from super().lsp_initialize(params)
        # dshd is not a language server: no document sync, no commands; only dsh/*.
        caps = result.capabilities
        caps.text_document_sync = None
        caps.execute_command_provider = None
        caps.experimental = {"dsh": {"version": 1, "questions": True, "permissions": True}}
        self._server.initialized = True  # only a successful initialize counts
        return result

    def cancel_client_request(self, msg_id) -> None:
        """Withdraw a request we sent (``$/cancelRequest``) and forget its future."""
        self._request_futures.pop(msg_id, None)
        self._result_types.pop(msg_id, None)
        self.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))


class DshServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("dshd", __version__, protocol_cls=DshProtocol)
        self.initialized = False
        self.shutdown_requested = False
        self.exit_requested = False
        self._done: asyncio.Event | None = None

    # pygls reports errors outside requests with window/showMessage; keep them in logs.
    def report_server_error(self, error: Exception, source) -> None:
        logger.error("server error (%s): %s", getattr(source, "__name__", source), error)

    @property
    def exit_code(self) -> int:
        """LSP's rule: 0 only when ``exit`` came after ``shutdown``."""
        return 0 if self.shutdown_requested and self.exit_requested else 1

    def connection_lost(self) -> None:
        if self._done is not None:
            self._done.set()

    async def serve_stdio(self, stdin, stdout) -> None:
        reader = await stdio.open_stdin_reader(stdin)
        await serve_connection(self, reader, transport.StdoutWriter(stdout))

    async def on_stop(self) -> None:
        """Hook for subclasses: close sessions (writes checkpoints, releases locks)."""

    def _on_message(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == types.INITIALIZE:
            # pygls logs the params (at INFO): a key pasted as apiKeyEnv is scrubbed from then on.
            errors.remember_pasted_key(_dig(message, "params", "initializationOptions", "config", "model", "apiKeyEnv"))
        if self.initialized and method == types.INITIALIZE and "id" in message:
            # Before its params are read: whatever they hold (odd ones fail to structure
            # and would be -32602), a second initialize would replace the workspace under
            # its live agents.
            self._on_bad_message(-32600, ALREADY_INITIALIZED, message["id"])
            return
        if (
            self.initialized
            and "id" in message
            and isinstance(method, str)
            and method != types.EXIT
            and _is_lsp_notification(method)
        ):
            # A notification's method with an id ($/cancelRequest, textDocument/didOpen),
            # answered before its params are read: whatever they hold, it is no request
            # (pygls would handle it as the notification and leave the request unanswered).
            self._on_bad_message(-32601, f"Method Not Found: {method} is a notification, not a request", message["id"])
            return
        try:
            structured = self.protocol.structure_message(message)
        except JsonRpcException as exc:
            if "id" in message and "method" in message:
                self.protocol._send_response(message["id"], error=exc.to_response_error())
            else:
                logger.warning("dropping a message that does not structure: %s", exc)
            return
        if structured.__class__ is dict:
            self._on_bad_message(-32600, "Invalid Request", message.get("id"))
            return
        method = getattr(structured, "method", None)
        if "id" in message and isinstance(method, str):
            # pygls would drop a request after shutdown unanswered (the client hangs).
            if self.shutdown_requested and method != types.EXIT:
                self._on_bad_message(-32600, "Invalid Request: the daemon is shutting down", message["id"])
                return
            if not self.initialized and method not in (types.INITIALIZE, types.EXIT):
                # LSP: every request before initialize (shutdown too) is ServerNotInitialized.
                self._on_bad_message(-32002, "the daemon is not initialized: send initialize first", message["id"])
                return
        if getattr(structured, "method", None) == types.EXIT:
            self.exit_requested = True
            self.connection_lost()
            return
        if method == types.SHUTDOWN:
            self.shutdown_requested = True
            # Earlier dsh/* requests run as tasks that may not have started yet (that keeps
            # arrival order, handlers.py); pygls's shutdown cancels every pending request,
            # so let them take effect first.
            asyncio.get_running_loop().call_soon(self.protocol.handle_message, structured)
            return
        self.protocol.handle_message(structured)

    def _on_bad_message(self, code: int, text: str, msg_id: Any) -> None:
        logger.warning("bad message: %s", text)
        if msg_id is None or isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool):
            self.protocol._send_data(
                {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}}
            )


async def serve_connection(server: DshServer, reader: asyncio.StreamReader, writer: Any) -> None:
    """Serve one connection: LSP-framed JSON-RPC read from ``reader``, answers and
    notifications written to ``writer`` (stdio today, a Unix socket connection of the
    shared daemon). ``writer`` is an :class:`asyncio.StreamWriter` or anything with
    ``write(bytes)`` and ``close()`` (:class:`transport.StdoutWriter`). Returns on
    ``exit``, end of input, or a lost peer, after ``server.on_stop()``; the LSP exit code
    is then ``server.exit_code``. One server object serves one connection."""
    server._done = asyncio.Event()
    server._stop_event = threading.Event()
    if isinstance(writer, asyncio.StreamWriter):
        writer = transport.StreamFrameWriter(writer)
    server.protocol.set_writer(writer)
    read_task = asyncio.ensure_future(transport.read_messages(reader, server._on_message, server._on_bad_message))
    done_task = asyncio.ensure_future(server._done.wait())
    try:
        await asyncio.wait({read_task, done_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (read_task, done_task):
            task.cancel()
        await server.on_stop()
        writer.close()


def run_stdio(server: DshServer) -> int:
    """Serve stdio until ``exit`` or EOF; return the LSP exit code."""
    stdin, stdout = stdio.stdio_streams()
    try:
        asyncio.run(server.serve_stdio(stdin, stdout))
    except KeyboardInterrupt:
        pass
    return server.exit_code
