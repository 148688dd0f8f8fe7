"""Tool call ids a server reuses: the real `dshd serve` over stdio, an OpenAI-compatible
loopback server (tests/loopback_models.py) that numbers the calls of every reply from 0, as
some local servers do. Each call keeps its own approval, decision, result and chat item;
the provider is sent its own ids back; strict replay accepts the log.
"""

from __future__ import annotations

import pytest

import json
import subprocess
import sys

from loopback_models import Call, LoopbackModelServer, Reply

from tests.e2e.raw_client import log_path
from tests.e2e.support import of_type, read_log
from tests.e2e.test_providers import KEY, KEY_ENV, bare_workspace, model_config

REASON = "Not that file: keep b.txt as it is"


@pytest.mark.slow
async def test_a_reused_call_id_keeps_each_call_its_own_approval_decision_and_item(daemons) -> None:
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply("Writing a.", [Call("write_file", {"path": "a.txt", "content": "A\n"}, id="call_0")]),
            Reply("Writing b.", [Call("write_file", {"path": "b.txt", "content": "B\n"}, id="call_0")]),
            Reply("Done."),
        )
        asked: list[dict] = []

        def person(params: dict) -> dict:
            asked.append(params)
            if len(asked) == 1:
                return {"outcome": "allow-once"}
            return {"outcome": "reject", "feedback": REASON}

        bare_workspace(daemons.root, ["plan", "goals", "tools"])
        client = await daemons.start(approve=person, config=model_config(server), env={KEY_ENV: KEY})
        created = await client.request("dsh/session/create", {})
        agent, sid = created["agentId"], created["sessionId"]
        # Subscribes to dsh/chat/item: the live items (streamed pieces included) follow.
        await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200})
        result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "write a and b"})
        assert result == {"turn": 1, "stopReason": "end-turn"}
        requests = server.wait_requests(3)

    events = read_log(daemons.root, sid)
    first, second = (e["data"] for e in of_type(events, "tool/call"))
    # Positive control: an id new to the session is kept as the provider sent it.
    assert first == {"callId": "call_0", "name": "write_file", "arguments": {"path": "a.txt", "content": "A\n"}}
    # The reused one gets its own identity; the provider's id is kept beside it.
    assert second["callId"] != "call_0" and second["providerCallId"] == "call_0"
    ids = [first["callId"], second["callId"]]

    # Both people's answers were asked for and recorded, each under its own call.
    assert [a["callId"] for a in asked] == ids
    assert [d["data"] for d in of_type(events, "permission/decision")] == [
        {"callId": ids[0], "tool": "write_file", "outcome": "allow-once", "by": "person", "client": "client 1"},
        {"callId": ids[1], "tool": "write_file", "outcome": "reject", "by": "person", "feedback": REASON, "client": "client 1"},
    ]
    results = {e["data"]["callId"]: e["data"] for e in of_type(events, "tool/result")}
    assert results[ids[0]]["ok"] is True and results[ids[1]]["ok"] is False
    assert REASON in results[ids[1]]["content"]
    assert (daemons.root / "a.txt").read_text() == "A\n" and not (daemons.root / "b.txt").exists()

    # The chat: one tool item per call, and the reject reason on its permission item.
    chat = (await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200}))["items"]
    tools = [i for i in chat if i["kind"] == "tool-call"]
    assert [(t["callId"], t["status"]) for t in tools] == [(ids[0], "ok"), (ids[1], "failed")]
    assert len({t["id"] for t in tools}) == 2
    permissions = [i for i in chat if i["kind"] == "permission"]
    assert [p["callId"] for p in permissions] == ids
    assert permissions[1]["feedback"] == REASON and REASON in permissions[1]["text"]
    # The streamed pieces of each call went to that call's item, never to the other's.
    live = [n["params"]["item"] for n in client.notifications if n["method"] == "dsh/chat/item"]
    assert any(i.get("partial") for i in live if i["kind"] == "tool-call")
    assert {i["id"] for i in live if i["kind"] == "tool-call"} == {t["id"] for t in tools}

    # The provider got its own ids back, each call with its own result.
    sent = requests[2].json["messages"]
    assert [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []] == ["call_0", "call_0"]
    tool_messages = [m for m in sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_0", "call_0"]
    assert REASON in tool_messages[1]["content"] and REASON not in tool_messages[0]["content"]

    verify = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "verify", str(log_path(daemons.root, sid)), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
