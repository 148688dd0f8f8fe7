"""G-25 end to end: the real `dshd` over stdio with `provider = "openai"` and `"anthropic"`
through the official SDKs to the loopback servers, which report usage as each real API
does (cached tokens included), or none, or stop at the output limit mid tool call."""

from __future__ import annotations

import pytest
from loopback_models import Call, LoopbackModelServer, Reply

from .support import of_type, read_log
from .test_providers import last_close, new_session, start


@pytest.fixture(params=["openai", "anthropic"])
def server(request):
    with LoopbackModelServer(request.param) as loopback:
        yield loopback


def goal_note(op: str):
    return lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == op


@pytest.mark.slow
async def test_usage_cached_input_tokens_reach_the_log(daemons, server) -> None:
    server.script(
        Reply("Reading.", [Call("read_file", {"path": "README.md"})], usage=(1200, 9), cached=0),
        Reply("Read it.", usage=(1260, 4), cached=1200),
    )
    (daemons.root / "README.md").write_text("# the project\n")
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "read the readme"}))["stopReason"] == "end-turn"
    usages = [e["data"]["usage"] for e in of_type(read_log(daemons.root, sid), "assistant/message")]
    # Control first: nothing cached, nothing written; then the cached part of the whole prompt.
    assert usages == [
        {"inputTokens": 1200, "outputTokens": 9},
        {"inputTokens": 1260, "outputTokens": 4, "cachedInputTokens": 1200},
    ]


@pytest.mark.slow
async def test_usage_unreported_is_estimated_and_the_token_budget_holds(daemons, server) -> None:
    """A server that reports no usage: each reply's usage is characters/4, marked
    estimated; a goal's token budget counts it and blocks the goal when it is spent."""
    long_text = "word " * 400  # about 500 tokens of reply at characters/4
    server.script(*[Reply(f"round {n}: {long_text}", usage=None) for n in range(1, 6)])
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    blocked = client.wait_for(goal_note("block"), timeout=60)
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 5, "maxTokens": 1500})
    assert "tokensEstimated" not in goal  # nothing counted yet
    view = (await blocked)["params"]["goal"]
    assert view["blockedReason"]["code"] == "token-budget-exhausted"
    assert view["roundsStarted"] < 5 and view["tokensUsed"] >= 1500  # the budget, not the rounds, stopped it
    assert view["tokensEstimated"] is True
    assert "~" in view["status"]["text"] and view["status"]["text"].startswith(f"{view['roundsStarted']}/5 · ~")
    replies = [e["data"] for e in of_type(read_log(daemons.root, sid), "assistant/message")]
    assert replies and all(r["usage"]["estimated"] is True for r in replies)
    assert all(r["usage"]["outputTokens"] >= len(long_text) // 4 for r in replies)
    assert sum(r["usage"]["inputTokens"] + r["usage"]["outputTokens"] for r in replies) == view["tokensUsed"]
    # The model is told too: round 2's request says the count is an estimate (round 1's not yet).
    bodies = [r.body.decode() for r in server.requests]
    assert "an estimate from characters" not in bodies[0] and "an estimate from characters" in bodies[1]
    # The same after a reload: the fold of the log says estimated, not the process.
    reopened = await client.request("dsh/session/open", {"sessionId": sid, "reload": True})
    again = await client.request("dsh/goal/get", {"agentId": reopened["agentId"]})
    assert (again["tokensUsed"], again["tokensEstimated"]) == (view["tokensUsed"], True)


@pytest.mark.slow
async def test_usage_reported_is_not_estimated(daemons, server) -> None:
    """The control of the test above: the same rounds with usage reported."""
    server.script(*[Reply(f"round {n}", usage=(700, 100)) for n in range(1, 6)])
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    blocked = client.wait_for(goal_note("block"), timeout=60)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 5, "maxTokens": 1500})
    view = (await blocked)["params"]["goal"]
    assert (view["tokensUsed"], view["roundsStarted"]) == (1600, 2) and "tokensEstimated" not in view
    assert "~" not in view["status"]["text"]
    replies = of_type(read_log(daemons.root, sid), "assistant/message")
    assert all("estimated" not in r["data"]["usage"] for r in replies)


@pytest.mark.slow
async def test_usage_reply_cut_at_max_output_tokens_mid_tool_call_is_output_limit(daemons, server) -> None:
    content = "def f():\n    return 1\n" * 30
    server.script(
        Reply("Writing the module.", [Call("write_file", {"path": "m.py", "content": content})], usage=(300, 64), cut_at_limit=True),
        Reply("A reply after it."),
        Reply("A long answer that stops in the mid", usage=(320, 64), cut_at_limit=True),
    )
    client = await start(daemons, server, maxOutputTokens=64)
    agent, sid = await new_session(client)
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "write m.py"})
    assert result["stopReason"] == "model-error"
    close = last_close(daemons.root, sid)
    assert close["error"]["kind"] == "output-limit"
    message = close["error"]["message"]
    assert "maxOutputTokens" in message and "64" in message and "write_file" in message
    assert "JSON" not in message
    events = read_log(daemons.root, sid)
    assert not of_type(events, "tool/call") and not (daemons.root / "m.py").exists()
    # The text and the tokens the cut reply spent are kept.
    (reply,) = of_type(events, "assistant/message")
    assert reply["data"] == {"text": "Writing the module.", "usage": {"inputTokens": 300, "outputTokens": 64}}
    assert len(server.requests) == 1  # the turn ended there: no second request
    # Control: the session goes on; the next turn is an ordinary one.
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go on"}))["stopReason"] == "end-turn"
    # A text cut at the limit ends the same way, its text kept.
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "explain"}))["stopReason"] == "model-error"
    close = last_close(daemons.root, sid)
    assert close["error"]["kind"] == "output-limit" and "maxOutputTokens" in close["error"]["message"]
    assert of_type(read_log(daemons.root, sid), "assistant/message")[-1]["data"]["text"] == "A long answer that stops in the mid"
