"""Context over stdio against the real daemon: a 60-round goal that outgrows a small
context window and is compacted several times, with a real provider (the official SDK
talking to a loopback server that measures every request it receives) and with the
scripted model; `/compact` by hand; compactions whose model call fails or gives no
summary; AGENTS.md in every request header. `dshd log verify` accepts every log written."""

from __future__ import annotations

import pytest

import collections
import dataclasses
import json
import secrets
import subprocess
import sys
from pathlib import Path

from loopback_models import Failure, LoopbackModelServer, Reply

from .conftest import PLAN_SECTION, write_workspace
from .support import log_path, of_type, read_log, wait_idle

WINDOW = 2000  # tokens: compaction before a request estimated over 1600
BIG = "The work goes on; here is what I did and what I found. " * 22  # about 300 tokens


def context_workspace(root: Path, replies: list[dict], *, window: int | None = WINDOW) -> Path:
    extra = f"contextWindow = {window}\n" if window is not None else ""
    return write_workspace(root, replies, extra_config=extra)


def verify(root: Path, session_id: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "verify", str(log_path(root, session_id)), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
async def test_a_60_round_goal_runs_to_its_end_compacting_several_times(tmp_path, daemons) -> None:
    # Every request takes the next reply: a work request gets it as its answer, a summary
    # request as its summary (about 300 tokens: it fits).
    root = context_workspace(tmp_path / "ws", [{"text": BIG}] * 200)
    (root / "AGENTS.md").write_text("Keep every answer about the work.\n")
    daemons.root = root
    client = await daemons.start()
    created = await client.request("dsh/session/create", {"title": "long goal"})
    sid, agent = created["sessionId"], created["agentId"]
    blocked = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=240
    )
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "Polish the parser", "maxRounds": 60})
    note = await blocked
    assert note["params"]["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    assert note["params"]["goal"]["roundsStarted"] == 60
    events = await wait_idle(client, agent, timeout=30)
    closes = of_type(events, "turn/close")
    assert len(closes) == 60 and {c["data"]["stopReason"] for c in closes} == {"end-turn"}
    compacts = of_type(events, "context/compact")
    assert len(compacts) >= 5
    for compact in compacts:
        assert compact["data"]["tokensBefore"] > 0.8 * WINDOW > compact["data"]["tokensAfter"]
    headers = of_type(events, "request/header")
    assert all("project:instructions" in h["data"]["sections"] for h in headers if h["data"]["tools"])
    assert sum(h["data"]["sections"] == ["context:compact"] for h in headers) == len(compacts)
    # Live: each compaction reached the client as it was committed.
    live = [n["params"]["event"] for n in client.notifications if n["method"] == "dsh/session/event"]
    assert [e for e in live if e["type"] == "context/compact"] == compacts
    assert verify(root, sid)["events"] == len(events)


@pytest.mark.slow
async def test_compact_by_hand_and_a_compaction_that_fails(tmp_path, daemons) -> None:
    replies = [{"text": "one"}, {"text": "two"}, {"text": "A summary of one and two."}, {"text": "three"}, {}]
    root = context_workspace(tmp_path / "ws", replies, window=None)
    daemons.root = root
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    sid, agent = created["sessionId"], created["agentId"]
    for text in ("first", "second"):
        assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": text}))["stopReason"] == "end-turn"
    seen = client.wait_for(
        lambda n: n["method"] == "dsh/session/event" and n["params"]["event"]["type"] == "context/compact", 10
    )
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/compact"})
    assert result == {"turn": 3, "stopReason": "compacted"}
    compact = (await seen)["params"]["event"]
    assert compact["data"]["summary"] == "A summary of one and two." and compact["turn"] == 3
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "third"}))["stopReason"] == "end-turn"
    # The script's next reply is empty: a summary request that gets no summary fails.
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/compact"})
    assert result == {"turn": 5, "stopReason": "model-error"}
    events = read_log(root, sid)
    assert len(of_type(events, "context/compact")) == 1  # the failed one left nothing
    assert [e["type"] for e in events[-3:]] == ["turn/open", "request/header", "turn/close"]
    close = events[-1]["data"]
    assert close["error"]["kind"] == "context-overflow" and "no summary" in close["error"]["message"]
    verify(root, sid)


# ---- a real provider: the loopback server measures what it receives -----------------------

KEY_ENV = "DSHD_E2E_CONTEXT_KEY"


def tokens_of(body: bytes) -> int:
    """What the loopback server counts a request as: its body's bytes / 4, rounded up."""
    return -(-len(body) // 4)


def summary_request(recorded) -> bool:
    body = recorded.json
    system = body["messages"][0]["content"] if body.get("messages") else ""
    return not body.get("tools") and "You are compacting the context" in system


class MeasuringServer(LoopbackModelServer):
    """A loopback server that reports usage as a real one does (the input tokens it
    counted in the request it got: bytes/4 of the body; the output it sent), and answers
    summary requests from their own script (``summaries``) when one is given."""

    def __init__(self, provider, **kw) -> None:
        super().__init__(provider, **kw)
        self.summaries: collections.deque = collections.deque()

    async def _respond(self, response, recorded, reader, writer) -> bool:
        if self.summaries and summary_request(recorded):
            self._script.appendleft(response)  # the work script waits for the next work request
            response = self.summaries.popleft()
        return await super()._respond(response, recorded, reader, writer)

    def _events(self, reply: Reply, recorded) -> list[str]:
        if reply.usage is not None:
            reply = dataclasses.replace(reply, usage=(tokens_of(recorded.body), -(-len(reply.text) // 4)))
        return super()._events(reply, recorded)


async def start_on(daemons, server, window: int):
    """The daemon on the test's workspace, the model from the editor's settings."""
    (daemons.root / ".dsh" / "config.toml").write_text(f'[plan]\nsection = "{PLAN_SECTION}"\n')
    config = {
        "model": {
            "provider": server.provider, "model": "loopback-model", "baseUrl": server.base_url,
            "apiKeyEnv": KEY_ENV, "timeoutS": 20, "maxRetries": 1, "contextWindow": window,
        }
    }
    return await daemons.start(config=config, env={KEY_ENV: "sk-" + secrets.token_hex(16)})


@pytest.mark.slow
async def test_60_rounds_against_a_real_provider_every_request_under_the_window(tmp_path, daemons) -> None:
    window = 6000  # the default plugins' tool specs alone are about 1,300 tokens of every request
    big = "I changed the parser and ran the tests; this is what I found and what comes next. " * 35
    with MeasuringServer("openai") as server:
        # Each request takes the next reply: an answer, or (for a summary request) the summary.
        server.script(*[Reply(text=big) for _ in range(200)])
        root = daemons.root
        (root / "AGENTS.md").write_text("Say what you changed and why.\n")
        client = await start_on(daemons, server, window)
        created = await client.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        blocked = client.wait_for(
            lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=300
        )
        await client.request("dsh/goal/create", {"agentId": agent, "objective": "Polish the parser", "maxRounds": 60})
        note = await blocked
        assert note["params"]["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
        events = await wait_idle(client, agent, timeout=30)
        received = list(server.requests)
    closes = of_type(events, "turn/close")
    assert len(closes) == 60 and {c["data"]["stopReason"] for c in closes} == {"end-turn"}
    compacts = of_type(events, "context/compact")
    assert len(compacts) >= 4
    summaries = [r for r in received if summary_request(r)]
    assert len(summaries) == len(compacts) and len(received) == 60 + len(compacts)
    # The server saw every request, the summary requests included, under the window.
    sizes = [tokens_of(r.body) for r in received]
    assert max(sizes) <= window, sizes
    assert max(sizes) > 0.6 * window  # the window was really filled before compacting
    work = [r for r in received if not summary_request(r)]
    assert all("Say what you changed and why." in r.json["messages"][0]["content"] for r in work)
    # Usage reported by the provider is recorded, and drives the estimate after it.
    messages = of_type(events, "assistant/message")
    assert all(m["data"]["usage"]["inputTokens"] > 0 for m in messages)
    verify(root, sid)


@pytest.mark.slow
async def test_a_compaction_whose_provider_call_fails_ends_context_overflow(tmp_path, daemons) -> None:
    window = 4000
    with MeasuringServer("openai") as server:
        # Turns of 700-token answers until a summary is due; its call gets a 400 (not retried).
        server.script(*[Reply(text="x" * 2800) for _ in range(10)])
        server.summaries.append(Failure(400, message="prompt is too long"))
        client = await start_on(daemons, server, window)
        created = await client.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        results = []
        for k in range(10):
            results.append(await client.request("dsh/agent/prompt", {"agentId": agent, "text": f"prompt {k}"}))
            if results[-1]["stopReason"] != "end-turn":
                break
        assert results[-1]["stopReason"] == "model-error"
        assert summary_request(server.requests[-1])
    events = read_log(daemons.root, sid)
    assert of_type(events, "context/compact") == []
    assert events[-2]["type"] == "request/header" and events[-2]["data"]["sections"] == ["context:compact"]
    error = events[-1]["data"]["error"]
    assert error["kind"] == "context-overflow" and "summary request failed" in error["message"]
    assert "prompt is too long" in error["message"] or "bad-request" in error["message"]
    verify(daemons.root, sid)
