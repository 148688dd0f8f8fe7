"""G-24 end to end: the real `dshd` running a 3-round goal against the loopback OpenAI and
Anthropic servers. Every request sends the goal's status (which changes every round) after
the history, and each request's body, less that status, is the start of the next one's: a
provider's prompt cache can reuse all of it."""

from __future__ import annotations

import json

import pytest
from loopback_models import Call, LoopbackModelServer, Reply

from .support import of_type, read_log
from .test_providers import new_session, start


def blocks(body: dict, provider: str) -> list[str]:
    """The request's history as a flat list of serialized parts, in the order sent."""
    if provider == "openai":
        return [json.dumps(m, sort_keys=True) for m in body["messages"]]
    parts = [json.dumps(body["system"])]
    for message in body["messages"]:
        parts += [json.dumps([message["role"], b], sort_keys=True) for b in message["content"]]
    return parts


def status_of(part: str, provider: str) -> str:
    value = json.loads(part)
    return value["content"] if provider == "openai" else value[1]["text"]


@pytest.fixture(params=["openai", "anthropic"])
def server(request):
    with LoopbackModelServer(request.param) as loopback:
        yield loopback


@pytest.mark.slow
async def test_goal_rounds_keep_the_prefix_and_send_the_status_last(daemons, server) -> None:
    provider = server.provider
    server.script(
        Reply("Round one: reading.", [Call("read_file", {"path": "README.md"})]),
        Reply("Round one done."),
        Reply("Round two done."),
        Reply("Round three done."),
    )
    (daemons.root / "README.md").write_text("# the project\n")
    client = await start(daemons, server)
    agent, sid = await new_session(client)
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=60)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "tidy the parser", "maxRounds": 3})
    assert (await blocked)["params"]["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    requests = [r.json for r in server.wait_requests(4)]
    sent = [blocks(body, provider) for body in requests]
    statuses = [status_of(parts[-1], provider) for parts in sent]
    # The status is the last thing sent, and it is the only thing that moves.
    assert [s.splitlines()[0].split(". ", 1)[1] for s in statuses] == [
        "Rounds: 1 of 3 started, 2 left.", "Rounds: 1 of 3 started, 2 left.",
        "Rounds: 2 of 3 started, 1 left.", "Rounds: 3 of 3 started, 0 left.",
    ]  # fmt: skip
    for before, after in zip(sent, sent[1:]):
        kept = before[:-1]
        assert after[: len(kept)] == kept, "a request changed bytes the one before it sent"
        assert len(after) > len(before)
    for body, status in zip(requests, statuses):
        stable = json.dumps({k: v for k, v in body.items() if k != "messages"}) + json.dumps(body["messages"][:-1])
        assert "Rounds:" not in stable and "Current goal: tidy the parser" in stable and status.startswith("Goal g-")
        assert body["tools"] == requests[0]["tools"]
    # Control: the status is in the request (as the model's context), just not in the prefix.
    headers = of_type(read_log(daemons.root, sid), "request/header")
    assert all({"goal:objective", "goal:status"} <= set(h["data"]["sections"]) for h in headers) and len(headers) == 4
