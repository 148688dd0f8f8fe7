"""Context over stdio against the real daemon: a 60-round goal that outgrows a small
context window and is compacted several times, `/compact` by hand, a compaction whose
model call gives no summary, AGENTS.md in every request header; `dshd log verify`
accepts every log written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import write_workspace
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
    if "error" in close:
        assert close["error"]["kind"] == "context-overflow" and "no summary" in close["error"]["message"]
    verify(root, sid)
