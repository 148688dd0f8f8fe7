"""`dshd acp` driven byte by byte (no SDK), for what a well-behaved client never sends:
garbage lines, batches, wrong types, unknown methods. stdout is checked strictly: every
line must be one JSON-RPC 2.0 object; anything else lands in ``stdout_faults``."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.acp_door.clients import agent_env, dshd_acp_command


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


class RawAcp:
    def __init__(self, workspace: Path, stderr_path: Path, *, shared_env: dict | None = None) -> None:
        """``shared_env``: go through the workspace's shared daemon (`dshd acp`), with these
        variables (its private runtime folder); else `dshd acp --stdio`."""
        self.workspace = workspace
        self._stderr = open(stderr_path, "ab")
        self.proc = subprocess.Popen(
            dshd_acp_command(shared=shared_env is not None),
            cwd=workspace,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**agent_env(), **(shared_env or {})},
        )
        self.messages: "queue.Queue[dict]" = queue.Queue()
        self.received: list[dict] = []
        self.stdout_faults: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1000

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line, parse_constant=_not_json)
            except ValueError as exc:
                self.stdout_faults.append(f"not JSON: {line[:80]!r} ({exc})")
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not line.endswith(b"\n"):
                self.stdout_faults.append(f"not a JSON-RPC 2.0 line: {line[:80]!r}")
                continue
            self.messages.put(message)

    def send_line(self, data: bytes | str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data.encode() if isinstance(data, str) else data)
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_line(json.dumps(message) + "\n")

    def next(self, timeout: float = 20) -> dict:
        message = self.messages.get(timeout=timeout)
        self.received.append(message)
        return message

    def answer(self, msg_id: Any, timeout: float = 20) -> dict:
        """The response with this id (requests from the agent and notifications are kept)."""
        deadline = time.monotonic() + timeout
        for message in self.received:
            if "method" not in message and message.get("id") == msg_id:
                self.received.remove(message)
                return message
        while time.monotonic() < deadline:
            message = self.next(deadline - time.monotonic())
            if "method" not in message and message.get("id") == msg_id:
                self.received.remove(message)
                return message
        raise TimeoutError(f"no answer to {msg_id!r}")

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> dict:
        if msg_id is None:
            self._next_id += 1
            msg_id = self._next_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.answer(msg_id)

    def initialize(self) -> dict:
        return self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def close(self, timeout: float = 15) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(5)
        self._stderr.close()
        return code
