"""Sessions over the wire: restart with a goal in flight (G-7), reload and stale agents
(G-10), notification scoping (G-11, SPEC 6), and fork (PM-7, G-1).

Every test runs the real ``dshd serve``; the truth is read back from the results, the
notifications and the session logs on disk.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import attrs
import pytest
from pygls.exceptions import JsonRpcException

from dshd_protocol import METHODS
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log, ref_of, wait_idle


def goal_rounds(events: list[dict]) -> list[dict]:
    return [e["data"]["goalRound"] for e in of_type(events, "user/message") if "goalRound" in e["data"]]


def notes(client, method: str, agent: str | None = None) -> list[dict]:
    return [
        n["params"]
        for n in client.notifications
        if n["method"] == method and (agent is None or n["params"]["agentId"] == agent)
    ]


def goal_op(op: str, agent: str, **goal_fields):
    def match(n: dict) -> bool:
        p = n["params"]
        if n["method"] != "dsh/goal/changed" or p["agentId"] != agent or p["op"] != op:
            return False
        return all(p.get("goal", {}).get(k) == v for k, v in goal_fields.items())

    return match


async def expect_error(kind: str, request) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await request
    assert info.value.data["kind"] == kind, info.value.data
    return info.value


# ---- restart ------------------------------------------------------------------------


@pytest.mark.slow
async def test_restart_mid_round_loads_disarmed_and_resume_continues_the_rounds(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"text": "round 1 done"},
            {"text": "round 2 done"},
            {"text": "round 3 never finishes", "delayMs": 60_000},
        ],
    )
    client = await daemons.start()
    created = await client.request("dsh/session/create", {"title": "restart"})
    agent, session_id = created["agentId"], created["sessionId"]
    in_round_3 = client.wait_for(
        lambda n: n["method"] == "dsh/session/event"
        and n["params"]["event"]["type"] == "request/header"
        and n["params"]["event"].get("turn") == 3,
        timeout=5,
    )
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Ship retries", "maxRounds": 10})
    assert goal["activation"] == "armed" and goal["revision"] == 1
    await in_round_3
    assert await client.stop() == 0  # shutdown + exit while round 3's model call runs

    before = read_log(workspace, session_id)
    assert before[-1]["type"] == "request/header" and before[-1]["turn"] == 3  # left open
    assert [r["round"] for r in goal_rounds(before)] == [1, 2, 3]

    write_workspace(
        workspace,
        replies=[{"text": "round 4 done"}, {"toolCalls": [{"name": "goal_complete", "arguments": {}}]}],
    )
    client = await daemons.start()
    opened = await client.request("dsh/session/open", {"sessionId": session_id})
    agent = opened["agentId"]
    assert agent != created["agentId"]
    goal = opened["goal"]
    assert goal["phase"] == "active"
    assert goal["activation"] == "disarmed"
    assert goal["roundsStarted"] == 3 and goal["roundsLeft"] == 7 and goal["revision"] == 1
    assert opened["plan"] == {"active": False}

    # The load closed the turn the dead process left open, and wrote nothing else.
    after_open = read_log(workspace, session_id)
    assert after_open[: len(before)] == before
    [closed] = after_open[len(before) :]
    assert closed["type"] == "turn/close"
    assert closed["data"] == {"turn": 3, "stopReason": "interrupted"}
    # Nothing starts by itself (G-7).
    await asyncio.sleep(1.0)
    assert read_log(workspace, session_id) == after_open
    assert not notes(client, "dsh/goal/changed")
    assert (await client.request("dsh/goal/get", {"agentId": agent}))["activation"] == "disarmed"

    # The person resumes: the active goal re-arms without a durable change, and the
    # rounds go on from 4.
    completed = client.wait_for(goal_op("complete", agent), timeout=5)
    resumed = await client.request("dsh/goal/resume", {"agentId": agent, "ref": ref_of(goal)})
    assert resumed["activation"] == "armed" and resumed["revision"] == 1
    arm = notes(client, "dsh/goal/changed", agent)[0]
    assert arm["op"] == "arm" and arm["revision"] == 1
    done = await completed
    assert done["params"]["goal"]["phase"] == "complete"
    assert done["params"]["revision"] == 2
    await wait_idle(client, agent)

    events = read_log(workspace, session_id)
    new = events[len(after_open) :]
    assert [r["round"] for r in goal_rounds(new)] == [4, 5]
    assert all(r["revision"] == 1 and r["goalId"] == goal["id"] for r in goal_rounds(new))
    assert [e["data"]["turn"] for e in of_type(new, "turn/open")] == [4, 5]
    assert [n["op"] for n in notes(client, "dsh/goal/changed", agent)] == ["arm", "round", "round", "complete"]
    assert [n["goal"]["roundsStarted"] for n in notes(client, "dsh/goal/changed", agent)] == [3, 4, 5, 5]


# ---- reload and stale agents ------------------------------------------------------------

# Valid params (besides agentId) for every method that addresses an agent, so that the
# only thing wrong with each request is the agent.
AGENT_METHOD_PARAMS = {
    "dsh/session/fork": {},
    "dsh/session/close": {},
    "dsh/session/events": {"afterSeq": 0},
    "dsh/agent/prompt": {"text": "hello"},
    "dsh/agent/steer": {"text": "hello"},
    "dsh/agent/cancel": {},
    "dsh/plan/set": {"active": True},
    "dsh/plan/get": {},
    "dsh/plan/history": {},
    "dsh/goal/get": {},
    "dsh/goal/create": {"objective": "x"},
    "dsh/goal/edit": {"ref": {"id": "g-1", "revision": 1}, "objective": "y"},
    "dsh/goal/pause": {"ref": {"id": "g-1", "revision": 1}},
    "dsh/goal/resume": {"ref": {"id": "g-1", "revision": 1}},
    "dsh/goal/complete": {"ref": {"id": "g-1", "revision": 1}},
    "dsh/goal/block": {"ref": {"id": "g-1", "revision": 1}, "reason": {"code": "c", "message": "m"}},
    "dsh/goal/clear": {"ref": {"id": "g-1", "revision": 1}},
    "dsh/goal/disarm": {},
    "dsh/goal/rounds": {},
    "dsh/permission/get": {},
    "dsh/permission/set": {"sandbox": "read-only"},
    "dsh/chat/get": {},
    "dsh/checkpoint/list": {},
    "dsh/checkpoint/diff": {"seq": 1},
    "dsh/checkpoint/restore": {"seq": 1},
}


def test_the_stale_agent_table_covers_every_agent_method():
    addressed = {
        name
        for name, spec in METHODS.items()
        if spec.kind == "request" and any(f.name == "agent_id" for f in attrs.fields(spec.params))
    }
    assert addressed == set(AGENT_METHOD_PARAMS)


async def test_reload_issues_a_new_agent_and_the_old_one_is_stale(workspace, daemons):
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    old, session_id = created["agentId"], created["sessionId"]
    await client.request("dsh/plan/set", {"agentId": old, "active": True})

    # Open without reload: the same live agent.
    same = await client.request("dsh/session/open", {"sessionId": session_id})
    assert same["agentId"] == old
    assert same["plan"] == {"active": True} and same["goal"] is None

    reloaded = await client.request("dsh/session/open", {"sessionId": session_id, "reload": True})
    new = reloaded["agentId"]
    assert new != old and reloaded["sessionId"] == session_id
    assert reloaded["plan"] == {"active": True}  # from the log alone (PM-7)
    log_before = read_log(workspace, session_id)

    never_issued = "a-0123456789abcdef"
    for method, params in AGENT_METHOD_PARAMS.items():
        await expect_error("stale-agent", client.request(method, {"agentId": old, **params}))
        await expect_error("unknown-agent", client.request(method, {"agentId": never_issued, **params}))
    assert read_log(workspace, session_id) == log_before  # nothing written for either

    # The new agent serves, and only it hears about its changes: the old agent's
    # listeners went with it.
    old_notes = [n for n in client.notifications if n["params"]["agentId"] == old]
    assert await client.request("dsh/plan/get", {"agentId": new}) == {"active": True}
    assert (await client.request("dsh/plan/set", {"agentId": new, "active": False}))["outcome"] == "committed"
    assert await client.request("dsh/agent/prompt", {"agentId": new, "text": "hi"}) == {"turn": 1, "stopReason": "end-turn"}
    assert [n for n in client.notifications if n["params"]["agentId"] == old] == old_notes
    streamed = [n["params"]["event"]["seq"] for n in client.notifications
                if n["method"] == "dsh/session/event" and n["params"]["agentId"] == new]
    assert streamed == list(range(len(log_before) + 1, len(read_log(workspace, session_id)) + 1))
    # A second reload makes the new agent stale too.
    again = await client.request("dsh/session/open", {"sessionId": session_id, "reload": True})
    assert again["agentId"] not in (old, new)
    await expect_error("stale-agent", client.request("dsh/plan/get", {"agentId": new}))
    # A closed agent is stale as well, and its session opens again with a fresh id.
    assert await client.request("dsh/session/close", {"agentId": again["agentId"]}) is None
    await expect_error("stale-agent", client.request("dsh/goal/get", {"agentId": again["agentId"]}))
    reopened = await client.request("dsh/session/open", {"sessionId": session_id})
    assert reopened["agentId"] not in (old, new, again["agentId"])


# ---- notification scoping --------------------------------------------------------------


async def test_notifications_are_scoped_per_agent_and_follow_the_log(workspace, daemons):
    write_workspace(workspace, replies=[{"text": "reply"}] * 4)
    client = await daemons.start()
    a = await client.request("dsh/session/create", {"title": "A"})
    b = await client.request("dsh/session/create", {"title": "B"})
    by_agent = {a["agentId"]: a["sessionId"], b["agentId"]: b["sessionId"]}

    # Durable first: when a goal/changed for a write arrives, its event is on disk.
    on_disk_when_notified: list[bool] = []

    def check_durable(note: dict) -> None:
        params = note["params"]
        if note["method"] != "dsh/goal/changed" or params["op"] in ("round", "arm", "disarm"):
            return
        # The write this notice is about must be on disk; later writes may be too (the
        # client reads the log when it gets to the notice, and A's goal goes on working
        # meanwhile: its round and block can already be there), so look for this one.
        changes = [e["data"] for e in of_type(read_log(workspace, by_agent[params["agentId"]]), "goal/change")]
        if params["op"] == "clear":
            found = any((c.get("cleared") or {}).get("revision") == params["revision"] - 1 for c in changes)
        else:
            found = any((c.get("goal") or {}).get("revision") == params["revision"] for c in changes)
        on_disk_when_notified.append(found)

    client.listeners.append(check_durable)

    # A: a goal with a budget of one round: create, the round, then the budget block.
    blocked = client.wait_for(goal_op("block", a["agentId"]), timeout=5)
    goal = await client.request("dsh/goal/create", {"agentId": a["agentId"], "objective": "A's goal", "maxRounds": 1})
    # Durable first: the notification of a write arrives before the write's response.
    create_notes = [n for n in notes(client, "dsh/goal/changed", a["agentId"]) if n["op"] == "create"]
    assert create_notes and create_notes[0]["revision"] == goal["revision"] == 1
    assert create_notes[0]["goal"] == goal
    note = await blocked
    assert note["params"]["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    await wait_idle(client, a["agentId"], timeout=30)

    # B: plan mode on, a prompt, and goal writes each checked for notify-before-respond.
    await client.request("dsh/plan/set", {"agentId": b["agentId"], "active": True})
    assert notes(client, "dsh/plan/changed", b["agentId"]) == [
        {"agentId": b["agentId"], "sessionId": b["sessionId"], "active": True}
    ]
    assert await client.request("dsh/agent/prompt", {"agentId": b["agentId"], "text": "hi B"}) == {
        "turn": 1,
        "stopReason": "end-turn",
    }
    goal_b = await client.request("dsh/goal/create", {"agentId": b["agentId"], "objective": "B's goal"})
    goal_b = await client.request("dsh/goal/pause", {"agentId": b["agentId"], "ref": ref_of(goal_b)})
    # The pause may land after the first round started; the last write's notice is ours.
    assert notes(client, "dsh/goal/changed", b["agentId"])[-1]["op"] == "pause"
    await wait_idle(client, b["agentId"], timeout=30)  # a round may be running: slow under load
    for op, params in [
        ("edit", {"ref": ref_of(goal_b), "maxRounds": 9}),
        ("block", None),
        ("clear", None),
    ]:
        if params is None:
            current = await client.request("dsh/goal/get", {"agentId": b["agentId"]})
            params = {"ref": ref_of(current)}
            if op == "block":
                params["reason"] = {"code": "needs-review", "message": "a person must look"}
        result = await client.request(f"dsh/goal/{op}", {"agentId": b["agentId"], **params})
        last = notes(client, "dsh/goal/changed", b["agentId"])[-1]
        assert last["op"] == op, f"{op}: no notification before the response"
        if op == "clear":
            assert "goal" not in last and last["revision"] == result["ref"]["revision"]
        else:
            assert last["goal"] == result and last["revision"] == result["revision"]

    # create, block (A); create, pause, edit, block, clear (B)
    assert on_disk_when_notified == [True] * 7

    # Every notification names one agent and that agent's session, never the other's.
    for n in client.notifications:
        assert by_agent[n["params"]["agentId"]] == n["params"]["sessionId"]
    assert not notes(client, "dsh/plan/changed", a["agentId"])
    assert [n["op"] for n in notes(client, "dsh/goal/changed", a["agentId"])] == ["create", "round", "block"]

    # dsh/session/event: every committed event after session/start, in order, per agent.
    for handle in (a, b):
        streamed = [n["event"] for n in notes(client, "dsh/session/event", handle["agentId"])]
        stored = (await client.request("dsh/session/events", {"agentId": handle["agentId"]}))["events"]
        assert stored[0]["type"] == "session/start"
        assert streamed == stored[1:]
        assert streamed == read_log(workspace, handle["sessionId"])[1:]
        assert [e["seq"] for e in streamed] == list(range(2, len(stored) + 1))


# ---- fork ----------------------------------------------------------------------------


def expected_state(events: list[dict], at_seq: int) -> tuple[bool, dict | None]:
    """Plan mode and the goal after the first ``at_seq`` events, derived here from the
    log itself: the last plan/mode; the last goal snapshot plus the rounds started after it."""
    prefix = events[:at_seq]
    modes = of_type(prefix, "plan/mode")
    plan = modes[-1]["data"]["active"] if modes else False
    changes = of_type(prefix, "goal/change")
    if not changes or changes[-1]["data"]["op"] == "clear":
        return plan, None
    last = changes[-1]
    snapshot = last["data"]
    rounds = snapshot["roundsStarted"] + len(goal_rounds([e for e in prefix if e["seq"] > last["seq"]]))
    goal = {
        **snapshot["goal"],
        "roundsStarted": rounds,
        "roundsLeft": snapshot["goal"]["maxRounds"] - rounds,
        "tokensUsed": snapshot["tokensUsed"],  # no reply of this script reports usage
        "createdAt": snapshot["createdAt"],
        "updatedAt": snapshot["updatedAt"],
        "activation": "disarmed",
    }
    return plan, goal


@pytest.mark.slow
async def test_fork_at_every_seq_folds_to_the_sources_state(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"text": "round 1"},
            {"toolCalls": [{"name": "goal_complete", "arguments": {}}]},  # round 2 completes it
            {"text": "after the tool"},
        ],
    )
    client = await daemons.start()
    src = await client.request("dsh/session/create", {"title": "source"})
    agent, session_id = src["agentId"], src["sessionId"]
    await client.request("dsh/plan/set", {"agentId": agent, "active": True})
    completed = client.wait_for(goal_op("complete", agent), timeout=5)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "Fork me", "maxRounds": 5})
    await completed
    await wait_idle(client, agent)
    await client.request("dsh/plan/set", {"agentId": agent, "active": False})
    # A second goal spends its two rounds (script exhausted: one step each), is blocked
    # by the budget, edited, and cleared: every kind of goal event is in the source.
    blocked = client.wait_for(goal_op("block", agent), timeout=5)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "Second", "maxRounds": 2})
    second = (await blocked)["params"]["goal"]
    await wait_idle(client, agent)
    second = await client.request("dsh/goal/edit", {"agentId": agent, "ref": ref_of(second), "maxRounds": 4})
    await client.request("dsh/goal/clear", {"agentId": agent, "ref": ref_of(second)})
    source = await wait_idle(client, agent)
    assert source == read_log(workspace, session_id)
    ops = [e["data"]["op"] for e in of_type(source, "goal/change")]
    assert ops == ["create", "complete", "create", "block", "edit", "clear"]
    assert [e["data"]["active"] for e in of_type(source, "plan/mode")] == [True, False]

    for at_seq in range(1, len(source) + 1):
        fork = await client.request("dsh/session/fork", {"agentId": agent, "atSeq": at_seq})
        assert fork["sessionId"] != session_id and fork["agentId"] != agent
        plan, goal = expected_state(source, at_seq)
        assert await client.request("dsh/plan/get", {"agentId": fork["agentId"]}) == {"active": plan}, at_seq
        got = await client.request("dsh/goal/get", {"agentId": fork["agentId"]})
        if got is not None:
            # The words people read are the daemon's own (tests/api/test_goal_status.py checks
            # them per phase); the fold's part must equal the one derived from the log.
            assert got.pop("status")["text"] and got.pop("actions") is not None, at_seq
        assert got == goal, at_seq

        forked = read_log(workspace, fork["sessionId"])
        start = forked[0]
        assert start["type"] == "session/start"
        assert start["data"]["forkedFrom"] == {"sessionId": session_id, "seq": at_seq}
        assert start["data"]["sessionId"] == fork["sessionId"]
        # The prefix is the source's, event for event (new `at` stamps).
        strip = lambda e: {k: v for k, v in e.items() if k != "at"}  # noqa: E731
        assert [strip(e) for e in forked[1:at_seq]] == [strip(e) for e in source[1:at_seq]]
        # A cut inside a turn closes it in the fork, and nothing else is added.
        extra = forked[at_seq:]
        assert all(e["type"] in ("tool/result", "turn/close") for e in extra)
        if extra:
            assert extra[-1]["data"]["stopReason"] == "forked"
        # The fork is a live, independent session; the source is untouched.
        await client.request("dsh/session/close", {"agentId": fork["agentId"]})
    assert read_log(workspace, session_id) == source
    forked_ids = [s for s in (await client.request("dsh/session/list", {}))["sessions"] if s["sessionId"] != session_id]
    assert len(forked_ids) == len(source)
