"""The dsh server's own JSON-RPC core (daemon/server.py), in process over a real socket
pair: arrival order, cancellation, the daemon's own requests to the client (reply, error
reply, late reply), shutdown, and faults answered without a traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dshd.daemon.server import ClientError, DshServer, serve_connection

from .test_serve_connection import FramedClient, connected_pair

INIT = {"processId": None, "rootUri": None, "capabilities": {}}


class Probe(DshServer):
    """A server with a few test methods; no Workspace."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.started = asyncio.Event()
        self.asked: asyncio.Future | None = None
        self.feature("t/sync")(self.sync)
        self.feature("t/slow")(self.slow)
        self.feature("t/ask")(self.ask)
        self.feature("t/fault")(self.fault)

    def sync(self, params):
        self.seen.append(f"sync {params['n']}")
        return {"n": params["n"]}

    async def slow(self, params):
        self.seen.append("slow started")
        self.started.set()
        await asyncio.sleep(60)
        return {"never": True}

    async def ask(self, params):
        self.asked = self.protocol.send_request_async("t/question", {"q": params["q"]}, msg_id=params["id"])
        try:
            return {"reply": await self.asked}
        except ClientError as exc:
            return {"error": exc.code}

    def fault(self, params):
        raise ValueError("a secret detail only the log may hold")


async def started(tmp_path: Path) -> tuple[Probe, FramedClient, asyncio.Future]:
    (reader, writer), client = await connected_pair()
    server = Probe()
    served = asyncio.ensure_future(serve_connection(server, reader, writer))
    assert "capabilities" in (await client.call("initialize", INIT))["result"]
    return server, client, served


async def read_until(client: FramedClient, match) -> dict:
    while True:
        message = await asyncio.wait_for(client.read(), 10)
        if match(message):
            return message
        client.notifications.append(message)


async def test_requests_take_effect_in_arrival_order_and_a_cancel_answers_32800(tmp_path: Path) -> None:
    server, client, served = await started(tmp_path)
    client.send({"jsonrpc": "2.0", "id": "s", "method": "t/slow", "params": {}})
    for n in range(3):
        client.send({"jsonrpc": "2.0", "id": n, "method": "t/sync", "params": {"n": n}})
    answers = [await read_until(client, lambda m: "id" in m) for _ in range(3)]
    assert [a["result"] for a in answers] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert server.seen == ["slow started", "sync 0", "sync 1", "sync 2"]  # the slow one started first
    client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "s"}})
    cancelled = await read_until(client, lambda m: m.get("id") == "s")
    assert cancelled["error"] == {"code": -32800, "message": 'Request with id "s" is canceled'}
    await client.call("shutdown")
    client.send({"jsonrpc": "2.0", "method": "exit"})
    await asyncio.wait_for(served, 10)
    assert server.exit_code == 0


async def test_the_daemons_own_request_gets_the_reply_an_error_reply_or_drops_a_late_one(tmp_path: Path) -> None:
    server, client, served = await started(tmp_path)
    # A reply.
    client.send({"jsonrpc": "2.0", "id": 1, "method": "t/ask", "params": {"q": "first", "id": "q-1"}})
    asked = await read_until(client, lambda m: m.get("method") == "t/question")
    assert asked == {"jsonrpc": "2.0", "id": "q-1", "method": "t/question", "params": {"q": "first"}}
    client.send({"jsonrpc": "2.0", "id": "q-1", "result": {"answer": 42}})
    assert (await read_until(client, lambda m: m.get("id") == 1))["result"] == {"reply": {"answer": 42}}
    # An error reply reaches the asker as ClientError with its code.
    client.send({"jsonrpc": "2.0", "id": 2, "method": "t/ask", "params": {"q": "second", "id": "q-2"}})
    await read_until(client, lambda m: m.get("method") == "t/question")
    client.send({"jsonrpc": "2.0", "id": "q-2", "error": {"code": -32800, "message": "closed"}})
    assert (await read_until(client, lambda m: m.get("id") == 2))["result"] == {"error": -32800}
    # A late reply (the daemon stopped waiting) changes nothing and the server goes on.
    client.send({"jsonrpc": "2.0", "id": "c", "method": "t/ask", "params": {"q": "third", "id": "q-3"}})
    await read_until(client, lambda m: m.get("method") == "t/question")
    server.asked.cancel()
    assert (await read_until(client, lambda m: m.get("id") == "c"))["error"]["code"] == -32800
    client.send({"jsonrpc": "2.0", "id": "q-3", "result": {"answer": "too late"}})
    client.send({"jsonrpc": "2.0", "id": "q-unknown", "result": None})  # and one never asked
    assert (await client.call("t/sync", {"n": 7}))["result"] == {"n": 7}
    client.writer.close()
    await asyncio.wait_for(served, 10)
    assert server.exit_code == 1  # end of input without shutdown


async def test_shutdown_cancels_what_runs_and_refuses_what_follows(tmp_path: Path) -> None:
    server, client, served = await started(tmp_path)
    client.send({"jsonrpc": "2.0", "id": "s", "method": "t/slow", "params": {}})
    await asyncio.wait_for(server.started.wait(), 10)
    client.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
    answers = {m["id"]: m for m in [await read_until(client, lambda m: "id" in m) for _ in range(2)]}
    assert answers["s"] == {"jsonrpc": "2.0", "id": "s", "error": {"code": -32800, "message": 'Request with id "s" is canceled'}}
    assert answers["bye"] == {"jsonrpc": "2.0", "id": "bye", "result": None}
    later = await client.call("t/sync", {"n": 1})
    assert later["error"]["code"] == -32600 and server.seen == ["slow started"]
    client.send({"jsonrpc": "2.0", "method": "exit"})
    await asyncio.wait_for(served, 10)
    assert server.exit_code == 0


async def test_a_fault_is_32603_without_its_traceback_and_the_server_goes_on(tmp_path: Path, caplog) -> None:
    server, client, served = await started(tmp_path)
    error = (await client.call("t/fault", {}))["error"]
    assert error == {"code": -32603, "message": "internal error (ValueError): see the daemon's log"}
    assert "secret detail" in caplog.text  # the log has it, the client does not
    # Control: the same server answers a good request, and an unknown one is -32601.
    assert (await client.call("t/sync", {"n": 3}))["result"] == {"n": 3}
    assert (await client.call("t/nope", {}))["error"] == {"code": -32601, "message": "Method Not Found: t/nope"}
    client.writer.close()
    await asyncio.wait_for(served, 10)


async def test_the_first_initialize_turns_collection_back_on_after_start_up(tmp_path: Path) -> None:
    """`dshd serve` loads with cyclic collection off (cli.py); initialize's answer ends
    start-up: the start-up objects frozen, collection on again."""
    import gc

    frozen_before = gc.get_freeze_count()
    gc.disable()
    try:
        server, client, served = await started(tmp_path)
        assert gc.isenabled() and gc.get_freeze_count() > frozen_before
        # Control: with collection on (the shared daemon), a later initialize leaves it as it is.
        (reader, writer), other = await connected_pair()
        second = asyncio.ensure_future(serve_connection(Probe(), reader, writer))
        frozen = gc.get_freeze_count()
        assert "result" in await other.call("initialize", INIT)
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.enable()
        gc.unfreeze()
    for c, s in ((client, served), (other, second)):
        c.writer.close()
        await asyncio.wait_for(s, 10)


class RecordingWriter:
    """A writer that notes which thread wrote each frame (serve_connection takes any
    object with write and close)."""

    def __init__(self, inner: asyncio.StreamWriter) -> None:
        self.inner = inner
        self.threads: list[int] = []

    def write(self, data: bytes) -> None:
        import threading

        self.threads.append(threading.get_ident())
        self.inner.write(data)

    def close(self) -> None:
        self.inner.close()


async def test_a_frame_sent_from_a_worker_thread_is_written_on_the_loop(tmp_path: Path) -> None:
    """A log record from a worker thread becomes a window/logMessage: an asyncio stream
    may be written from its loop only."""
    import threading

    (reader, writer), client = await connected_pair()
    out = RecordingWriter(writer)
    server = Probe()
    served = asyncio.ensure_future(serve_connection(server, reader, out))
    assert "result" in await client.call("initialize", INIT)
    loop_thread = threading.get_ident()
    worker = await asyncio.get_running_loop().run_in_executor(None, threading.get_ident)
    assert worker != loop_thread  # control: the executor runs elsewhere
    await asyncio.get_running_loop().run_in_executor(None, server.protocol.send_notification, "t/from-a-thread", {"n": 1})
    note = await read_until(client, lambda m: m.get("method") == "t/from-a-thread")
    assert note["params"] == {"n": 1}
    assert set(out.threads) == {loop_thread}
    client.writer.close()
    await asyncio.wait_for(served, 10)


async def test_a_result_holding_a_wire_type_goes_out_in_its_wire_form(tmp_path: Path) -> None:
    """An attrs wire type in a result is written as the wire names it (camelCase), never
    with its Python field names; a plain result is written as it is (control)."""
    from dshd_protocol import types as T

    server, client, served = await started(tmp_path)
    server.feature("t/ref")(lambda params: {"ref": T.GoalRef(id="g-1", revision=3), "maxRounds": 2})
    assert (await client.call("t/ref", {}))["result"] == {"ref": {"id": "g-1", "revision": 3}, "maxRounds": 2}
    params = T.GoalRefParams(agent_id="a-0123456789abcdef", ref=T.GoalRef(id="g", revision=1))
    server.feature("t/view")(lambda _: {"goal": params})
    sent = (await client.call("t/view", {}))["result"]["goal"]
    assert sent["agentId"] == "a-0123456789abcdef" and "agent_id" not in sent
    assert (await client.call("t/sync", {"n": 5}))["result"] == {"n": 5}
    client.writer.close()
    await asyncio.wait_for(served, 10)
