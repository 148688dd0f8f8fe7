"""A raw stdio client of `dshd serve` with its own framing (no pygls, no pytest-lsp).

For the tests that must control every byte sent (garbage on the wire, lifecycle and
exit codes) and check every byte received (stdout carries nothing but framed JSON-RPC).
A reader thread splits stdout into frames *strictly* (only `Content-Length` /
`Content-Type` headers, `\\r\\n` line ends, a JSON object body with `"jsonrpc": "2.0"`);
anything else is recorded in ``stdout_faults`` and the tests assert it stays empty.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from dshd.client import dshd_command


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def split_frames(data: bytes) -> tuple[list[dict], list[str], bytes]:
    """(messages, faults, rest): every complete frame in ``data``; ``rest`` is an
    incomplete tail. A fault is a description of bytes that are not a valid frame."""
    messages: list[dict] = []
    faults: list[str] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        length = None
        for line in data[pos:end].split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not sep:
                faults.append(f"header line without ':' at byte {pos}: {line[:60]!r}")
                continue
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    faults.append(f"bad Content-Length at byte {pos}: {value[:30]!r}")
            elif name != b"content-type":
                faults.append(f"unexpected header at byte {pos}: {line[:60]!r}")
        if length is None:
            faults.append(f"frame without Content-Length at byte {pos}")
            return messages, faults, b""
        body_start = end + 4
        if len(data) < body_start + length:
            break
        body = data[body_start : body_start + length]
        try:
            message = json.loads(body, parse_constant=_not_json)  # NaN/Infinity are not JSON
        except ValueError as exc:
            faults.append(f"body at byte {body_start} is not JSON: {exc}")
        else:
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                faults.append(f"body at byte {body_start} is not a JSON-RPC 2.0 object: {body[:80]!r}")
            else:
                messages.append(message)
        pos = body_start + length
    return messages, faults, data[pos:]


class RawDaemon:
    """`dshd serve` as a child process; blocking requests; notifications collected."""

    def __init__(
        self, workspace: Path, *, env: dict | None = None, log_level: str = "WARNING", command: list[str] | None = None
    ) -> None:
        """``command``: what to start instead of `dshd serve` (`dshd connect`, the forwarder)."""
        self.workspace = Path(workspace)
        full_env = {**os.environ, "DSHD_LOG_LEVEL": log_level, **(env or {})}
        cmd = command or dshd_command()
        self.proc = subprocess.Popen(
            cmd,
            cwd=str(workspace),
            env=full_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stdout_bytes = bytearray()
        self.stderr_bytes = bytearray()
        self.stdout_faults: list[str] = []
        self.inbox: "queue.Queue[dict | None]" = queue.Queue()
        self.notifications: list[dict] = []
        self.unmatched: list[dict] = []  # responses to no request of ours
        self.answer: Callable[[dict], Any] | None = None  # answers dsh/questions/ask
        self.permit: Callable[[dict], Any] | None = None  # answers dsh/permission/ask
        self.next_id = 0
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    # ---- reading ------------------------------------------------------------------

    def _read_stdout(self) -> None:
        pending = b""
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.stdout_bytes += chunk
            messages, faults, pending = split_frames(pending + chunk)
            self.stdout_faults += faults
            for message in messages:
                self.inbox.put(message)
        if pending:
            self.stdout_faults.append(f"stdout ended inside a frame: {pending[:80]!r}")
        self.inbox.put(None)

    def _read_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            self.stderr_bytes += chunk

    def _next(self, deadline: float) -> dict:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no message from the daemon in time")
        try:
            message = self.inbox.get(timeout=remaining)
        except queue.Empty:
            raise TimeoutError("no message from the daemon in time") from None
        if message is None:
            self.inbox.put(None)  # stay at EOF for later readers
            raise EOFError("the daemon closed stdout")
        return message

    def _dispatch(self, message: dict) -> None:
        """A message that is not the awaited response: a notification, a server request,
        or a response nobody waits for (kept in ``unmatched``)."""
        if "method" not in message:
            self.unmatched.append(message)
        elif "id" not in message:
            self.notifications.append(message)
        elif message["method"] == "dsh/questions/ask" and self.answer is not None:
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": self.answer(message["params"])})
        elif message["method"] == "dsh/permission/ask" and self.permit is not None:
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": self.permit(message["params"])})
        else:
            self.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "not here"}})

    def response(self, msg_id: Any, timeout: float = 20) -> dict:
        """The response (``result`` or ``error``) to ``msg_id``; others are dispatched."""
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if "method" not in message and message.get("id") == msg_id:
                return message
            self._dispatch(message)

    def next_response(self, timeout: float = 20) -> dict:
        """The next response of any id (for answers to messages whose id we broke)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if "method" not in message:
                return message
            self._dispatch(message)

    # ---- writing ------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        body = json.dumps(message).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def call(self, method: str, params: Any = None, timeout: float = 20) -> dict:
        """Send a request; return the whole response message (``result`` or ``error``)."""
        self.next_id += 1
        msg_id = self.next_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(msg_id, timeout)

    def request(self, method: str, params: Any = None, timeout: float = 20) -> Any:
        """The result; an error response raises AssertionError showing it."""
        reply = self.call(method, params, timeout)
        assert "error" not in reply, f"{method}: {reply['error']}"
        return reply["result"]

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(
        self, *, questions: bool = True, permissions: bool = False, options: dict | None = None, name: str | None = None
    ) -> dict:
        """``initialize`` + ``initialized``; returns the whole response. ``name``: the
        client's ``clientInfo.name`` (none sent without it)."""
        dsh = {"questions": True} if questions else {}
        if permissions:
            dsh["permissions"] = True
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "rootUri": self.workspace.resolve().as_uri(),
            "capabilities": {"experimental": {"dsh": dsh}} if dsh else {},
        }
        if options is not None:
            params["initializationOptions"] = options
        if name is not None:
            params["clientInfo"] = {"name": name}
        reply = self.call("initialize", params)
        if "result" in reply:
            self.notify("initialized", {})
        return reply

    # ---- ending -------------------------------------------------------------------

    def shutdown_and_exit(self, timeout: float = 10) -> int:
        self.request("shutdown")
        self.notify("exit")
        return self.wait(timeout)

    def close_stdin(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def wait(self, timeout: float = 10) -> int:
        code = self.proc.wait(timeout)
        self._out.join(5)
        self._err.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.close_stdin()

    def __enter__(self) -> "RawDaemon":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            try:
                self.close_stdin()
                self.proc.wait(5)
            except Exception:
                pass
        self.kill()


def log_path(workspace: Path, session_id: str) -> Path:
    return Path(workspace) / ".dsh" / "sessions" / session_id / "log.jsonl"


def log_events(workspace: Path, session_id: str) -> list[dict]:
    data = log_path(workspace, session_id).read_bytes()  # complete lines only: one may be mid-append
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]
