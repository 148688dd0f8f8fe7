"""Every client is told how a question ended (V-9), through a real shared daemon.

Two dsh clients hold one live session over their own connections to the workspace's
`dshd daemon` (its Unix socket, as `dshd connect` reaches it) and answer the same
approval at the same moment: both replies written back to back in one order or the
other, or from two coroutines under ``asyncio.gather``. Every round: exactly one
``permission/decision`` in the session log, and the client that lost got
``dsh/question/resolved`` naming the winner (the "answered elsewhere" word), whether or
not its own ask was also withdrawn with ``$/cancelRequest``. Each dsh client reaches the
daemon over its own socket connection, or through its own `dshd connect`.

A dsh client and an ACP client (`dshd acp`, the shared daemon's ACP door) collide the same
way: an ACP client that lost gets the word as an ``agent_message_chunk`` ("Approval
answered in Editor A: rejected.") before or without its ``$/cancel_request``; ACP has no
notification of its own for it. (On the code before, 59 of 59 ACP losers got no word;
the dsh losers got theirs in every one of 3 x 200 collisions per transport.)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import dshd_connect
from tests.acp_door.clients import agent_env, dshd_acp_command
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import log_events
from tests.shared_daemon_support import Runtime, connect_command

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("DSHD_COLLISION_ROUNDS", "200"))
BUDGET_S = float(os.environ.get("DSHD_COLLISION_BUDGET_S", "240"))  # the rounds stop here, however many ran
ORDERS = ("a-first", "b-first", "gather", "a-then-b-soon", "b-then-a-soon")
EDIT = {"toolCalls": [{"name": "write_file", "arguments": {"path": "src/out.txt", "content": "x\n"}}]}


class SocketClient:
    """A dsh client on its own connection to the shared daemon's socket: LSP framing,
    requests by id, the daemon's requests and notifications kept in arrival order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.next_id = 0
        self.replies: dict[int, asyncio.Future] = {}
        self.asked: list[dict] = []
        self.notifications: list[dict] = []
        self.changed = asyncio.Event()

    async def open(self, path: str | None, root: Path, env: dict | None = None) -> None:
        """``path``: the daemon's socket; None: through a `dshd connect` of its own."""
        self.proc = None
        if path is None:
            self.proc = await asyncio.create_subprocess_exec(
                *connect_command(), cwd=root, env={**os.environ, **(env or {})},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            self.reader, self.writer = self.proc.stdout, self.proc.stdin
        else:
            self.reader, self.writer = await asyncio.open_unix_connection(path)
            self.writer.write(dshd_connect.protocol_line("dsh"))
            greeting = await self.reader.readline()
            assert greeting.startswith(b"ok dshd"), greeting
        self.pump = asyncio.ensure_future(self._read())
        caps = {"experimental": {"dsh": {"questions": True, "permissions": True}}}
        await self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": caps,
                                          "clientInfo": {"name": self.name}})
        self.notify("initialized", {})

    async def _read(self) -> None:
        while True:
            length = None
            while True:
                line = await self.reader.readline()
                if not line:
                    return
                if not line.strip():
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(await self.reader.readexactly(length))
            if "method" not in message:
                future = self.replies.pop(message.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message:
                self.asked.append(message)
            else:
                self.notifications.append(message)
            self.changed.set()

    def _write(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def start(self, method: str, params: Any) -> asyncio.Future:
        self.next_id += 1
        future = self.replies[self.next_id] = asyncio.get_running_loop().create_future()
        self._write({"id": self.next_id, "method": method, "params": params})
        return future

    async def request(self, method: str, params: Any, timeout: float = 30) -> Any:
        reply = await asyncio.wait_for(self.start(method, params), timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def notify(self, method: str, params: Any) -> None:
        self._write({"method": method, "params": params})

    def reply(self, request: dict, result: Any) -> None:
        self._write({"id": request["id"], "result": result})

    async def until(self, check, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return found

    def resolved(self, question_id: str) -> dict | None:
        return next((n["params"] for n in self.notifications
                     if n["method"] == "dsh/question/resolved" and n["params"]["questionId"] == question_id), None)

    def cancelled(self, ask_id: str) -> bool:
        return any(n["method"] == "$/cancelRequest" and n["params"].get("id") == ask_id for n in self.notifications)

    async def close(self) -> None:
        self.pump.cancel()
        self.writer.close()
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


async def _start_daemon(workspace: Path, runtime: Runtime) -> tuple[subprocess.Popen, str]:
    """The workspace's shared daemon, started as an editor starts it (a `dshd connect`
    that stays connected meanwhile); returns that forwarder and the daemon's socket."""
    forwarder = subprocess.Popen(connect_command(), cwd=workspace, env={**os.environ, **runtime.env},
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runtime.daemon_pid()
    path = dshd_connect.socket_path(str(workspace.resolve()), runtime.env)
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "the shared daemon never listened"
        await asyncio.sleep(0.02)
    return forwarder, path


async def _answer_together(order: str, a: SocketClient, ask_a: dict, b: SocketClient, ask_b: dict) -> None:
    answer_a, answer_b = {"outcome": "reject", "feedback": "from a"}, {"outcome": "allow-once"}
    if order == "a-first":
        a.reply(ask_a, answer_a)
        b.reply(ask_b, answer_b)
    elif order == "b-first":
        b.reply(ask_b, answer_b)
        a.reply(ask_a, answer_a)
    elif order.endswith("-soon"):  # the second a moment later: while the daemon settles the first
        (first, ask_1, answer_1), (second, ask_2, answer_2) = (
            ((a, ask_a, answer_a), (b, ask_b, answer_b)) if order.startswith("a") else ((b, ask_b, answer_b), (a, ask_a, answer_a)))
        first.reply(ask_1, answer_1)
        await first.writer.drain()
        await asyncio.sleep(random.uniform(0, 0.004))
        second.reply(ask_2, answer_2)
    else:
        async def send(client: SocketClient, ask: dict, answer: dict) -> None:
            client.reply(ask, answer)
            await client.writer.drain()

        await asyncio.gather(send(a, ask_a, answer_a), send(b, ask_b, answer_b))
    await asyncio.gather(a.writer.drain(), b.writer.drain())


@pytest.mark.parametrize("via", ["socket", "connect"])
async def test_the_client_that_lost_a_collision_is_always_told_who_answered(tmp_path: Path, runtime: Runtime, via: str):
    workspace = write_workspace(tmp_path / "ws", replies=[EDIT, {"text": "ok"}] * ROUNDS, plugins=["plan", "goals", "tools"])
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("hi\n")
    forwarder, path = await _start_daemon(workspace, runtime)
    a, b = SocketClient("Editor A"), SocketClient("Editor B")
    try:
        await a.open(path if via == "socket" else None, workspace, runtime.env)
        await b.open(path if via == "socket" else None, workspace, runtime.env)
        created = await a.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        await b.request("dsh/session/open", {"sessionId": sid})
        rounds, misses, started = 0, [], time.monotonic()
        for n in range(ROUNDS):
            if time.monotonic() - started > BUDGET_S:
                break
            order = ORDERS[n % len(ORDERS)]
            prompt = a.start("dsh/agent/prompt", {"agentId": agent, "text": f"round {n}"})
            asks = []
            for client in (a, b):
                asks.append(await client.until(lambda c=client: next((q for q in c.asked if q["method"] == "dsh/permission/ask"), None)))
                assert asks[-1] is not None, f"round {n}: {client.name} was never asked"
                client.asked.remove(asks[-1])
            ask_a, ask_b = asks
            call_id = ask_a["params"]["callId"]
            assert ask_b["params"]["callId"] == call_id
            await _answer_together(order, a, ask_a, b, ask_b)
            reply = await asyncio.wait_for(prompt, 30)
            assert reply["result"]["stopReason"] == "end-turn", reply
            winner_name = (await a.until(lambda: a.resolved(call_id), 10) or {}).get("by", {}).get("clientName")
            assert winner_name in (a.name, b.name), f"round {n}: the winner got no word of its own answer"
            loser, loser_ask = (b, ask_b) if winner_name == a.name else (a, ask_a)
            word = await loser.until(lambda: loser.resolved(call_id), 2)
            decisions = [e for e in log_events(workspace, sid)
                         if e["type"] == "permission/decision" and e["data"].get("callId") == call_id]
            assert len(decisions) == 1, f"round {n}: {len(decisions)} decisions for {call_id}"
            if word is None:
                misses.append((n, order, loser.name, "cancelled" if loser.cancelled(loser_ask["id"]) else "nothing"))
            rounds += 1
        print(f"\n{rounds} collisions in {time.monotonic() - started:.1f} s; the loser got no word in {len(misses)}: {misses[:10]}")
        assert rounds >= min(ROUNDS, 50), f"only {rounds} collisions ran in {BUDGET_S} s"
        assert not misses, f"{len(misses)} of {rounds} losers got no dsh/question/resolved: {misses[:10]}"
    finally:
        await a.close()
        await b.close()
        forwarder.stdin.close()
        forwarder.wait(10)


class AcpSocketClient:
    """An ACP client through `dshd acp` (the shared daemon's ACP door): NDJSON lines."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.next_id = 0
        self.replies: dict[int, asyncio.Future] = {}
        self.asked: list[dict] = []
        self.notifications: list[dict] = []
        self.changed = asyncio.Event()

    async def open(self, root: Path, env: dict) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *dshd_acp_command(shared=True), cwd=root, env={**agent_env(), **env},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, limit=2**24)
        self.writer = self.proc.stdin
        self.pump = asyncio.ensure_future(self._read())
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": self.name, "version": "1"}})

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            if "method" not in message:
                future = self.replies.pop(message.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message:
                self.asked.append(message)
            else:
                self.notifications.append(message)
            self.changed.set()

    def _write(self, message: dict) -> None:
        self.writer.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def request(self, method: str, params: Any, timeout: float = 30) -> Any:
        self.next_id += 1
        future = self.replies[self.next_id] = asyncio.get_running_loop().create_future()
        self._write({"id": self.next_id, "method": method, "params": params})
        reply = await asyncio.wait_for(future, timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def reply(self, request: dict, result: Any) -> None:
        self._write({"id": request["id"], "result": result})

    until = SocketClient.until

    def said(self) -> list[str]:
        return [n["params"]["update"]["content"].get("text", "") for n in self.notifications
                if n["method"] == "session/update" and n["params"]["update"].get("sessionUpdate") == "agent_message_chunk"]

    def cancelled(self, request_id: Any) -> bool:
        return any(n["method"] == "$/cancel_request" and n["params"].get("requestId") == request_id for n in self.notifications)

    async def close(self) -> None:
        self.pump.cancel()
        self.writer.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except asyncio.TimeoutError:
            self.proc.kill()


async def test_an_acp_client_that_lost_a_collision_is_told_who_answered(tmp_path: Path, runtime: Runtime):
    rounds_wanted = min(ROUNDS, int(os.environ.get("DSHD_ACP_COLLISION_ROUNDS", "60")))
    workspace = write_workspace(tmp_path / "ws", replies=[EDIT, {"text": "ok"}] * rounds_wanted, plugins=["plan", "goals", "tools"])
    (workspace / "src").mkdir()
    forwarder, path = await _start_daemon(workspace, runtime)
    a, b = SocketClient("Editor A"), AcpSocketClient("Editor B")
    try:
        await a.open(path, workspace)
        await b.open(workspace, runtime.env)
        created = await a.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        await b.request("session/load", {"cwd": str(workspace), "sessionId": sid, "mcpServers": []})
        rounds, misses, lost_by_b, started = 0, [], 0, time.monotonic()
        for n in range(rounds_wanted):
            if time.monotonic() - started > BUDGET_S:
                break
            order = ORDERS[n % 3]
            prompt = a.start("dsh/agent/prompt", {"agentId": agent, "text": f"round {n}"})
            ask_a = await a.until(lambda: next((q for q in a.asked if q["method"] == "dsh/permission/ask"), None))
            ask_b = await b.until(lambda: next((q for q in b.asked if q["method"] == "session/request_permission"), None))
            assert ask_a is not None and ask_b is not None, f"round {n}: not asked"
            a.asked.remove(ask_a)
            b.asked.remove(ask_b)
            call_id = ask_a["params"]["callId"]
            said_before = len(b.said())
            answer_a, answer_b = {"outcome": "reject"}, {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
            if order == "a-first":
                a.reply(ask_a, answer_a)
                b.reply(ask_b, answer_b)
            elif order == "b-first":
                b.reply(ask_b, answer_b)
                a.reply(ask_a, answer_a)
            else:
                async def send(client, ask, answer) -> None:
                    client.reply(ask, answer)
                    await client.writer.drain()

                await asyncio.gather(send(a, ask_a, answer_a), send(b, ask_b, answer_b))
            reply = await asyncio.wait_for(prompt, 30)
            assert reply["result"]["stopReason"] == "end-turn", reply
            resolved = await a.until(lambda: a.resolved(call_id), 10)
            assert resolved is not None, f"round {n}: the dsh client got no word"
            decisions = [e for e in log_events(workspace, sid)
                         if e["type"] == "permission/decision" and e["data"].get("callId") == call_id]
            assert len(decisions) == 1, f"round {n}: {len(decisions)} decisions"
            if resolved["by"]["clientName"] == a.name:  # the ACP client lost
                lost_by_b += 1
                word = await b.until(lambda: [t for t in b.said()[said_before:] if f"answered in {a.name}" in t], 2)
                if not word:
                    misses.append((n, order, "cancelled" if b.cancelled(ask_b["id"]) else "nothing"))
                else:
                    assert "rejected" in word[0], word
            else:
                assert resolved["by"]["clientName"] == b.name
            rounds += 1
        print(f"\n{rounds} dsh/ACP collisions, the ACP client lost {lost_by_b}; it got no word in {len(misses)}: {misses[:10]}")
        assert rounds >= min(rounds_wanted, 20)
        assert not misses, f"{len(misses)} of {lost_by_b} ACP losers got no word: {misses[:10]}"
    finally:
        await a.close()
        await b.close()
        forwarder.stdin.close()
        forwarder.wait(10)
