"""Several clients on one live session, through real processes (D-4, D-5, D-6): `dshd
connect` forwarders (dsh) and `dshd acp` forwarders (ACP: the official Python SDK, or a
raw client that shows every line) reach the one `dshd daemon` of the workspace, on a
private $XDG_RUNTIME_DIR per test.

Covered: an ACP SDK client and a dsh client on one session see each other's prompts and
replies; the first answer to an approval wins with both answering (either side first; the
other's request withdrawn: `$/cancelRequest` to the dsh client, `$/cancel_request` to the
ACP client; the late dsh answer told it changed nothing); a plan review answered in the
ACP client closes in the dsh client (resolved, withdrawn); a client attaching mid-question
is asked and answers; the last client leaving disarms the goal (nothing runs by itself)
and the daemon exits after its idle time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import queue
import time
from pathlib import Path
from typing import Any

import pytest

from tests.acp_door.clients import PythonSdkClient, agent_env, dshd_acp_command
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events
from tests.shared_daemon_support import Runtime, alive, connect_command, wait_gone

pytestmark = pytest.mark.slow

ORIGINAL = "def greet():\n    print('hi')\n"
EDITED = "def greet():\n    print('hello')\n"


def edit_call() -> dict:
    return {"toolCalls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": "print('hi')", "newText": "print('hello')"}}]}


def tools_workspace(root: Path, replies: list[dict], extra: str = "") -> Path:
    write_workspace(root, replies=replies, plugins=["plan", "goals", "tools"], extra_config=extra)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text(ORIGINAL)
    return root


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


# ---- a dsh client that keeps the daemon's requests for the test to answer -------------------


class DshClient(RawDaemon):
    def __init__(self, workspace: Path, runtime: Runtime) -> None:
        super().__init__(workspace, env=runtime.env, command=connect_command())
        self.asked: list[dict] = []
        self.replies: dict[int, dict] = {}

    def _dispatch(self, message: dict) -> None:
        if "method" in message and "id" in message:
            self.asked.append(message)
        elif "method" not in message:
            self.replies[message.get("id")] = message
        else:
            self.notifications.append(message)

    def start(self, method: str, params: Any) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def pump(self, check, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            try:
                message = self._next(min(deadline, time.monotonic() + 0.1))
            except TimeoutError:
                assert time.monotonic() < deadline, f"timed out; notifications {[n['method'] for n in self.notifications]}"
                continue
            if "method" not in message and message.get("id") is not None:
                self.replies[message["id"]] = message
            else:
                self._dispatch(message)
        return found

    def result_of(self, msg_id: int, timeout: float = 30) -> Any:
        reply = self.pump(lambda: self.replies.get(msg_id), timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def of(self, method: str) -> list[dict]:
        return [n["params"] for n in self.notifications if n["method"] == method]

    def ask(self, method: str, timeout: float = 20) -> dict:
        return self.pump(lambda: next((a for a in self.asked if a["method"] == method), None), timeout)

    def reply_to(self, request: dict, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


# ---- an ACP client that shows every line (the SDKs hide a $/cancel_request) ----------------


class RawSharedAcp:
    def __init__(self, workspace: Path, runtime: Runtime, stderr: Path) -> None:
        self.workspace = workspace
        self._stderr = open(stderr, "ab")
        self.proc = subprocess.Popen(
            dshd_acp_command(shared=True),
            cwd=workspace,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**agent_env(), **runtime.env},
        )
        self.inbox: "queue.Queue[dict]" = queue.Queue()
        self.received: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.inbox.put(json.loads(line))

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, check, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while not (found := check()):
            try:
                self.received.append(self.inbox.get(timeout=max(0.01, min(0.1, deadline - time.monotonic()))))
            except queue.Empty:
                assert time.monotonic() < deadline, f"timed out; got {[m.get('method', m.get('id')) for m in self.received]}"
        return found

    def request(self, method: str, params: dict) -> Any:
        self.next_id += 1
        msg_id = self.next_id
        self.send({"id": msg_id, "method": method, "params": params})
        reply = self.until(lambda: next((m for m in self.received if m.get("id") == msg_id and "method" not in m), None), 30)
        assert "error" not in reply, reply
        return reply["result"]

    def initialize(self, name: str) -> Any:
        return self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": name, "version": "1"}})

    def load(self, session_id: str) -> Any:
        return self.request("session/load", {"cwd": str(self.workspace), "sessionId": session_id, "mcpServers": []})

    def permission_request(self, timeout: float = 20) -> dict:
        return self.until(lambda: next((m for m in self.received if m.get("method") == "session/request_permission"), None), timeout)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._stderr.close()


# ---- D-4: an ACP SDK client and a dsh client on one session -----------------------------------


async def test_an_acp_sdk_client_and_a_dsh_client_share_one_live_session(workspace: Path, runtime: Runtime, tmp_path: Path):
    write_workspace(workspace, replies=[{"text": "answer to the ACP prompt"}, {"text": "answer to the dsh prompt"}])
    dsh = DshClient(workspace, runtime)
    acp_client = PythonSdkClient(workspace, tmp_path / "acp.stderr")
    try:
        assert "result" in dsh.initialize(questions=True, permissions=True)
        created = dsh.request("dsh/session/create", {"title": "both doors"})
        sid, agent = created["sessionId"], created["agentId"]

        acp_client.shared_env = runtime.env
        await acp_client.start()
        await acp_client.initialize()
        await acp_client.load_session(sid)  # the live session: no session-locked
        names = await asyncio.to_thread(dsh.pump, lambda: [[c["clientName"] for c in p["clients"]] for p in dsh.of("dsh/session/clients") if len(p["clients"]) == 2])
        assert names[-1][1] == "dshd-tests"  # the ACP client's clientInfo.name

        # The ACP client's prompt and its reply reach the dsh client as they happen.
        assert (await acp_client.prompt(sid, "hello from ACP"))["stopReason"] == "end_turn"
        events = lambda: [p["event"] for p in dsh.of("dsh/session/event")]  # noqa: E731
        await asyncio.to_thread(dsh.pump, lambda: any(e["type"] == "turn/close" for e in events()))
        assert [e["data"]["text"] for e in events() if e["type"] == "user/message"] == ["hello from ACP"]
        assert [e["data"]["text"] for e in events() if e["type"] == "assistant/message"] == ["answer to the ACP prompt"]

        # The dsh client's prompt streams to the ACP client.
        msg_id = dsh.start("dsh/agent/prompt", {"agentId": agent, "text": "hello from dsh"})
        assert (await asyncio.to_thread(dsh.result_of, msg_id))["stopReason"] == "end-turn"
        for _ in range(200):  # streamed in pieces: wait for the whole reply
            if "answer to the dsh prompt" in acp_client.agent_text(sid):
                break
            await asyncio.sleep(0.05)
        assert "answer to the dsh prompt" in acp_client.agent_text(sid)
        user_chunks = acp_client.of_kind("user_message_chunk", sid)
        assert "hello from dsh" in json.dumps(user_chunks)  # the other client's prompt too
        assert len(runtime.daemon_pids()) == 1
    finally:
        await acp_client.close()
        dsh.close_stdin()
        dsh.wait(10)


# ---- D-5: one answer wins, across the doors --------------------------------------------------


@pytest.mark.parametrize("first", ["dsh", "acp"])
def test_the_first_answer_wins_between_a_dsh_and_an_acp_client(workspace: Path, runtime: Runtime, tmp_path: Path, first: str):
    tools_workspace(workspace, [edit_call(), {"text": "ok"}])
    dsh = DshClient(workspace, runtime)
    acp = RawSharedAcp(workspace, runtime, tmp_path / "acp.stderr")
    try:
        assert "result" in dsh.initialize(questions=True, permissions=True)
        created = dsh.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        acp.initialize("raw-acp")
        acp.load(sid)
        dsh.pump(lambda: any(len(p["clients"]) == 2 for p in dsh.of("dsh/session/clients")))

        prompt = dsh.start("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
        ask = dsh.ask("dsh/permission/ask")
        request = acp.permission_request()
        call_id = ask["params"]["callId"]
        assert request["params"]["toolCall"]["toolCallId"] == call_id  # the same question to both

        if first == "dsh":
            dsh.reply_to(ask, {"outcome": "reject", "feedback": "no"})
            # The ACP client's request is cancelled in it, then its late choice changes nothing.
            cancel = acp.until(lambda: next((m for m in acp.received if m.get("method") == "$/cancel_request"), None))
            assert cancel["params"] == {"requestId": request["id"]}
            acp.send({"id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}})
            winner, outcome = dsh, "reject"
        else:
            acp.send({"id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}})
            cancel = dsh.pump(lambda: next((n for n in dsh.notifications if n["method"] == "$/cancelRequest"), None))
            assert cancel["params"] == {"id": ask["id"]}
            dsh.reply_to(ask, {"outcome": "reject"})  # too late
            note = dsh.pump(lambda: [p["message"] for p in dsh.of("window/showMessage") if "changed nothing" in p["message"]])
            assert "answered in raw-acp first (allowed once)" in note[0]
            winner, outcome = acp, "allow-once"
        assert dsh.result_of(prompt)["stopReason"] == "end-turn"

        [resolved] = dsh.pump(lambda: dsh.of("dsh/question/resolved"))
        assert resolved["questionId"] == call_id and resolved["kind"] == "permission" and resolved["outcome"] == outcome
        if winner is acp:
            assert resolved["by"] == {"clientName": "raw-acp"}
        else:  # the dsh client sent no clientInfo
            assert resolved["by"]["clientName"].startswith("client ")
        [decision] = [e["data"] for e in log_events(workspace, sid) if e["type"] == "permission/decision"]
        assert (decision["outcome"], decision["by"]) == (outcome, "person")
        assert (workspace / "src" / "app.py").read_text() == (EDITED if outcome == "allow-once" else ORIGINAL)
    finally:
        acp.close()
        dsh.close_stdin()
        dsh.wait(10)


def test_a_plan_review_answered_in_an_acp_client_closes_it_in_the_dsh_client(workspace: Path, runtime: Runtime, tmp_path: Path):
    plan = "# Plan: answer once\n\n1. Ask both.\n"
    write_workspace(workspace, replies=[{"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}, {"text": "Starting."}])
    dsh = DshClient(workspace, runtime)
    acp = RawSharedAcp(workspace, runtime, tmp_path / "acp.stderr")
    try:
        assert "result" in dsh.initialize(questions=True, permissions=True)
        created = dsh.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        assert dsh.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})["stopReason"] == "command"
        acp.initialize("raw-acp")
        acp.load(sid)
        dsh.pump(lambda: any(len(p["clients"]) == 2 for p in dsh.of("dsh/session/clients")))

        prompt = dsh.start("dsh/agent/prompt", {"agentId": agent, "text": "plan it"})
        ask = dsh.ask("dsh/questions/ask")
        [question] = ask["params"]["questions"]
        request = acp.permission_request()  # the same review, as ACP asks it
        assert [o["optionId"] for o in request["params"]["options"]] == ["approve", "keep-planning"]  # one per kind
        acp.send({"id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "approve"}}})

        assert dsh.result_of(prompt)["stopReason"] == "end-turn"
        [resolved] = dsh.pump(lambda: dsh.of("dsh/question/resolved"))
        assert resolved == {"agentId": agent, "sessionId": sid, "questionId": question["id"], "kind": "plan-review",
                            "outcome": "approve", "by": {"clientName": "raw-acp"}}  # fmt: skip
        assert dsh.pump(lambda: [n for n in dsh.notifications if n["method"] == "$/cancelRequest"])[0]["params"] == {"id": ask["id"]}
        reviews = [e["data"].get("review") for e in log_events(workspace, sid) if e["type"] == "tool/result"]
        assert reviews == [{"outcome": "approved", "client": "raw-acp"}]  # who approved it, in the log
        assert dsh.request("dsh/plan/get", {"agentId": agent})["active"] is False
    finally:
        acp.close()
        dsh.close_stdin()
        dsh.wait(10)


def test_an_acp_client_attaching_mid_question_is_asked_and_answers(workspace: Path, runtime: Runtime, tmp_path: Path):
    tools_workspace(workspace, [edit_call(), {"text": "ok"}])
    dsh = DshClient(workspace, runtime)
    acp = RawSharedAcp(workspace, runtime, tmp_path / "acp.stderr")
    try:
        assert "result" in dsh.initialize(questions=True, permissions=True)
        created = dsh.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        prompt = dsh.start("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
        ask = dsh.ask("dsh/permission/ask")  # left open

        acp.initialize("late-acp")
        acp.load(sid)
        request = acp.permission_request()  # the open question, sent after the load's answer
        loaded_at = next(i for i, m in enumerate(acp.received) if m.get("id") == acp.next_id and "result" in m)
        assert acp.received.index(request) > loaded_at
        acp.send({"id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}})
        assert dsh.result_of(prompt)["stopReason"] == "end-turn"
        assert (workspace / "src" / "app.py").read_text() == EDITED
        [resolved] = dsh.pump(lambda: dsh.of("dsh/question/resolved"))
        assert resolved["by"] == {"clientName": "late-acp"} and resolved["outcome"] == "allow-once"
        assert dsh.pump(lambda: [n for n in dsh.notifications if n["method"] == "$/cancelRequest"])[0]["params"] == {"id": ask["id"]}
    finally:
        acp.close()
        dsh.close_stdin()
        dsh.wait(10)


# ---- D-6: the last client out ------------------------------------------------------------------


def test_the_last_client_leaving_disarms_the_goal_and_the_daemon_then_exits(workspace: Path, runtime: Runtime):
    # The goal's first round waits on an approval: the goal is armed while it is open.
    tools_workspace(workspace, [edit_call(), {"text": "round 1 done"}] + [{"text": "more"}] * 4, "\n[daemon]\nidleTimeoutS = 3\n")
    a = DshClient(workspace, runtime)
    b = DshClient(workspace, runtime)
    assert "result" in a.initialize(questions=True, permissions=True)
    created = a.request("dsh/session/create", {})
    sid, agent = created["sessionId"], created["agentId"]
    assert "result" in b.initialize(questions=True, permissions=True)
    b.request("dsh/session/open", {"sessionId": sid})
    a.request("dsh/goal/create", {"agentId": agent, "objective": "edit the file", "maxRounds": 5})
    a.ask("dsh/permission/ask")
    b.ask("dsh/permission/ask")
    pid = runtime.daemon_pid()

    b.close_stdin()  # control: A is still attached, the goal stays armed
    b.wait(10)
    a.pump(lambda: any([c["you"] for c in p["clients"]] == [True] for p in a.of("dsh/session/clients")))
    assert a.request("dsh/goal/get", {"agentId": agent})["activation"] == "armed"
    a.close_stdin()  # the last one: disarmed; its approval fails closed
    a.wait(10)

    # Back before the idle time: the daemon still holds the session, disarmed, with one round.
    with DshClient(workspace, runtime) as c:
        assert "result" in c.initialize(questions=True, permissions=True)
        opened = c.request("dsh/session/open", {"sessionId": sid})
        assert opened["agentId"] == agent  # the same live agent
        assert opened["goal"]["activation"] == "disarmed"
        time.sleep(1.0)
        events = log_events(workspace, sid)
        assert len([e for e in events if e["type"] == "user/message" and e["data"].get("goalRound")]) == 1
        assert [(e["data"]["outcome"], e["data"]["by"]) for e in events if e["type"] == "permission/decision"] == [("reject", "fail-closed")]
        assert c.shutdown_and_exit() == 0
    assert (workspace / "src" / "app.py").read_text() == ORIGINAL
    assert alive(pid)  # idle, not gone yet
    assert wait_gone(pid, 20)  # then it exits after its idle time
    assert log_events(workspace, sid) == events  # nothing ran while nobody watched
