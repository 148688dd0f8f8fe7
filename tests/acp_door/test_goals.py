"""Goals over ACP: the ``_session/goal`` extension method with dshd's compare-and-set
refs, and ``session_info_update`` with ``_meta.goal`` on every change (round starts
included) so a client can show the budget. Each test runs with both SDK clients."""

from __future__ import annotations

import asyncio

import pytest

from tests.acp_door.clients import AcpError
from tests.acp_door.support import idle, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, ref_of as ref


def goal_told(client, sid: str) -> list[tuple[str, int]]:
    return [
        (u["_meta"]["goalChange"]["op"], u["_meta"]["goalChange"]["revision"])
        for u in client.of_kind("session_info_update", sid)
        if "goalChange" in u.get("_meta", {})
    ]


def rounds(events: list[dict]) -> list[int]:
    return [e["data"]["goalRound"]["round"] for e in of_type(events, "user/message") if "goalRound" in e["data"]]


async def test_set_pause_resume_complete_clear_with_refs(clients):
    write_workspace(
        clients.workspace,
        [{"text": "round one", "delayMs": 1500}, {"toolCalls": [tool_call("goal_complete")]}, {"text": "goal is done"}],
    )
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    objective = "Make the parser tests pass"

    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": objective, "maxRounds": 3}))["goal"]
    assert (goal["objective"], goal["phase"], goal["revision"], goal["activation"]) == (objective, "active", 1, "armed")
    await wait_log(clients.workspace, sid, lambda events: rounds(events) == [1])

    paused = (await client.goal({"sessionId": sid, "action": "pause", "ref": ref(goal)}))["goal"]
    assert (paused["phase"], paused["revision"], paused["activation"]) == ("paused", 2, "disarmed")
    events = await wait_log(clients.workspace, sid, idle)
    await asyncio.sleep(0.5)
    assert rounds(read_log(clients.workspace, sid)) == [1]  # paused: no next round

    resumed = (await client.goal({"sessionId": sid, "action": "resume", "ref": ref(paused)}))["goal"]
    assert (resumed["phase"], resumed["revision"], resumed["activation"]) == ("active", 3, "armed")
    # Round 2: the model reports the goal complete through its tool, with the same refs.
    events = await wait_log(
        clients.workspace, sid, lambda events: idle(events) and any(e["data"].get("op") == "complete" for e in of_type(events, "goal/change"))
    )
    assert rounds(events) == [1, 2]

    with pytest.raises(AcpError) as err:
        await client.goal({"sessionId": sid, "action": "pause", "ref": ref(resumed)})
    assert err.value.code == -32003
    assert err.value.data == {"kind": "stale-revision", "current": 4, "goalId": goal["id"]}

    cleared = await client.goal({"sessionId": sid, "action": "clear", "ref": {"id": goal["id"], "revision": 4}})
    assert cleared == {"goal": None, "ref": {"id": goal["id"], "revision": 5}}
    await client.wait_update(lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "clear")

    assert goal_told(client, sid) == [
        ("create", 1),
        ("round", 1),
        ("pause", 2),
        ("resume", 3),
        ("round", 3),
        ("complete", 4),
        ("clear", 5),
    ]
    infos = [u["_meta"] for u in client.of_kind("session_info_update", sid) if "goalChange" in u.get("_meta", {})]
    first_round = infos[1]["goal"]
    assert (first_round["roundsStarted"], first_round["roundsLeft"], first_round["maxRounds"]) == (1, 2, 3)
    assert infos[-1]["goal"] is None
    assert [e["data"]["op"] for e in of_type(read_log(clients.workspace, sid), "goal/change")] == [
        "create",
        "pause",
        "resume",
        "complete",
        "clear",
    ]


async def test_budget_block_edit_and_explicit_block(clients):
    # Round 1 is quick; round 2 (after the resume) is slow, so the pause lands during it.
    write_workspace(clients.workspace, [{"text": "round one"}, {"text": "round two", "delayMs": 5000}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]

    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": "Tidy the docs", "maxRounds": 1}))["goal"]
    blocked = (
        await client.wait_update(lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "block")
    )["update"]["_meta"]["goal"]
    assert blocked["phase"] == "blocked" and blocked["blockedReason"]["code"] == "round-budget-exhausted"
    assert (blocked["roundsStarted"], blocked["roundsLeft"]) == (1, 0)

    with pytest.raises(AcpError) as err:
        await client.goal({"sessionId": sid, "action": "resume", "ref": ref(blocked)})
    assert err.value.data["kind"] == "budget-exhausted"

    edited = (await client.goal({"sessionId": sid, "action": "edit", "ref": ref(blocked), "maxRounds": 5}))["goal"]
    assert (edited["maxRounds"], edited["phase"], edited["revision"]) == (5, "blocked", goal["revision"] + 2)
    # A person blocks with their own reason (the goal is paused first: block takes active or paused).
    resumed = (await client.goal({"sessionId": sid, "action": "resume", "ref": ref(edited)}))["goal"]
    paused = (await client.goal({"sessionId": sid, "action": "pause", "ref": ref(resumed)}))["goal"]
    reason = {"code": "needs-review", "message": "wait for the docs review"}
    mine = (await client.goal({"sessionId": sid, "action": "block", "ref": ref(paused), "reason": reason}))["goal"]
    assert mine["phase"] == "blocked" and mine["blockedReason"] == reason
    done = (await client.goal({"sessionId": sid, "action": "complete", "ref": ref(mine)}))["goal"]
    assert done["phase"] == "complete" and done["revision"] == mine["revision"] + 1


async def test_goal_params_are_checked(clients):
    write_workspace(clients.workspace, [{"text": "a slow first round", "delayMs": 5000}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    good_ref = {"id": "g-0000000000000000", "revision": 1}
    cases = [
        ({"sessionId": sid, "action": "explode"}, "action"),
        ({"action": "set", "objective": "x"}, "sessionId"),
        ({"sessionId": sid, "action": "pause"}, "ref"),
        ({"sessionId": sid, "action": "set"}, "objective"),
        ({"sessionId": sid, "action": "set", "objective": "x", "ref": good_ref}, "ref"),
        ({"sessionId": sid, "action": "block", "ref": good_ref}, "reason"),
        ({"sessionId": sid, "action": "pause", "ref": {"id": "g-1", "revision": "2"}}, "ref.revision"),
        ({"sessionId": sid, "action": "set", "objective": "x", "maxRounds": True}, "maxRounds"),
        ({"sessionId": sid, "action": "set", "objective": "x", "force": True}, "force"),
        ({"sessionId": sid, "action": "set", "objective": "x", "maxRounds": 0}, "maxRounds"),
        ({"sessionId": "s-00000000000000000000000000", "action": "set", "objective": "x"}, "sessionId"),
    ]
    for params, field in cases:
        with pytest.raises(AcpError) as err:
            await client.goal(params)
        assert (err.value.code, err.value.data.get("field")) == (-32602, field), params

    # While round 1 runs (slowly) the goal stays at revision 1.
    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": "x", "maxRounds": 1}))["goal"]
    with pytest.raises(AcpError) as err:
        bad = {"code": "Not Kebab", "message": "m"}
        await client.goal({"sessionId": sid, "action": "block", "ref": ref(goal), "reason": bad})
    assert err.value.data == {"kind": "invalid-params", "field": "reason.code"}
    with pytest.raises(AcpError) as err:
        await client.goal({"sessionId": sid, "action": "pause", "ref": {"id": "g-other", "revision": 1}})
    assert err.value.data["kind"] == "stale-revision"


async def test_token_budgets_and_usage(clients):
    write_workspace(
        clients.workspace,
        [{"text": "one round", "usage": {"inputTokens": 300, "outputTokens": 50}}],
        extra_config="contextWindow = 4000\n",  # appended to the [model] table
    )
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]

    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": "Count", "maxRounds": 1, "maxTokens": 5000}))["goal"]
    assert (goal["maxTokens"], goal["tokensUsed"]) == (5000, 0)
    blocked = (
        await client.wait_update(lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "block")
    )["update"]["_meta"]["goal"]
    assert blocked["tokensUsed"] == 350  # the round's usage counts towards the goal
    [usage] = client.of_kind("usage_update", sid)
    assert (usage["used"], usage["size"]) == (350, 4000)
    edited = (await client.goal({"sessionId": sid, "action": "edit", "ref": ref(blocked), "maxTokens": 9000}))["goal"]
    assert edited["maxTokens"] == 9000
    with pytest.raises(AcpError) as err:
        await client.goal({"sessionId": sid, "action": "edit", "ref": ref(edited), "maxTokens": "lots"})
    assert err.value.data["field"] == "maxTokens"
