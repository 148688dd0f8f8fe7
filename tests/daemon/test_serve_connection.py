"""The dsh server serves any pair of asyncio streams (a Unix socket connection of the
shared daemon, stdio for `dshd serve`): `serve_connection(server, reader, writer)`.

In process, over a real socket pair: the daemon's own DshDaemon on one end, a client
speaking raw LSP framing on the other."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from dshd.daemon.app import DshDaemon
from dshd.daemon.server import serve_connection


class FramedClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.notifications: list[dict] = []

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def read(self) -> dict:
        length = None
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        assert length is not None
        return json.loads(await self.reader.readexactly(length))

    async def call(self, method: str, params=None) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.read(), 10)
            if message.get("id") == self.next_id and "method" not in message:
                return message
            self.notifications.append(message)


async def connected_pair() -> tuple[tuple, FramedClient]:
    ours, theirs = socket.socketpair()
    server_streams = await asyncio.open_connection(sock=ours)
    client = FramedClient(*await asyncio.open_connection(sock=theirs))
    return server_streams, client


def init_params(root: Path) -> dict:
    return {
        "processId": None,
        "rootUri": root.as_uri(),
        "capabilities": {},
        "initializationOptions": {"config": {"model": {"provider": "scripted"}}},
    }


async def test_a_socket_connection_is_served_to_shutdown_and_exit(tmp_path: Path) -> None:
    (reader, writer), client = await connected_pair()
    daemon = DshDaemon()
    served = asyncio.ensure_future(serve_connection(daemon, reader, writer))
    reply = await client.call("initialize", init_params(tmp_path))
    assert reply["result"]["capabilities"]["experimental"]["dsh"]["version"] == 1
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    created = (await client.call("dsh/session/create", {"title": "over a socket"}))["result"]
    listed = (await client.call("dsh/session/list", {}))["result"]["sessions"]
    assert [row["sessionId"] for row in listed] == [created["sessionId"]]
    assert (tmp_path / ".dsh" / "sessions" / created["sessionId"] / "log.jsonl").is_file()
    assert (await client.call("shutdown"))["result"] is None
    client.send({"jsonrpc": "2.0", "method": "exit"})
    await asyncio.wait_for(served, 10)
    assert daemon.exit_code == 0
    # The server closed its end: the client reads end of input.
    assert await asyncio.wait_for(client.reader.read(), 5) == b""


async def test_end_of_input_ends_the_connection_with_exit_code_1(tmp_path: Path) -> None:
    (reader, writer), client = await connected_pair()
    daemon = DshDaemon()
    served = asyncio.ensure_future(serve_connection(daemon, reader, writer))
    assert "result" in await client.call("initialize", init_params(tmp_path))
    created = (await client.call("dsh/session/create", {}))["result"]
    client.writer.close()
    await asyncio.wait_for(served, 10)
    assert daemon.exit_code == 1
    # on_stop ran: the session's lock is free, a second connection's daemon opens it.
    (reader2, writer2), client2 = await connected_pair()
    second = DshDaemon()
    served2 = asyncio.ensure_future(serve_connection(second, reader2, writer2))
    await client2.call("initialize", init_params(tmp_path))
    opened = await client2.call("dsh/session/open", {"sessionId": created["sessionId"]})
    assert opened["result"]["sessionId"] == created["sessionId"]
    await client2.call("shutdown")
    client2.send({"jsonrpc": "2.0", "method": "exit"})
    await asyncio.wait_for(served2, 10)
    assert second.exit_code == 0
