"""The dsh server: JSON-RPC 2.0 over LSP framing, with LSP's lifecycle, on any stream pair.

Our own small core, not pygls: importing pygls (any of it: ``pygls.exceptions`` already)
imports ``lsprotocol.types``, 50-70% of what ``dshd serve`` took to answer
``initialize``, and the daemon overrode most of what pygls does for it anyway (raw
``dsh/*`` params, framing, encoding, error answers, exit code). What it does:

- requests run as tasks in arrival order (handlers.py relies on it); a client's
  ``$/cancelRequest`` cancels the task, answered -32800; a reply arriving after we stopped
  waiting for it is dropped (a person answering a plan review late);
- LSP's lifecycle: ``initialize`` first (else -32002), once (a second is -32600),
  ``shutdown`` cancels what is still running and refuses later requests (-32600), ``exit``
  ends the connection; exit code 1 unless ``exit`` came after ``shutdown``;
- a request naming a method it does not serve is -32601, also an LSP notification's
  method sent with an id; unknown notifications are ignored;
- errors are answers: a :class:`DshRpcError` as it is; any other exception -32603
  without its traceback (that goes to the daemon's log);
- everything written is one ``Content-Length`` frame per message, encoded by msgspec.

:func:`serve_connection` serves one connection over any (reader, writer) pair: stdio for
``dshd serve``, a Unix socket connection for the shared daemon.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import functools
import gc
import inspect
import json
import logging
import re
import threading
import uuid
from typing import Any, Callable, Literal

import msgspec

from dshd import __version__
from dshd.daemon import transport
from dshd.daemon.rpc_errors import DshRpcError
from dshd.formats import shown, shown_lines
from dshd.models import errors
from dshd.services.acting import acting
from dshd.transport import stdio

logger = logging.getLogger("dshd.daemon")

ALREADY_INITIALIZED = "Invalid Request: already initialized (initialize was already answered)"
NOT_INITIALIZED = "the daemon is not initialized: send initialize first"
SERVER_NOT_INITIALIZED, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32002, -32600, -32601, -32602
INTERNAL_ERROR, REQUEST_CANCELLED = -32603, -32800

# What initialize answers besides the dsh capability: what pygls used to compute for a
# server with no LSP feature (kept byte for byte; the editors' clients read it).
POSITION_ENCODINGS = ("utf-8", "utf-16", "utf-32")
WORKSPACE_CAPABILITIES = {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}}
DSH_CAPABILITIES = {"version": 1, "questions": True, "permissions": True}

_encode = msgspec.json.Encoder().encode


# ---- initialize's params: what the daemon reads of them, strictly -----------------------


class ClientInfo(msgspec.Struct):
    name: str
    version: str | None = None


class WorkspaceFolder(msgspec.Struct):
    uri: str
    name: str


class GeneralClientCapabilities(msgspec.Struct, rename="camel"):
    position_encodings: list[Any] | None = None


class ClientCapabilities(msgspec.Struct):
    general: GeneralClientCapabilities | None = None
    experimental: Any = None


class InitializeParams(msgspec.Struct, rename="camel"):
    """LSP's InitializeParams, the fields the daemon reads (others are allowed: LSP grows)."""

    capabilities: ClientCapabilities
    process_id: int | None = None
    root_uri: str | None = None
    root_path: str | None = None
    workspace_folders: list[WorkspaceFolder] | None = None
    initialization_options: Any = None
    client_info: ClientInfo | None = None
    trace: Literal["off", "messages", "verbose"] | None = None
    locale: str | None = None


_AT_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`")


def invalid_params(field: str, message: str) -> DshRpcError:
    """-32602 naming the field (``data.kind`` invalid-params, as every bad param is)."""
    return DshRpcError(INVALID_PARAMS, message, {"kind": "invalid-params", "field": field})


def parse_initialize(params: Any) -> InitializeParams:
    """``initialize``'s params, or -32602 naming the first wrong field."""
    try:
        return msgspec.convert(params, InitializeParams)
    except msgspec.ValidationError as exc:
        text = str(exc)
        at = _AT_PATH.search(text)
        path = at.group("path") if at else ""
        missing = _MISSING.match(text)
        if missing:
            path = f"{path}.{missing.group('name')}" if path else missing.group("name")
        raise invalid_params(path or "params", f"Invalid params: {text}") from None


def position_encoding(capabilities: ClientCapabilities) -> str:
    """The first encoding the client offers that LSP defines, else LSP's default utf-16."""
    offered = capabilities.general.position_encodings if capabilities.general is not None else None
    for encoding in offered or ():
        if encoding in POSITION_ENCODINGS:
            return encoding
    return "utf-16"


@functools.cache
def _lsp_notifications() -> frozenset[str]:
    """LSP's notification methods. Imported only when a request names a method the daemon
    does not serve: lsprotocol.types takes 0.3-0.6 s to import, never on the way to
    ``initialize``."""
    from lsprotocol import types

    return frozenset(
        method
        for method, entry in types.METHOD_TO_TYPES.items()
        if entry[1] is None and entry[0].__name__.endswith("Notification")
    )


def _is_lsp_notification(method: str) -> bool:
    return method in ("exit", "initialized", "$/cancelRequest", "$/setTrace", "$/progress", "$/logTrace") or (
        not method.startswith("dsh/") and method in _lsp_notifications()
    )


# ---- encoding ---------------------------------------------------------------------------

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


def _as_json(value: Any) -> Any:
    """``json.dumps``'s hook for what is not JSON yet: an attrs wire type in its camelCase
    form, an enum's value, a msgspec struct's fields, else an object's attributes."""
    if hasattr(type(value), "__attrs_attrs__"):
        from dshd_protocol import to_wire

        return to_wire(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    if hasattr(value, "__dict__"):
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not JSON")


def _dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...`` through dicts only; None where a step is missing."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


class ClientError(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, error: Any) -> None:
        self.error = error
        code = _dig(error, "code")
        message = _dig(error, "message")
        super().__init__(f"{message if isinstance(message, str) else 'error'} ({code})")
        self.code = code


# ---- the connection's wire ----------------------------------------------------------------


# The notifications whose text an editor shows a person as it is, and how it is escaped.
_SHOWN_TO_PEOPLE: dict[str, Callable[[str], str]] = {"window/showMessage": shown, "window/logMessage": shown_lines}


class DshProtocol:
    """What one connection writes, and the requests the daemon sent it that wait for a
    reply (``send_request_async``; ``_request_futures`` by id)."""

    def __init__(self, server: "DshServer") -> None:
        self._server = server
        self.writer: Any = None
        self._request_futures: dict[Any, asyncio.Future] = {}
        self.shut_down = False  # shutdown was answered: only exit counts now
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def set_writer(self, writer: Any) -> None:
        self.writer = writer
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test writing to a buffer): every write is direct
            self._loop = None
        self._loop_thread = threading.get_ident() if self._loop is not None else None

    def send_notification(self, method: str, params: Any) -> None:
        """A notification of plain JSON values (and msgspec structs), encoded by msgspec:
        the daemon's own news, a live delta per token among them. An attrs value must be
        made wire JSON first: msgspec would write its snake_case field names."""
        if self.writer is None:
            return
        if method in _SHOWN_TO_PEOPLE and isinstance(params, dict) and isinstance(params.get("message"), str):
            # What an editor shows as it is (a popup, its output panel): escaped here, on the
            # way out, whoever made it (api/escape.py). A log line keeps its traceback's lines.
            params = {**params, "message": _SHOWN_TO_PEOPLE[method](params["message"])}
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        try:
            body = _encode(message)
        except (UnicodeEncodeError, TypeError, msgspec.EncodeError):
            # A lone surrogate (a provider that split a character's \ud83d\ude00 escape
            # across two chunks: json.dumps writes it as an escape, msgspec refuses it),
            # or a value msgspec does not know: the general path.
            self._send_data(message, plain=False)
            return
        self._write_frame(body)

    notify = send_notification

    def send_request_async(self, method: str, params: Any = None, msg_id: Any = None) -> asyncio.Future:
        """Ask the client; the future gets its result, or ClientError for an error reply."""
        if msg_id is None:
            msg_id = str(uuid.uuid4())
        future = asyncio.get_running_loop().create_future()
        self._request_futures[msg_id] = future
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return future

    def cancel_client_request(self, msg_id: Any) -> None:
        """Withdraw a request we sent (``$/cancelRequest``) and forget its future."""
        self._request_futures.pop(msg_id, None)
        self.send_notification("$/cancelRequest", {"id": msg_id})

    def handle_response(self, message: dict[str, Any]) -> None:
        future = self._request_futures.pop(message["id"], None)
        if future is None:
            logger.debug("a reply to %r, which the daemon did not ask (or no longer waits for)", message["id"])
            return
        if future.done():  # we stopped waiting (timeout, withdrawn): a late reply
            logger.info("late reply to %s ignored (the daemon stopped waiting)", message["id"])
            return
        if "error" in message:
            future.set_exception(ClientError(message["error"]))
        else:
            future.set_result(message.get("result"))

    def fail_requests(self, why: Exception | None = None) -> None:
        """Every request we sent that still waits: cancelled (shutdown), or failed with
        ``why`` (the connection is gone)."""
        futures, self._request_futures = self._request_futures, {}
        for future in futures.values():
            if future.done():
                continue
            if why is None:
                future.cancel()
            else:
                future.set_exception(why)

    def send_response(self, msg_id: Any, result: Any = None) -> None:
        if type(result) is dict and _plain_json(result) or type(result) in _PLAIN:
            # Plain JSON (every dsh/* result): msgspec encodes it directly (a list of
            # 1,000 sessions: ~1 ms). Anything else takes json.dumps with the hook.
            try:
                body = _encode({"jsonrpc": "2.0", "id": msg_id, "result": result})
            except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
                pass  # a lone surrogate: the general path writes it as an escape
            else:
                self._write_frame(body)
                return
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "result": result}, plain=False)

    def send_error(self, msg_id: Any, error: dict[str, Any]) -> None:
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _send_data(self, data: dict[str, Any], *, plain: bool = True) -> None:
        """``plain``: JSON values only, msgspec first; else (or when msgspec refuses)
        json.dumps with the hook (an attrs value in its wire form, not its field names)."""
        if self.writer is None:
            return
        try:
            if not plain:
                raise TypeError("not plain JSON")
            body = _encode(data)
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
            try:
                body = json.dumps(data, default=_as_json, separators=(",", ":")).encode()
            except Exception:
                logger.exception("failed to send a message")
                msg_id = data.get("id")
                if msg_id is None or "method" in data:
                    return
                # A result that does not serialize is our bug: still answer the request.
                error = {"code": INTERNAL_ERROR, "message": "internal error: unserializable result"}
                body = _encode({"jsonrpc": "2.0", "id": msg_id, "error": error})
        self._write_frame(body)

    def _write_frame(self, body: bytes) -> None:
        if self._loop_thread is not None and threading.get_ident() != self._loop_thread:
            # A record logged in a worker thread (the client log handler): an asyncio
            # transport may be written from its own loop only; the frame goes there.
            try:
                self._loop.call_soon_threadsafe(self._write_frame, body)
            except RuntimeError:
                pass  # the loop has closed: the connection with it
            return
        if self.writer is None:
            return
        try:
            self.writer.write(transport.encode_frame(body))
        except (BrokenPipeError, ConnectionResetError):
            logger.error("the client closed the connection")
            self.writer = None
            self._server.connection_lost()


# ---- the server: dispatch and LSP's lifecycle ---------------------------------------------

Handler = Callable[[Any], Any]


class DshServer:
    """One connection's JSON-RPC server. Handlers are registered with :meth:`feature`:
    ``initialize`` (sync, gets :class:`InitializeParams`, may raise DshRpcError),
    ``initialized`` (sync), and request methods (coroutine functions of the raw params,
    answered with their result)."""

    name = "dshd"

    def __init__(self) -> None:
        self.protocol = DshProtocol(self)
        self.initialized = False
        self.shutdown_requested = False
        self.exit_requested = False
        self._features: dict[str, Handler] = {}
        self._handling: dict[Any, asyncio.Task] = {}  # the client's requests being answered
        self._done: asyncio.Event | None = None

    def feature(self, method: str) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self._features[method] = fn
            return fn

        return register

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

    # ---- reading ---------------------------------------------------------------------

    def _on_message(self, message: dict[str, Any]) -> None:
        """One decoded JSON-RPC object (transport.read_messages checked its envelope)."""
        method = message.get("method")
        if method is None:
            if "id" in message and not self.protocol.shut_down:
                self.protocol.handle_response(message)
            return
        params = message.get("params")
        if method == "initialize":
            # Before anything logs the params: a key pasted as apiKeyEnv is scrubbed from then on.
            errors.remember_pasted_key(_dig(params, "initializationOptions", "config", "model", "apiKeyEnv"))
        if method == "exit":
            self.exit_requested = True
            self.connection_lost()
            return
        if "id" in message:
            self._on_request(message["id"], method, params)
        elif not self.protocol.shut_down:
            self._on_notification(method, params)

    def _on_request(self, msg_id: Any, method: str, params: Any) -> None:
        if self.initialized and method == "initialize":
            # Before its params are read: whatever they hold, a second initialize would
            # replace the workspace under its live agents.
            self._on_bad_message(INVALID_REQUEST, ALREADY_INITIALIZED, msg_id)
            return
        if self.shutdown_requested:
            self._on_bad_message(INVALID_REQUEST, "Invalid Request: the daemon is shutting down", msg_id)
            return
        if not self.initialized and method != "initialize":
            # LSP: every request before initialize (shutdown too) is ServerNotInitialized.
            self._on_bad_message(SERVER_NOT_INITIALIZED, NOT_INITIALIZED, msg_id)
            return
        if method == "initialize":
            self._initialize(msg_id, params)
            return
        if method == "shutdown":
            self.shutdown_requested = True
            # Earlier requests run as tasks that may not have started yet (that keeps
            # arrival order, handlers.py); shutdown cancels what still runs, so let them
            # take their first step first.
            asyncio.get_running_loop().call_soon(self._shut_down, msg_id)
            return
        handler = self._features.get(method)
        if handler is None or method == "initialized":
            if _is_lsp_notification(method):
                # A notification's method with an id: whatever its params hold, no request.
                self._on_bad_message(METHOD_NOT_FOUND, f"Method Not Found: {method} is a notification, not a request", msg_id)
            else:
                self._on_bad_message(METHOD_NOT_FOUND, f"Method Not Found: {method}", msg_id)
            return
        # A task per request, also for a synchronous handler: tasks run in the order they
        # were created, so requests take effect in the order they arrived.
        # The request runs as this client's act: what it writes to a log names the client.
        context = contextvars.copy_context()
        context.run(acting.set, getattr(self, "client_name", None))
        coro = handler(params) if inspect.iscoroutinefunction(handler) else _call(handler, params)
        task = asyncio.get_running_loop().create_task(coro, context=context)
        self._handling[msg_id] = task
        task.add_done_callback(functools.partial(self._answer, msg_id))

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "$/cancelRequest":
            msg_id = _dig(params, "id")
            if isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool):
                task = self._handling.pop(msg_id, None)
                if task is not None:
                    task.cancel()  # answered -32800 by _answer, unless it finishes anyway
            else:
                logger.warning("dropping a $/cancelRequest without a usable id")
            return
        if not self.initialized:
            return  # LSP: notifications before initialize are dropped
        handler = self._features.get(method) if method == "initialized" else None
        if handler is None:
            logger.debug("ignoring the notification %s", method)
            return
        try:
            handler(params)
        except Exception:
            logger.exception("the %s notification failed", method)

    def _on_bad_message(self, code: int, text: str, msg_id: Any) -> None:
        logger.warning("bad message: %s", text)
        if msg_id is None or isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool):
            self.protocol.send_error(msg_id, {"code": code, "message": text})

    # ---- answering -------------------------------------------------------------------

    def _answer(self, msg_id: Any, task: asyncio.Task) -> None:
        if self._handling.get(msg_id) is task:
            del self._handling[msg_id]
        if task.cancelled():
            self.protocol.send_error(msg_id, {"code": REQUEST_CANCELLED, "message": f'Request with id "{msg_id}" is canceled'})
            return
        exc = task.exception()
        if exc is None:
            self.protocol.send_response(msg_id, task.result())
        else:
            self.protocol.send_error(msg_id, self._error_answer(msg_id, exc))

    @staticmethod
    def _error_answer(msg_id: Any, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, DshRpcError):
            return exc.to_response_error()
        logger.error("request %r failed", msg_id, exc_info=exc)
        return {"code": INTERNAL_ERROR, "message": f"internal error ({type(exc).__name__}): see the daemon's log"}

    def _initialize(self, msg_id: Any, params: Any) -> None:
        try:
            parsed = parse_initialize(params)
            handler = self._features.get("initialize")
            if handler is not None:
                handler(parsed)
        except Exception as exc:
            self.protocol.send_error(msg_id, self._error_answer(msg_id, exc))
            return
        finally:
            _end_of_start_up()
        self.initialized = True  # only a successful initialize counts
        capabilities = {
            "positionEncoding": position_encoding(parsed.capabilities),
            # dshd is not a language server: no document sync, no commands; only dsh/*.
            "workspace": WORKSPACE_CAPABILITIES,
            "experimental": {"dsh": DSH_CAPABILITIES},
        }
        self.protocol.send_response(msg_id, {"capabilities": capabilities, "serverInfo": {"name": self.name, "version": __version__}})

    def _shut_down(self, msg_id: Any) -> None:
        """LSP shutdown: what still runs is cancelled (each answered -32800), our own
        requests to the client withdrawn, later requests refused; then the answer."""
        for task in list(self._handling.values()):
            task.cancel()
        self.protocol.fail_requests()
        self.protocol.shut_down = True
        self.protocol.send_response(msg_id, None)

def _end_of_start_up() -> None:
    """`dshd serve` loads its modules with cyclic collection off (cli.py): what start-up
    made lives as long as the process, so it is frozen out of every later collection
    (each full one would walk it again) and collection is turned back on. A no-op when
    collection is on (the shared daemon, tests)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


async def _call(handler: Handler, params: Any) -> Any:
    return handler(params)


async def serve_connection(server: DshServer, reader: asyncio.StreamReader, writer: Any) -> None:
    """Serve one connection: LSP-framed JSON-RPC read from ``reader``, answers and
    notifications written to ``writer`` (stdio today, a Unix socket connection of the
    shared daemon). ``writer`` is an :class:`asyncio.StreamWriter` or anything with
    ``write(bytes)`` and ``close()`` (:class:`transport.StdoutWriter`). Returns on
    ``exit``, end of input, or a lost peer, after ``server.on_stop()``; the LSP exit code
    is then ``server.exit_code``. One server object serves one connection."""
    server._done = asyncio.Event()
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
        try:
            await server.on_stop()
        finally:
            # Nothing more goes out. Requests still running are not cancelled (a turn this
            # connection started may be watched by others on the shared daemon): their
            # answers have nobody to read them and are dropped. Our asks fail closed.
            server.protocol.writer = None
            server.protocol.fail_requests(RuntimeError("the connection ended"))
            writer.close()


def run_stdio(server: DshServer) -> int:
    """Serve stdio until ``exit`` or EOF; return the LSP exit code."""
    stdin, stdout = stdio.stdio_streams()
    try:
        asyncio.run(server.serve_stdio(stdin, stdout))
    except KeyboardInterrupt:
        pass
    return server.exit_code
