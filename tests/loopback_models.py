"""Loopback model servers for tests and benches: real HTTP on 127.0.0.1 speaking the
OpenAI Chat Completions and Anthropic Messages streaming formats, scripted per test.

These are real peers, not mocks: the official SDKs talk to them over TCP exactly as they
talk to the providers, and the daemon under test cannot tell the difference. The chunk
shapes follow the providers' documented streams (and, for OpenAI-compatible servers, the
differences between OpenAI, vLLM, llama.cpp's server and ollama: see :class:`Dialect`).

API::

    with LoopbackModelServer("openai") as server:          # or "anthropic"
        server.script(
            Reply(text="Let me look.", tool_calls=[Call("read_file", {"path": "a.py"})]),
            Failure(429, headers={"retry-after": "0"}),       # JSON body in the provider's shape
            Reply(text="done", chunk_delay=0.05),            # a slow stream
            Reply(text="hi", usage=(900, 5), cached=800),     # usage as the real API reports it
            Reply(usage=None),                               # a server that reports no usage
            Reply(tool_calls=[Call("write_file", {...})], cut_at_limit=True),  # "length" mid-call
            Cut(Reply(text="half of it"), after=3),          # connection dropped after 3 events
            Hang(),                                          # accepts, never answers
            Raw(["data: {not json\\n\\n"]),                   # arbitrary SSE bytes
        )
        server.base_url          # for [model] baseUrl
        server.requests          # every request received: Recorded(method, path, headers, body, size, json, ...)
        server.wait_requests(2)  # until two requests arrived
        server.wait_closed(0)    # until the client dropped request 0's connection; returns when (monotonic)

One response is used per request, in order; when the script is spent every request gets
``Reply(text="(loopback: nothing scripted)")``. The server runs its own event loop in a
thread, so a test's loop (and a synchronous bench) can use it alike.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Union

Provider = Literal["openai", "anthropic"]

# ---- what a test scripts ----------------------------------------------------------------


@dataclass
class Call:
    name: str
    arguments: Union[dict, str] = field(default_factory=dict)  # a str is sent verbatim (malformed cases)
    id: str | None = None  # default: call_<n> / toolu_<n>


@dataclass(frozen=True)
class Dialect:
    """How an OpenAI-compatible server shapes its chunks (ignored for Anthropic).

    ids: "first" - a tool call's id and name only on its first fragment (OpenAI, vLLM);
         "every" - on every fragment; "none" - never an id (some small servers).
    whole_arguments: each call in one chunk, arguments whole (ollama, llama.cpp).
    usage: "own-chunk" - a last chunk with no choices (OpenAI with include_usage);
           "with-finish" - in the chunk that carries finish_reason; "missing".
    empty_content: ``content: ""`` beside tool calls and on the finish chunk (vLLM, ollama)
                   instead of leaving it out.
    finish: the finish_reason to send; None - "tool_calls" when calls came, else "stop".
            ollama has sent "stop" with tool calls.
    cache_details: usage carries ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM,
                   llama.cpp's server; not ollama).
    """

    ids: Literal["first", "every", "none"] = "first"
    whole_arguments: bool = False
    usage: Literal["own-chunk", "with-finish", "missing"] = "own-chunk"
    empty_content: bool = False
    finish: str | None = None
    cache_details: bool = True


OPENAI = Dialect()
VLLM = Dialect(empty_content=True)
LLAMA_CPP = Dialect(whole_arguments=True, usage="with-finish", empty_content=True)
OLLAMA = Dialect(whole_arguments=True, usage="with-finish", empty_content=True, finish="stop", cache_details=False)
DIALECTS = {"openai": OPENAI, "vllm": VLLM, "llama.cpp": LLAMA_CPP, "ollama": OLLAMA}


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    # (input, output) tokens, input being the whole prompt; None: never reported (no usage
    # chunk; Anthropic: no usage object in message_start or message_delta).
    usage: tuple[int, int] | None = (12, 5)
    # Of the input: the part read from the prompt cache (OpenAI
    # prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens), and the
    # part written to it (Anthropic cache_creation_input_tokens; OpenAI does not say).
    cached: int = 0
    cache_write: int = 0
    dialect: Dialect = OPENAI
    piece: int = 8  # characters per text / arguments delta
    chunk_delay: float = 0.0  # seconds between events
    stop_reason: str | None = None  # Anthropic: default tool_use / end_turn
    # The reply stops at the output limit: finish_reason "length" (OpenAI), stop_reason
    # "max_tokens" (Anthropic); the last call's arguments are cut in the middle.
    cut_at_limit: bool = False


@dataclass
class Failure:
    status: int
    body: Any = "default"  # "default": the provider's JSON error shape; None: empty; str/bytes: verbatim
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "loopback failure"


@dataclass
class Cut:
    reply: Reply
    after: int = 2  # events sent before the connection is closed mid-body


@dataclass
class Hang:
    """Read the request, answer nothing until the client gives up."""


@dataclass
class Raw:
    events: list[str]  # SSE text sent as it is (each should end in a blank line)
    chunk_delay: float = 0.0


Response = Union[Reply, Failure, Cut, Hang, Raw]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()
    closed_at: float | None = None  # when the client dropped the connection before we finished
    finished: bool = False  # the whole response was sent

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


# ---- rendering the provider formats ----------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _arguments(reply: Reply, index: int, call: Call) -> str:
    text = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    if reply.cut_at_limit and index == len(reply.tool_calls) - 1:
        return text[: len(text) // 2]
    return text


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data) if not isinstance(data, str) else data}\n\n"


def openai_events(reply: Reply, model: str = "loopback", include_usage: bool = True) -> list[str]:
    d = reply.dialect
    base = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
            "service_tier": "default", "system_fingerprint": "fp_loopback"}  # fmt: skip
    # OpenAI with include_usage: every chunk but the last carries "usage": null.
    null_usage = d.usage == "own-chunk" and include_usage

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if usage is not None or null_usage:
            body["usage"] = usage
        return _sse(body)

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in _pieces(reply.text, reply.piece)]
    for index, call in enumerate(reply.tool_calls):
        call_id = call.id or f"call_{index}"
        arguments = _arguments(reply, index, call)
        head: dict[str, Any] = {"index": index, "type": "function"}
        if d.ids != "none":
            head["id"] = call_id
        extra = {"content": ""} if d.empty_content else {}
        if d.whole_arguments:
            out.append(chunk({**extra, "tool_calls": [{**head, "function": {"name": call.name, "arguments": arguments}}]}))
            continue
        out.append(chunk({**extra, "tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}))
        for piece in _pieces(arguments, reply.piece):
            fragment: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if d.ids == "every":
                fragment["id"] = call_id
            out.append(chunk({**extra, "tool_calls": [fragment]}))
    usage = None
    if reply.usage is not None:
        # As api.openai.com sends it: prompt_tokens is the whole prompt, the cached part inside it.
        usage = {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1], "total_tokens": sum(reply.usage)}
        if d.cache_details:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached, "audio_tokens": 0}
            usage["completion_tokens_details"] = {
                "reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
            }  # fmt: skip
    finish = "length" if reply.cut_at_limit else d.finish or ("tool_calls" if reply.tool_calls else "stop")
    out.append(chunk({"content": ""} if d.empty_content else {}, finish, usage if d.usage == "with-finish" else None))
    if d.usage == "own-chunk" and usage is not None and include_usage:
        out.append(_sse({**base, "choices": [], "usage": usage}))
    out.append("data: [DONE]\n\n")
    return out


def anthropic_events(reply: Reply, model: str = "loopback") -> list[str]:
    # As api.anthropic.com sends it: input_tokens is only the prompt after the cache's part;
    # cache reads and writes are counted beside it, and message_delta repeats the counts,
    # cumulative, with the output's.
    start_usage: dict[str, Any] | None = None
    end_usage: dict[str, Any] = {}
    if reply.usage is not None:
        prompt, output_tokens = reply.usage
        counts = {
            "input_tokens": prompt - reply.cached - reply.cache_write,
            "cache_creation_input_tokens": reply.cache_write,
            "cache_read_input_tokens": reply.cached,
        }
        start_usage = {
            **counts, "cache_creation": {"ephemeral_5m_input_tokens": reply.cache_write, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 1, "service_tier": "standard",
        }  # fmt: skip
        end_usage = {**counts, "output_tokens": output_tokens}
    message = {
        "id": "msg_loopback", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None,
    }  # fmt: skip
    if start_usage is not None:
        message["usage"] = start_usage
    out = [_sse({"type": "message_start", "message": message}, "message_start")]
    index = 0
    if reply.text:
        out.append(_sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        out.append(_sse({"type": "ping"}, "ping"))
        for piece in _pieces(reply.text, reply.piece):
            out.append(_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta"))
        out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        index = 1
    for n, call in enumerate(reply.tool_calls):
        block = {"type": "tool_use", "id": call.id or f"toolu_{n}", "name": call.name, "input": {}}
        out.append(_sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start"))
        arguments = _arguments(reply, n, call)
        for piece in [""] + _pieces(arguments, reply.piece):
            delta = {"type": "input_json_delta", "partial_json": piece}
            out.append(_sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"))
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    stop = "max_tokens" if reply.cut_at_limit else reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": end_usage}
    out.append(_sse(delta, "message_delta"))
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def error_body(provider: Provider, failure: Failure) -> bytes:
    if failure.body is None:
        return b""
    if isinstance(failure.body, bytes):
        return failure.body
    if isinstance(failure.body, str) and failure.body != "default":
        return failure.body.encode()
    if isinstance(failure.body, dict):
        return json.dumps(failure.body).encode()
    if provider == "anthropic":
        kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip
        kind = kinds.get(failure.status, "api_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": failure.message}}).encode()
    codes = {401: "invalid_api_key", 429: "rate_limit_exceeded", 404: "model_not_found"}
    error = {"message": failure.message, "type": "invalid_request_error", "param": None, "code": codes.get(failure.status)}
    return json.dumps({"error": error}).encode()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 408: "Request Timeout",
            413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 529: "Overloaded"}  # fmt: skip


# ---- the server ---------------------------------------------------------------------------------


class LoopbackModelServer:
    def __init__(self, provider: Provider, *, model: str = "loopback-model") -> None:
        if provider not in ("openai", "anthropic"):
            raise ValueError(provider)
        self.provider = provider
        self.model = model
        self.requests: list[Recorded] = []
        self._script: collections.deque[Response] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    # ---- control (from any thread) ----

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.provider == "openai" else root

    def script(self, *responses: Response) -> "LoopbackModelServer":
        self._script.extend(responses)
        return self

    def start(self) -> "LoopbackModelServer":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name=f"loopback-{self.provider}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the loopback server did not start")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shut() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shut(), loop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> "LoopbackModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_requests(self, count: int, timeout: float = 10) -> list[Recorded]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.requests)} requests arrived, not {count}")
            time.sleep(0.002)
        return self.requests

    def wait_closed(self, index: int, timeout: float = 10) -> float:
        """When the client dropped the connection of request ``index`` (monotonic)."""
        deadline = time.monotonic() + timeout
        while True:
            if index < len(self.requests) and self.requests[index].closed_at is not None:
                return self.requests[index].closed_at  # type: ignore[return-value]
            if time.monotonic() > deadline:
                raise TimeoutError(f"the connection of request {index} was not closed")
            time.sleep(0.001)

    async def await_closed(self, index: int, timeout: float = 10) -> float:
        """:meth:`wait_closed` for a test's event loop (without blocking it)."""
        deadline = time.monotonic() + timeout
        while not (index < len(self.requests) and self.requests[index].closed_at is not None):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the connection of request {index} was not closed")
            await asyncio.sleep(0.001)
        return self.requests[index].closed_at  # type: ignore[return-value]

    # ---- serving (in the server's thread) ----

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                recorded = await self._read_request(reader)
                if recorded is None:
                    return
                self.requests.append(recorded)
                response = self._script.popleft() if self._script else Reply(text="(loopback: nothing scripted)")
                if not await self._respond(response, recorded, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError):
            return  # a cancelled handler ends quietly (the server is stopping)
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> Recorded | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return Recorded(method, path, headers, body, time.monotonic())

    async def _respond(self, response: Response, recorded: Recorded, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Send one response; True when the connection may serve another request."""
        if isinstance(response, Failure):
            body = error_body(self.provider, response)
            kind = "application/json" if body[:1] in (b"{", b"[") else "text/plain"
            head = f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in response.headers.items())
            writer.write(head.encode() + b"\r\n" + body)
            await writer.drain()
            recorded.finished = True
            return True
        watch = asyncio.ensure_future(reader.read(1))  # b"" when the client closes
        try:
            if isinstance(response, Hang):
                await watch
                recorded.closed_at = time.monotonic()
                return False
            if isinstance(response, Raw):
                events, delay, cut = response.events, response.chunk_delay, None
            else:
                reply = response.reply if isinstance(response, Cut) else response
                cut = response.after if isinstance(response, Cut) else None
                events, delay = self._events(reply, recorded), reply.chunk_delay
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
            for number, event in enumerate(events):
                if cut is not None and number >= cut:
                    await writer.drain()
                    return False  # closed mid-body: the client sees an incomplete chunked body
                data = event.encode()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
                if delay:
                    done, _ = await asyncio.wait({watch}, timeout=delay)
                elif watch.done():
                    done = {watch}
                else:
                    done = set()
                if done:
                    recorded.closed_at = time.monotonic()
                    return False
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            recorded.finished = True
            return True
        except ConnectionError:
            recorded.closed_at = time.monotonic()
            return False
        finally:
            if not watch.done():
                watch.cancel()

    def _events(self, reply: Reply, recorded: Recorded) -> list[str]:
        if self.provider == "anthropic":
            return anthropic_events(reply, self.model)
        wants_usage = bool(((recorded.json or {}).get("stream_options") or {}).get("include_usage"))
        return openai_events(reply, self.model, include_usage=wants_usage)
