"""Several dsh connections on one Host, in process, over real socket pairs: each
connection is the daemon's own DshDaemon served by ``serve_connection`` on one end, and a
client speaking raw LSP framing on the other (it answers the daemon's requests when the
test says so, and keeps every notification)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from dshd.daemon.app import DshDaemon
from dshd.daemon.host import Host
from dshd.daemon.server import serve_connection


class RpcError(Exception):
    def __init__(self, error: dict) -> None:
        super().__init__(error.get("message"))
        self.error = error


class Conn:
    """One client connection: requests, the daemon's requests to it, its notifications."""

    def __init__(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.name = name
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.notes: list[dict] = []
        self.asked: list[dict] = []  # the daemon's requests, in order
        self.arrived: list[dict] = []  # every message, in the order it came
        self._changed = asyncio.Event()
        self.reading = asyncio.ensure_future(self._read_all())
        self.daemon: DshDaemon | None = None
        self.served: asyncio.Future | None = None

    # ---- wire ----------------------------------------------------------------------

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def _read_one(self) -> dict:
        length = None
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            key, _, value = line.partition(b":")
            if key.lower() == b"content-length":
                length = int(value)
        return json.loads(await self.reader.readexactly(length))

    async def _read_all(self) -> None:
        try:
            while True:
                message = await self._read_one()
                self.arrived.append(message)
                if "method" not in message:
                    future = self.pending.pop(message.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif "id" in message:
                    self.asked.append(message)
                else:
                    self.notes.append(message)
                self._changed.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def call(self, method: str, params: Any = None, timeout: float = 20) -> Any:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self.send({"id": self.next_id, "method": method, "params": params})
        reply = await asyncio.wait_for(future, timeout)
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    def start_call(self, method: str, params: Any = None) -> asyncio.Task:
        return asyncio.ensure_future(self.call(method, params, timeout=60))

    def answer(self, request: dict, result: Any) -> None:
        self.send({"id": request["id"], "result": result})

    # ---- waiting ---------------------------------------------------------------------

    async def until(self, check, timeout: float = 10) -> Any:
        """Wait until ``check()`` returns something truthy; returns it."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            found = check()
            if found:
                return found
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"{self.name}: timed out; notes {[n['method'] for n in self.notes]}, asked {[a['method'] for a in self.asked]}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    def of(self, method: str) -> list[dict]:
        return [n["params"] for n in self.notes if n["method"] == method]

    async def request_for(self, method: str, timeout: float = 10) -> dict:
        """The first request of ``method`` the daemon sent that was not yet taken."""
        taken = getattr(self, "_taken", set())
        self._taken = taken

        def find():
            for request in self.asked:
                if request["method"] == method and request["id"] not in taken:
                    return request
            return None

        request = await self.until(find, timeout)
        taken.add(request["id"])
        return request

    def clients_seen(self) -> list[list[tuple[str, bool]]]:
        return [[(c["clientName"], c["you"]) for c in p["clients"]] for p in self.of("dsh/session/clients")]

    async def close(self) -> None:
        self.writer.close()
        if self.served is not None:
            await asyncio.wait_for(self.served, 10)


async def connect(
    host: Host, root: Path, name: str | None, *, questions: bool = True, permissions: bool = True, headless: bool = False
) -> Conn:
    """A dsh connection to ``host``, initialized on ``root`` (``headless``: it declares
    itself a headless run, as dshd run does)."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    daemon = DshDaemon(host)
    served = asyncio.ensure_future(serve_connection(daemon, reader, writer))
    conn = Conn(name or "unnamed", *await asyncio.open_connection(sock=theirs))
    conn.daemon, conn.served = daemon, served
    params: dict[str, Any] = {
        "processId": None,
        "rootUri": root.as_uri(),
        "capabilities": {"experimental": {"dsh": {"questions": questions, "permissions": permissions}}},
    }
    if headless:
        params["capabilities"]["experimental"]["dsh"]["headless"] = True
    if name is not None:
        params["clientInfo"] = {"name": name}
    await conn.call("initialize", params)
    conn.send({"method": "initialized", "params": {}})
    return conn
