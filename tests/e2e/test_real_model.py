"""A real model end to end: the real `dshd` over stdio, its `openai` and `anthropic`
providers (the official SDKs), and llama.cpp's own server running Qwen2.5-Coder-0.5B on
this machine's CPU (tests/real_model_support.py; `./run setup` installs both).

One server for the whole module (loading takes seconds, the first request's prompt, mostly
the tool schemas, about 40 s; later requests reuse it from the server's cache). For each
provider: a plain chat, a 3-round goal whose rounds 2 and 3 reuse at least 90% of their
prompt from the cache (G-24: the goal's status goes after the history), and a cancel that
stops the server generating. The server samples greedily, so a prompt gets the same reply
on every run.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from real_model_support import MODEL_NAME, RealServer, missing

from dshd.client import DshClient

from .support import of_type, read_log

# One worker runs them all (./run test: --dist loadgroup), so one server and its cache serve them.
# The timeouts are generous for a machine busy with other tests: each call is measured
# in seconds when the machine is quiet, but a cold prompt on a loaded one takes minutes.
pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.xdist_group("real_model"), pytest.mark.timeout(900)]
WAIT_S = 600

KEY_ENV = "DSHD_REAL_MODEL_KEY"  # llama.cpp's server checks no key; the SDKs want one
# Small: every reply here is a few words; a reply cut at it would end the turn as
# output-limit, which the tests would show.
MAX_OUTPUT_TOKENS = 48
CACHE_TARGET = 0.9


@pytest.fixture(scope="module")
def real_server():
    why = missing()
    if why is not None:
        pytest.fail(f"the real model is not installed: {why}; run ./run real-model")
    with RealServer() as server:
        yield server


def model_config(server: RealServer, provider: str) -> dict:
    # OpenAI's API sits under /v1; Anthropic's SDK adds /v1/messages to the root itself.
    base = f"{server.base}/v1" if provider == "openai" else server.base
    return {
        "model": {
            "provider": provider,
            "model": MODEL_NAME,
            "baseUrl": base,
            "apiKeyEnv": KEY_ENV,
            "maxOutputTokens": MAX_OUTPUT_TOKENS,
            "timeoutS": WAIT_S,  # the cold first prompt on a busy 2-core machine
            "maxRetries": 0,  # a retry would read the whole prompt again
        }
    }


async def start(daemons, server: RealServer, provider: str) -> tuple[DshClient, str, str]:
    root: Path = daemons.root
    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    # Every plugin, as a person gets them, so the request is dshd's real one (the tools'
    # schemas are most of it); the same in every test, so the server's cache of that
    # prefix serves all of them after the first.
    (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals", "tools"]\n')
    client = await daemons.start(config=model_config(server, provider), env={KEY_ENV: "sk-local"})
    created = await client.request("dsh/session/create", {})
    return client, created["agentId"], created["sessionId"]


def usages(events: list[dict], turns: set[int] | None = None) -> list[dict]:
    return [
        e["data"]["usage"] for e in of_type(events, "assistant/message")
        if "usage" in e["data"] and (turns is None or e["turn"] in turns)
    ]  # fmt: skip


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_real_model_chat_streams_a_reply_with_real_usage(daemons, real_server, provider) -> None:
    client, agent, sid = await start(daemons, real_server, provider)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Reply with one word: hello."}, timeout=WAIT_S)
    events = read_log(daemons.root, sid)
    close = of_type(events, "turn/close")[-1]["data"]
    assert result["stopReason"] == "end-turn", close
    text = of_type(events, "assistant/message")[-1]["data"]["text"]
    streamed = "".join(
        n["params"]["text"] for n in client.notifications
        if n["method"] == "dsh/agent/delta" and n["params"]["kind"] == "text"
    )  # fmt: skip
    assert text.strip() and streamed == text
    (usage,) = usages(events)
    tools = of_type(events, "request/header")[-1]["data"]["tools"]
    assert "goal_complete" in tools, tools
    # The server's own counts: the prompt holds the tools' schemas, far more than the words.
    assert usage["inputTokens"] > 1000 and 0 < usage["outputTokens"] <= MAX_OUTPUT_TOKENS, (usage, tools)
    assert "estimated" not in usage


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_real_model_goal_rounds_reuse_the_cached_prompt(daemons, real_server, provider) -> None:
    client, agent, sid = await start(daemons, real_server, provider)
    ended = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] in ("block", "complete"), timeout=WAIT_S
    )
    objective = "Write one short sentence about tidy code. Answer in plain text; call no tools."
    await client.request("dsh/goal/create", {"agentId": agent, "objective": objective, "maxRounds": 3})
    goal = (await ended)["params"]["goal"]
    assert goal["phase"] == "blocked" and goal["blockedReason"]["code"] == "round-budget-exhausted", goal
    events = read_log(daemons.root, sid)
    rounds = sorted(e["turn"] for e in of_type(events, "turn/open") if e["data"].get("cause") == "continuation")
    assert len(rounds) == 3
    closes = {e["turn"]: e["data"]["stopReason"] for e in of_type(events, "turn/close")}
    assert [closes[t] for t in rounds] == ["end-turn"] * 3
    per_round = [usages(events, {t}) for t in rounds]
    assert all(len(u) == 1 for u in per_round), per_round
    fractions = [u[0].get("cachedInputTokens", 0) / u[0]["inputTokens"] for u in per_round]
    # G-24: the goal's status (its round count changes) is sent after the history, so the
    # rounds after the first reuse the whole prompt but the new messages and the status.
    assert min(fractions[1:]) >= CACHE_TARGET, (fractions, per_round)
    headers = of_type(events, "request/header")
    assert all({"goal:objective", "goal:status"} <= set(h["data"]["sections"]) for h in headers)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_real_model_cancel_stops_the_server_generating(daemons, real_server, provider) -> None:
    client, agent, sid = await start(daemons, real_server, provider)
    first_text = client.wait_for(
        lambda n: n["method"] == "dsh/agent/delta" and n["params"]["kind"] == "text", timeout=WAIT_S
    )
    prompt = asyncio.ensure_future(
        client.request("dsh/agent/prompt", {"agentId": agent, "text": "Count from 1 to 100, one number a line."}, timeout=WAIT_S)
    )
    await first_text
    # Control: the server is generating this reply right now.
    assert real_server.slot()["is_processing"] is True
    await client.request("dsh/agent/cancel", {"agentId": agent})
    result = await prompt
    assert result["stopReason"] == "cancelled"
    deadline = time.monotonic() + 5
    while real_server.slot()["is_processing"] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    slot = real_server.slot()
    assert slot["is_processing"] is False, "the server still generates after the cancel"
    # It stopped early: a whole reply would have run to maxOutputTokens.
    assert slot["next_token"][0]["n_decoded"] < MAX_OUTPUT_TOKENS, slot["next_token"]
    events = read_log(daemons.root, sid)
    assert of_type(events, "turn/close")[-1]["data"]["stopReason"] == "cancelled"
    assert json.dumps(events).count("Count from 1 to 100") == 1
