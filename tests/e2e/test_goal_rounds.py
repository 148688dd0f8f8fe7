"""``dsh/goal/rounds`` on the real daemon over stdio: one record per round of the current
goal, folded from the log: its turn, times, tokens, tool calls, the time it waited for a
person and how it ended ("running" while its turn is open). Every result is read strictly
with the wire types."""

from __future__ import annotations

import asyncio

import pytest
from dshd_protocol import METHODS, from_wire

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, ref_of

ROUNDS = "dsh/goal/rounds"


async def rounds_of(client, agent: str) -> dict:
    result = await client.request(ROUNDS, {"agentId": agent})
    from_wire(METHODS[ROUNDS].result, result)
    return result


def edit_call(usage: dict) -> dict:
    return {
        "toolCalls": [{"name": "edit_file", "arguments": {"path": "app.py", "oldText": "hi", "newText": "hello"}}],
        "usage": usage,
    }


@pytest.mark.slow
async def test_rounds_record_each_round_its_tokens_calls_and_the_wait_for_a_person(workspace, daemons) -> None:
    daemons.trusted = True
    write_workspace(
        workspace,
        [
            edit_call({"inputTokens": 1000, "outputTokens": 40}),  # round 1, step 1: asks the person
            {"text": "round 1 done", "usage": {"inputTokens": 1200, "outputTokens": 30}},
            {"text": "round 2 done", "usage": {"inputTokens": 1300, "outputTokens": 20}},  # round 2
        ],
        plugins=["plan", "goals", "tools"],
        extra_config='\n[tools]\napprove = ["write"]\n',
    )
    (workspace / "app.py").write_text("print('hi')\n")
    asked, release = asyncio.Event(), asyncio.Event()

    async def person(params: dict) -> dict:
        asked.set()
        await release.wait()
        return {"outcome": "allow-once"}

    client = await daemons.start(approve=person)
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]

    # No goal yet: nothing to show (and no error).
    assert await rounds_of(client, agent) == {"goalId": None, "rounds": []}

    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=20)
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "say hello", "maxRounds": 2})
    await asyncio.wait_for(asked.wait(), 10)

    # Round 1 is open and waits for the person: "running", no end, its call counted.
    during = await rounds_of(client, agent)
    assert during["goalId"] == goal["id"]
    [open_round] = during["rounds"]
    assert open_round["round"] == 1 and open_round["outcome"] == "running" and "endedAt" not in open_round
    assert open_round["toolCalls"] == 1 and open_round["revision"] == goal["revision"]
    assert open_round["tokens"] == {"input": 1000, "cachedInput": 0, "output": 40}

    await asyncio.sleep(0.4)  # the person takes their time
    release.set()
    spent = (await blocked)["params"]["goal"]
    assert spent["blockedReason"]["code"] == "round-budget-exhausted"

    result = await rounds_of(client, agent)
    first, second = result["rounds"]
    events = read_log(workspace, sid)
    round_messages = [e for e in of_type(events, "user/message") if "goalRound" in e["data"]]
    closes = {e["turn"]: e for e in of_type(events, "turn/close")}
    opens = {e["turn"]: e for e in of_type(events, "turn/open")}
    assert [r["turn"] for r in result["rounds"]] == [m["turn"] for m in round_messages]
    for record in result["rounds"]:
        assert record["startedAt"] == opens[record["turn"]]["at"]
        assert record["endedAt"] == closes[record["turn"]]["at"]
        assert record["outcome"] == "end-turn" == closes[record["turn"]]["data"]["stopReason"]
        assert "estimated" not in record  # the scripted model reported its usage
    assert first["round"] == 1 and second["round"] == 2
    assert first["tokens"] == {"input": 2200, "cachedInput": 0, "output": 70}
    assert second["tokens"] == {"input": 1300, "cachedInput": 0, "output": 20}
    assert first["toolCalls"] == 1 and second["toolCalls"] == 0
    # The wait is the person's time (about 0.4 s here); round 2 asked nobody.
    assert 350 <= first["waitedMs"] < 10_000 and second["waitedMs"] == 0
    # The rounds' tokens are the goal's: the same counting as the budget.
    assert sum(r["tokens"]["input"] + r["tokens"]["output"] for r in result["rounds"]) == spent["tokensUsed"]

    # After a clear there is no current goal: nothing again.
    view = await client.request("dsh/goal/get", {"agentId": agent})
    await client.request("dsh/goal/clear", {"agentId": agent, "ref": ref_of(view)})
    assert await rounds_of(client, agent) == {"goalId": None, "rounds": []}


async def test_rounds_of_an_unknown_agent_is_a_clear_error(daemons) -> None:
    from pygls.exceptions import JsonRpcException

    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    # Control: the agent the daemon issued is answered.
    assert (await rounds_of(client, created["agentId"]))["rounds"] == []
    with pytest.raises(JsonRpcException) as unknown:
        await client.request(ROUNDS, {"agentId": "a-never-issued"})
    assert unknown.value.data["kind"] == "unknown-agent"
    with pytest.raises(JsonRpcException) as bad:
        await client.request(ROUNDS, {"agentId": 7})
    assert bad.value.code == -32602 and bad.value.data == {"kind": "invalid-params", "field": "agentId"}


@pytest.fixture(params=["openai", "anthropic"])
def loopback(request):
    from loopback_models import LoopbackModelServer

    with LoopbackModelServer(request.param) as server:
        yield server


@pytest.mark.slow
async def test_rounds_carry_the_providers_cached_tokens_and_estimates(daemons, loopback) -> None:
    """Through each real SDK to a server reporting usage as the real API does: round 1's
    cached input is the provider's figure; round 2's server reports none, so its tokens
    are estimates (characters/4) and the round says so."""
    from loopback_models import Reply

    from .test_providers import new_session, start

    loopback.script(Reply("round 1 done", usage=(2400, 12), cached=2000), Reply("round 2 done " * 50, usage=None))
    client = await start(daemons, loopback)
    agent, _sid = await new_session(client)
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=60)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 2})
    spent = (await blocked)["params"]["goal"]
    first, second = (await rounds_of(client, agent))["rounds"]
    assert first["tokens"] == {"input": 2400, "cachedInput": 2000, "output": 12} and "estimated" not in first
    assert second["estimated"] is True and second["tokens"]["cachedInput"] == 0
    assert second["tokens"]["output"] >= len("round 2 done " * 50) // 4
    total = sum(r["tokens"]["input"] + r["tokens"]["output"] for r in (first, second))
    assert total == spent["tokensUsed"] and spent["tokensEstimated"] is True


@pytest.mark.slow
async def test_a_plan_review_in_a_round_is_time_waited_for_the_person(workspace, daemons) -> None:
    plan = {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": "# Plan\n\n1. Cache.\n"}}]}
    write_workspace(workspace, [plan, {"text": "planned"}])

    async def person(params: dict) -> dict:
        await asyncio.sleep(0.4)  # reading the plan
        return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}

    client = await daemons.start(answer=person)
    created = await client.request("dsh/session/create", {})
    agent = created["agentId"]
    await client.request("dsh/plan/set", {"agentId": agent, "active": True})
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=20)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "plan it", "maxRounds": 1})
    await blocked
    [record] = (await rounds_of(client, agent))["rounds"]
    assert record["toolCalls"] == 1 and record["outcome"] == "end-turn"
    assert 350 <= record["waitedMs"] < 10_000
