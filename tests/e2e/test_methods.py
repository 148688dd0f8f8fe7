"""Every dsh/* request's happy path against the real daemon (SPEC 6).

Each result is read strictly with ``from_wire(METHODS[m].result, ...)`` (no unknown
field, no missing one, no wrong type) and its values are checked against the
notifications and the session log on disk.
"""

from __future__ import annotations

import pytest

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from dshd_protocol import METHODS, from_wire, is_session_id

from .conftest import write_workspace
from .support import read_log, ref_of


async def call(client, method: str, params: dict) -> Any:
    """The request's result, checked against the method's result type."""
    result = await client.request(method, params)
    from_wire(METHODS[method].result, result)
    return result


def types_of(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def is_event(method_type: str, agent: str | None = None, **data: Any):
    """Predicate for a dsh/session/event notification of that event type (and data)."""

    def pred(note: dict) -> bool:
        if note["method"] != "dsh/session/event":
            return False
        params = note["params"]
        if agent is not None and params["agentId"] != agent:
            return False
        event = params["event"]
        return event["type"] == method_type and all(event["data"].get(k) == v for k, v in data.items())

    return pred


def goal_note(op: str, agent: str | None = None):
    def pred(note: dict) -> bool:
        params = note["params"]
        return note["method"] == "dsh/goal/changed" and params["op"] == op and (agent is None or params["agentId"] == agent)

    return pred


def watch_durability(client, root: Path, session_id: str) -> list[str]:
    """Check, as each notification arrives, that what it reports is already on disk
    (G-11: sent after the event is durable). Returns the list of violations (kept empty)."""
    violations: list[str] = []
    durable_ops = {"create", "edit", "pause", "resume", "complete", "block", "clear"}

    def check(note: dict) -> None:
        params = note["params"]
        if params.get("sessionId") != session_id:
            return
        on_disk = read_log(root, session_id)
        if note["method"] == "dsh/session/event":
            event = params["event"]
            if event not in on_disk:
                violations.append(f"event seq {event['seq']} notified before it was on disk")
        elif note["method"] == "dsh/goal/changed" and params["op"] in durable_ops:
            revisions = {
                e["data"]["goal"]["revision"] if "goal" in e["data"] else e["data"]["cleared"]["revision"] + 1
                for e in on_disk
                if e["type"] == "goal/change"
            }
            if params["revision"] not in revisions:
                violations.append(f"goal/changed {params['op']} r{params['revision']} before its event was on disk")

    client.listeners.append(check)
    return violations


# ---- sessions -------------------------------------------------------------------------


async def test_session_create_list_events(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "hello back"}])
    client = await daemons.start()
    alpha = await call(client, "dsh/session/create", {"title": "alpha"})
    untitled = await call(client, "dsh/session/create", {})
    assert is_session_id(alpha["sessionId"]) and is_session_id(untitled["sessionId"])
    assert alpha["sessionId"] != untitled["sessionId"] and alpha["agentId"] != untitled["agentId"]
    start = read_log(workspace, alpha["sessionId"])[0]
    assert start["seq"] == 1 and start["type"] == "session/start"
    assert start["data"]["sessionId"] == alpha["sessionId"] and start["data"]["formatVersion"] == 1

    listed = await call(client, "dsh/session/list", {})
    by_id = {s["sessionId"]: s for s in listed["sessions"]}
    assert set(by_id) == {alpha["sessionId"], untitled["sessionId"]}
    assert by_id[alpha["sessionId"]]["title"] == "alpha"
    assert by_id[untitled["sessionId"]]["title"] is None
    assert "goal" not in by_id[alpha["sessionId"]]

    agent = alpha["agentId"]
    violations = watch_durability(client, workspace, alpha["sessionId"])
    result = await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "hello"})
    assert result == {"turn": 1, "stopReason": "end-turn"}

    everything = await call(client, "dsh/session/events", {"agentId": agent})
    on_disk = read_log(workspace, alpha["sessionId"])
    assert everything["events"] == on_disk  # the wire events are the log lines
    assert types_of(on_disk) == [
        "session/start", "turn/open", "user/message", "request/header", "assistant/message", "turn/close",
    ]
    assert everything["nextSeq"] == on_disk[-1]["seq"] == 6
    assert on_disk[4]["data"]["text"] == "hello back"

    page = await call(client, "dsh/session/events", {"agentId": agent, "afterSeq": 2, "limit": 2})
    assert [e["seq"] for e in page["events"]] == [3, 4] and page["nextSeq"] == 4
    rest = await call(client, "dsh/session/events", {"agentId": agent, "afterSeq": page["nextSeq"]})
    assert [e["seq"] for e in rest["events"]] == [5, 6] and rest["nextSeq"] == 6
    empty = await call(client, "dsh/session/events", {"agentId": agent, "afterSeq": 6})
    assert empty == {"events": [], "nextSeq": 6}

    # Every committed event was also sent as dsh/session/event, in order, for its agent.
    sent = [n["params"]["event"] for n in client.notifications
            if n["method"] == "dsh/session/event" and n["params"]["agentId"] == agent]
    assert sent == on_disk[1:]
    assert violations == []


async def test_session_open_close_reload(workspace: Path, daemons) -> None:
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {"title": "t"})
    sid, first = created["sessionId"], created["agentId"]

    # Open of a session this daemon holds: the live agent.
    same = await call(client, "dsh/session/open", {"sessionId": sid})
    assert same == {"sessionId": sid, "agentId": first, "plan": {"active": False}, "goal": None, "activity": "idle"}

    await call(client, "dsh/plan/set", {"agentId": first, "active": True})
    reloaded = await call(client, "dsh/session/open", {"sessionId": sid, "reload": True})
    assert reloaded["agentId"] != first and reloaded["sessionId"] == sid
    assert reloaded["plan"] == {"active": True}  # from the log alone (PM-7)
    assert reloaded["goal"] is None

    assert await call(client, "dsh/session/close", {"agentId": reloaded["agentId"]}) is None
    # A closed session opens again with a fresh agent and the state from the log.
    again = await call(client, "dsh/session/open", {"sessionId": sid})
    assert again["agentId"] not in (first, reloaded["agentId"])
    assert again["plan"] == {"active": True}
    assert types_of(read_log(workspace, sid)) == ["session/start", "plan/mode"]


@pytest.mark.slow
async def test_session_fork_inside_and_after_a_turn(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"toolCalls": [{"name": "goal_complete", "arguments": {}}]}, {"text": "done"}])
    client = await daemons.start()
    src = await call(client, "dsh/session/create", {"title": "source"})
    agent = src["agentId"]
    await call(client, "dsh/plan/set", {"agentId": agent, "active": True})
    await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "go"})
    source_log = read_log(workspace, src["sessionId"])
    call_seq = next(e["seq"] for e in source_log if e["type"] == "tool/call")

    # Whole log (no atSeq): the same events after a new session/start.
    whole = await call(client, "dsh/session/fork", {"agentId": agent})
    assert whole["sessionId"] != src["sessionId"] and is_session_id(whole["sessionId"])
    fork_log = read_log(workspace, whole["sessionId"])
    assert fork_log[0]["data"]["forkedFrom"] == {"sessionId": src["sessionId"], "seq": source_log[-1]["seq"]}
    assert [(e["type"], e["data"]) for e in fork_log[1:]] == [(e["type"], e["data"]) for e in source_log[1:]]

    # A cut right after the tool call: the fork closes the turn ("forked").
    cut = await call(client, "dsh/session/fork", {"agentId": agent, "atSeq": call_seq})
    cut_log = read_log(workspace, cut["sessionId"])
    assert cut_log[0]["data"]["forkedFrom"] == {"sessionId": src["sessionId"], "seq": call_seq}
    assert [e["data"] for e in cut_log[1:call_seq]] == [e["data"] for e in source_log[1:call_seq]]
    tail = cut_log[call_seq:]
    assert [e["type"] for e in tail] == ["tool/result", "turn/close"]
    assert tail[0]["data"]["ok"] is False and tail[1]["data"]["stopReason"] == "forked"

    # Each fork is a live agent with plan state from its log.
    opened = await call(client, "dsh/session/open", {"sessionId": cut["sessionId"]})
    assert opened["agentId"] == cut["agentId"] and opened["plan"] == {"active": True}
    listed = await call(client, "dsh/session/list", {})
    titles = {s["sessionId"]: s["title"] for s in listed["sessions"]}
    assert titles == {src["sessionId"]: "source", whole["sessionId"]: "source", cut["sessionId"]: "source"}


# ---- the agent ------------------------------------------------------------------------


@pytest.mark.slow
async def test_prompt_and_steer_into_a_running_turn(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "thinking", "delayMs": 1200}, {"text": "saw the steer"}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    header = client.wait_for(is_event("request/header", agent, step=1), timeout=10)
    prompt = asyncio.ensure_future(call(client, "dsh/agent/prompt", {"agentId": agent, "text": "start"}))
    await header
    assert await call(client, "dsh/agent/steer", {"agentId": agent, "text": "also this"}) == {"queued": True}
    assert await prompt == {"turn": 1, "stopReason": "end-turn"}
    events = read_log(workspace, sid)
    messages = [(e["turn"], e["data"]["text"]) for e in events if e["type"] == "user/message"]
    assert messages == [(1, "start"), (1, "also this")]
    headers = [e["data"]["step"] for e in events if e["type"] == "request/header"]
    assert headers == [1, 2]  # the steered text took one more step in the same turn


async def test_steer_with_no_turn_starts_one(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "ok"}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    closed = client.wait_for(is_event("turn/close", agent), timeout=10)
    assert await call(client, "dsh/agent/steer", {"agentId": agent, "text": "nudge"}) == {"queued": False}
    note = await closed
    assert note["params"]["event"]["data"] == {"turn": 1, "stopReason": "end-turn"}
    events = read_log(workspace, created["sessionId"])
    assert events[1]["type"] == "turn/open" and events[1]["data"] == {"turn": 1, "cause": "steer"}
    assert events[2]["data"] == {"text": "nudge", "source": "user", "client": "client 1"}


async def test_cancel_ends_the_running_turn(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "never", "delayMs": 20000}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    header = client.wait_for(is_event("request/header", agent), timeout=10)
    prompt = asyncio.ensure_future(call(client, "dsh/agent/prompt", {"agentId": agent, "text": "slow"}))
    await header
    assert await call(client, "dsh/agent/cancel", {"agentId": agent}) is None
    assert await asyncio.wait_for(prompt, 5) == {"turn": 1, "stopReason": "cancelled"}
    events = read_log(workspace, created["sessionId"])
    assert events[-1]["type"] == "turn/close" and events[-1]["data"] == {"turn": 1, "stopReason": "cancelled", "client": "client 1"}
    assert "assistant/message" not in types_of(events)
    # Cancel with nothing running is fine and writes nothing.
    assert await call(client, "dsh/agent/cancel", {"agentId": agent}) is None
    assert read_log(workspace, created["sessionId"]) == events


async def test_prompt_command_opens_no_turn(workspace: Path, daemons) -> None:
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    assert await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "/plan"}) == {
        "turn": None, "stopReason": "command",
    }
    assert await call(client, "dsh/plan/get", {"agentId": agent}) == {"active": True}
    assert await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "/plan off"}) == {
        "turn": None, "stopReason": "command",
    }
    events = read_log(workspace, created["sessionId"])
    assert [(e["type"], e["data"]) for e in events[1:]] == [
        ("plan/mode", {"active": True}), ("plan/mode", {"active": False}),
    ]


# ---- plan mode ------------------------------------------------------------------------


@pytest.mark.slow
async def test_plan_set_get_all_outcomes(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "slow step", "delayMs": 1500}, {"text": "next turn"}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    assert await call(client, "dsh/plan/get", {"agentId": agent}) == {"active": False}

    changed = client.wait_for(lambda n: n["method"] == "dsh/plan/changed", timeout=5)
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": True}) == {
        "outcome": "committed", "state": {"active": True},
    }
    assert (await changed)["params"] == {"agentId": agent, "sessionId": sid, "active": True}
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": True}) == {
        "outcome": "noop", "state": {"active": True},
    }

    # While a turn runs: queued, then cancelled by the opposite choice, queued again.
    header = client.wait_for(is_event("request/header", agent), timeout=10)
    prompt = asyncio.ensure_future(call(client, "dsh/agent/prompt", {"agentId": agent, "text": "work"}))
    await header
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": False}) == {
        "outcome": "queued", "state": {"active": True, "pending": False},
    }
    assert await call(client, "dsh/plan/get", {"agentId": agent}) == {"active": True, "pending": False}
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": False}) == {
        "outcome": "noop", "state": {"active": True, "pending": False},
    }
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": True}) == {
        "outcome": "cancelled", "state": {"active": True},
    }
    assert await call(client, "dsh/plan/set", {"agentId": agent, "active": False}) == {
        "outcome": "queued", "state": {"active": True, "pending": False},
    }
    assert await prompt == {"turn": 1, "stopReason": "end-turn"}
    # The turn had one step; the choice waits for the next turn's first pre-step (PM-11).
    assert await call(client, "dsh/plan/get", {"agentId": agent}) == {"active": True, "pending": False}
    assert await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "more"}) == {
        "turn": 2, "stopReason": "end-turn",
    }
    assert await call(client, "dsh/plan/get", {"agentId": agent}) == {"active": False}
    # No exit_plan_mode call in this session: no plan presented (P-21; test_plan_history.py).
    assert await call(client, "dsh/plan/history", {"agentId": agent}) == {"plans": []}
    events = read_log(workspace, sid)
    turn2 = [e for e in events if e.get("turn") == 2]
    kinds = [e["type"] for e in turn2]
    # Committed before the request header it affects (PM-10), with a note to the model (PM-14).
    assert kinds.index("plan/mode") < kinds.index("request/header")
    mode = turn2[kinds.index("plan/mode")]
    assert mode["data"] == {"active": False}
    notes = [e["data"] for e in turn2 if e["type"] == "user/message" and e["data"]["source"] == "plugin"]
    assert len(notes) == 1 and notes[0]["plugin"] == "plan"
    header2 = turn2[kinds.index("request/header")]
    assert header2["data"]["planActive"] is False and "plan:policy" not in header2["data"]["sections"]
    header1 = next(e for e in events if e["type"] == "request/header")
    assert header1["data"]["planActive"] is True and "plan:policy" in header1["data"]["sections"]
    assert [e["data"] for e in events if e["type"] == "plan/mode"] == [{"active": True}, {"active": False}]


# ---- goals ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_goal_create_budget_edit_resume_complete_clear(workspace: Path, daemons) -> None:
    """create arms and starts rounds; the budget runs out (blocked); edit adds rounds;
    resume runs them; complete; clear. Every result is a GoalView, every revision +1."""
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    assert await call(client, "dsh/goal/get", {"agentId": agent}) is None
    violations = watch_durability(client, workspace, sid)

    blocked = client.wait_for(goal_note("block", agent), timeout=10)
    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 1})
    assert goal["revision"] == 1 and goal["phase"] == "active" and goal["activation"] == "armed"
    assert goal["objective"] == "ship it" and goal["maxRounds"] == 1
    note = (await blocked)["params"]
    assert note["revision"] == 2 and note["goal"]["phase"] == "blocked"
    assert note["goal"]["blockedReason"]["code"] == "round-budget-exhausted"
    await asyncio.sleep(0.05)

    view = await call(client, "dsh/goal/get", {"agentId": agent})
    assert view["phase"] == "blocked" and view["roundsStarted"] == 1 and view["roundsLeft"] == 0
    assert view["activation"] == "disarmed" and view["revision"] == 2

    edited = await call(
        client, "dsh/goal/edit", {"agentId": agent, "ref": ref_of(view), "objective": "ship it well", "maxRounds": 2}
    )
    assert edited["revision"] == 3 and edited["phase"] == "blocked"
    assert edited["objective"] == "ship it well" and edited["maxRounds"] == 2 and edited["roundsLeft"] == 1

    blocked_again = client.wait_for(
        lambda n: goal_note("block", agent)(n) and n["params"]["revision"] == 5, timeout=10
    )
    resumed = await call(client, "dsh/goal/resume", {"agentId": agent, "ref": ref_of(edited)})
    assert resumed["revision"] == 4 and resumed["phase"] == "active" and resumed["activation"] == "armed"
    assert "blockedReason" not in resumed
    view = (await blocked_again)["params"]["goal"]
    assert view["roundsStarted"] == 2 and view["phase"] == "blocked"
    await asyncio.sleep(0.05)

    completed = await call(client, "dsh/goal/complete", {"agentId": agent, "ref": ref_of(view)})
    assert completed["phase"] == "complete" and completed["revision"] == 6
    cleared = await call(client, "dsh/goal/clear", {"agentId": agent, "ref": ref_of(completed)})
    assert cleared == {"ref": {"id": completed["id"], "revision": 7}}
    assert await call(client, "dsh/goal/get", {"agentId": agent}) is None

    changes = [e["data"] for e in read_log(workspace, sid) if e["type"] == "goal/change"]
    assert [c["op"] for c in changes] == ["create", "block", "edit", "resume", "block", "complete", "clear"]
    assert [c["goal"]["revision"] for c in changes[:-1]] == [1, 2, 3, 4, 5, 6]
    assert changes[-1]["cleared"] == {"id": completed["id"], "revision": 6}
    rounds = [e["data"]["goalRound"] for e in read_log(workspace, sid) if "goalRound" in e["data"]]
    assert [(r["round"], r["revision"]) for r in rounds] == [(1, 1), (2, 4)]
    ops = [n["params"]["op"] for n in client.notifications if n["method"] == "dsh/goal/changed"]
    assert ops[0] == "create" and ops[-1] == "clear" and ops.count("round") == 2
    last = [n["params"] for n in client.notifications if n["method"] == "dsh/goal/changed"][-1]
    assert last == {"agentId": agent, "sessionId": sid, "op": "clear", "revision": 7}
    assert violations == []


@pytest.mark.slow
async def test_goal_pause_resume_disarm_block(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "round 1", "delayMs": 1000}, {"text": "round 2", "delayMs": 1000}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]

    round1 = client.wait_for(is_event("request/header", agent), timeout=10)
    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "refactor"})
    assert goal["maxRounds"] == 256 and goal["activation"] == "armed"  # the service default (G-9)
    await round1
    closed1 = client.wait_for(is_event("turn/close", agent, turn=1), timeout=10)
    paused = await call(client, "dsh/goal/pause", {"agentId": agent, "ref": ref_of(goal)})
    assert paused["phase"] == "paused" and paused["revision"] == 2 and paused["activation"] == "disarmed"
    await closed1
    await asyncio.sleep(0.2)
    assert not any(e["type"] == "turn/open" and e["turn"] == 2 for e in read_log(workspace, sid))

    round2 = client.wait_for(is_event("request/header", agent), timeout=10)
    resumed = await call(client, "dsh/goal/resume", {"agentId": agent, "ref": ref_of(paused)})
    assert resumed["phase"] == "active" and resumed["revision"] == 3 and resumed["activation"] == "armed"
    await round2
    closed2 = client.wait_for(is_event("turn/close", agent, turn=2), timeout=10)
    disarm_note = client.wait_for(goal_note("disarm", agent), timeout=5)
    disarmed = await call(client, "dsh/goal/disarm", {"agentId": agent})
    assert disarmed["activation"] == "disarmed" and disarmed["revision"] == 3 and disarmed["phase"] == "active"
    assert (await disarm_note)["params"]["revision"] == 3
    await closed2
    await asyncio.sleep(0.2)
    view = await call(client, "dsh/goal/get", {"agentId": agent})
    assert view["roundsStarted"] == 2 and view["activation"] == "disarmed"
    rounds = await call(client, "dsh/goal/rounds", {"agentId": agent})
    assert rounds["goalId"] == view["id"] and [r["round"] for r in rounds["rounds"]] == [1, 2]
    assert not any(e["type"] == "turn/open" and e["turn"] == 3 for e in read_log(workspace, sid))

    reason = {"code": "needs-review", "message": "waiting for a design review"}
    blocked = await call(client, "dsh/goal/block", {"agentId": agent, "ref": ref_of(view), "reason": reason})
    assert blocked["phase"] == "blocked" and blocked["blockedReason"] == reason and blocked["revision"] == 4
    # Disarm with no goal armed, and with no goal at all, is answered too.
    assert (await call(client, "dsh/goal/disarm", {"agentId": agent}))["revision"] == 4
    await call(client, "dsh/goal/clear", {"agentId": agent, "ref": ref_of(blocked)})
    assert await call(client, "dsh/goal/disarm", {"agentId": agent}) is None

    # The log holds every durable change and no activation change (G-7).
    changes = [e["data"] for e in read_log(workspace, sid) if e["type"] == "goal/change"]
    assert [c["op"] for c in changes] == ["create", "pause", "resume", "block", "clear"]
    listed = await call(client, "dsh/session/list", {})
    assert "goal" not in listed["sessions"][0]


@pytest.mark.slow
async def test_goal_token_budget_tokens_used_and_usage_notes(workspace: Path, daemons) -> None:
    """Rounds whose replies report usage: tokensUsed grows (op "usage" notes), the round that
    ends over maxTokens is the last (token-budget-exhausted); edit raises the budget."""
    usage = {"inputTokens": 900, "outputTokens": 100}
    write_workspace(workspace, replies=[{"text": f"round {n}", "usage": usage} for n in range(1, 5)])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    blocked = client.wait_for(goal_note("block", agent), timeout=10)
    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxTokens": 1500})
    assert (goal["tokensUsed"], goal["maxTokens"]) == (0, 1500)
    view = (await blocked)["params"]["goal"]
    assert (view["roundsStarted"], view["tokensUsed"], view["phase"]) == (2, 2000, "blocked")
    assert view["blockedReason"]["code"] == "token-budget-exhausted"
    notes = [n["params"] for n in client.notifications if n["method"] == "dsh/goal/changed"]
    assert [(n["op"], n["goal"]["tokensUsed"]) for n in notes if n["op"] in ("round", "usage")] == [
        ("round", 0), ("usage", 1000), ("round", 1000), ("usage", 2000),
    ]
    for note in notes:
        from_wire(METHODS["dsh/goal/changed"].params, note)
    replies = [e["data"] for e in read_log(workspace, sid) if e["type"] == "assistant/message"]
    assert [r["usage"] for r in replies] == [usage, usage]
    edited = await call(client, "dsh/goal/edit", {"agentId": agent, "ref": ref_of(view), "maxTokens": 2500})
    assert (edited["maxTokens"], edited["tokensUsed"], edited["phase"]) == (2500, 2000, "blocked")
    assert (await call(client, "dsh/goal/get", {"agentId": agent})) == edited
    listed = (await call(client, "dsh/session/list", {}))["sessions"]
    assert listed[0]["goal"]["tokensUsed"] == 2000


# ---- permissions ----------------------------------------------------------------------


@pytest.mark.slow
async def test_permission_get_set_in_process_per_agent(workspace: Path, daemons) -> None:
    write_workspace(workspace, extra_config='\n[tools]\nsandbox = "workspace-write"\napprove = ["exec"]\n')
    # Fewer approvals than the default is a guarded key: the workspace must be trusted.
    daemons.trusted = True
    client = await daemons.start()
    first = await call(client, "dsh/session/create", {})
    second = await call(client, "dsh/session/create", {})
    agent = first["agentId"]
    from_config = {"sandbox": "workspace-write", "network": False, "approve": ["exec"]}
    assert await call(client, "dsh/permission/get", {"agentId": agent}) == from_config

    changed = await call(client, "dsh/permission/set", {"agentId": agent, "sandbox": "read-only", "approve": ["write", "exec"]})
    assert changed == {"sandbox": "read-only", "network": False, "approve": ["write", "exec"]}
    assert await call(client, "dsh/permission/get", {"agentId": agent}) == changed
    # Only the sandbox, only the approve list, and [] (ask for nothing).
    assert (await call(client, "dsh/permission/set", {"agentId": agent, "sandbox": "full-access"}))["approve"] == ["write", "exec"]
    assert (await call(client, "dsh/permission/set", {"agentId": agent, "approve": []})) == {
        "sandbox": "full-access", "network": False, "approve": [],
    }
    # Per agent: the other session's agent still has the config's policy.
    assert await call(client, "dsh/permission/get", {"agentId": second["agentId"]}) == from_config
    # In process only: a reload starts from config again, and nothing reached the log.
    reloaded = await call(client, "dsh/session/open", {"sessionId": first["sessionId"], "reload": True})
    assert await call(client, "dsh/permission/get", {"agentId": reloaded["agentId"]}) == from_config
    assert types_of(read_log(workspace, first["sessionId"])) == ["session/start"]
    # Plan mode is a separate mechanism: untouched.
    assert await call(client, "dsh/plan/get", {"agentId": reloaded["agentId"]}) == {"active": False}


# ---- chat ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_chat_get_pages_the_conversation(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "Reading it.", "toolCalls": [{"name": "goal_complete", "arguments": {}}]}, {"text": "Done."}])
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {"title": "chat"})
    agent = created["agentId"]
    await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "hello"})
    whole = await call(client, "dsh/chat/get", {"agentId": agent})
    kinds = [i["kind"] for i in whole["items"]]
    assert kinds == ["session", "user-message", "assistant-message", "tool-call", "assistant-message", "turn-end"]
    tool = whole["items"][3]
    assert tool["status"] == "failed" and tool["title"] == "Report the goal complete"  # no goal to complete
    assert whole["items"][-1]["text"] == "Turn 1 finished"
    assert whole["nextSeq"] == read_log(workspace, created["sessionId"])[-1]["seq"]
    # Pages of two, by seq, give the same list.
    paged, after = [], 0
    while True:
        page = await call(client, "dsh/chat/get", {"agentId": agent, "afterSeq": after, "limit": 2})
        paged += page["items"]
        if len(page["items"]) < 2:
            break
        after = page["nextSeq"]
    assert paged == whole["items"]
    assert await call(client, "dsh/chat/get", {"agentId": agent, "afterSeq": whole["nextSeq"]}) == {"items": [], "nextSeq": whole["nextSeq"]}


# ---- configuration -----------------------------------------------------------------------


@pytest.mark.slow
async def test_config_get_shows_the_effective_config(workspace: Path, daemons) -> None:
    write_workspace(workspace, extra_config="\n[goals]\nmaxRounds = 12\n")
    client = await daemons.start(config={"goals": {"maxTokens": 5000}})
    report = await call(client, "dsh/config/get", {})
    assert report["trusted"] is False and report["ignored"] == []
    assert report["effective"]["goals"] == {"maxRounds": 12, "maxTokens": 5000}
    assert report["effective"]["model"]["script"] == "script.json"
    assert "scriptReplies" not in report["effective"]


async def test_checkpoint_list_diff_and_restore(tmp_path: Path, daemons) -> None:
    """dsh/checkpoint/*: a step that writes a file is checkpointed before it runs; the diff
    says what restoring would change; the restore puts the file back (the wire's other
    cases: test_checkpoint_wire.py)."""
    replies = [{"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "two\n"}}]}, {"text": "ok"}]
    write_workspace(daemons.root, replies, plugins=["tools", "checkpoints"])
    (daemons.root / "a.txt").write_text("one\n")
    client = await daemons.start(approve=lambda params: {"outcome": "allow-once"})
    agent = (await call(client, "dsh/session/create", {}))["agentId"]
    await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "write"})
    [checkpoint] = (await call(client, "dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    assert (checkpoint["turn"], checkpoint["step"], checkpoint["files"]) == (1, 1, ["a.txt"])
    [change] = (await call(client, "dsh/checkpoint/diff", {"agentId": agent, "seq": checkpoint["seq"]}))["files"]
    assert (change["path"], change["status"], change["changedByPerson"]) == ("a.txt", "modified", False)
    assert "-two" in change["diff"] and "+one" in change["diff"]
    restored = await call(client, "dsh/checkpoint/restore", {"agentId": agent, "seq": checkpoint["seq"]})
    assert restored["restored"] == ["a.txt"] and "agent" not in restored
    assert (daemons.root / "a.txt").read_text() == "one\n"


def test_every_request_method_has_a_happy_path_here() -> None:
    """A method added to the protocol needs a happy path in this file."""
    source = Path(__file__).read_text()
    requests = {m for m, spec in METHODS.items() if spec.kind == "request"}
    missing = {m for m in requests if not re.search(r'call\(\s*client,\s*"' + re.escape(m) + '"', source)}
    assert not missing, f"no happy path for {sorted(missing)}"


@pytest.mark.slow
async def test_agent_delta_streams_the_reply_before_its_durable_events(tmp_path: Path, daemons) -> None:
    """dsh/agent/delta: the text and tool-argument pieces of a model call, for its agent,
    before the assistant/message and tool/call events that are the truth; never in the log."""
    text = "Looking at the parser now, then a plan."  # several 16-character pieces
    arguments = {"plan": "# Plan\n\n1. Cache\n"}
    write_workspace(daemons.root, [{"text": text, "toolCalls": [{"name": "exit_plan_mode", "arguments": arguments}]}])
    client = await daemons.start(answer=lambda params: {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]})
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    await call(client, "dsh/plan/set", {"agentId": agent, "active": True})
    await call(client, "dsh/agent/prompt", {"agentId": agent, "text": "plan a cache"})

    notes = [n for n in client.notifications if n["method"] in ("dsh/agent/delta", "dsh/session/event")]
    every = [n["params"] for n in client.notifications if n["method"] == "dsh/agent/delta"]
    for delta in every:
        from_wire(METHODS["dsh/agent/delta"].params, delta)
        assert (delta["agentId"], delta["sessionId"], delta["turn"]) == (agent, sid, 1)
    # Step 2 (after the approved plan) is the exhausted script's reply.
    assert "".join(d["text"] for d in every if d["step"] == 2) == "(script exhausted)"
    notes = [n for n in notes if n["method"] != "dsh/agent/delta" or n["params"]["step"] == 1]
    deltas = [n["params"] for n in notes if n["method"] == "dsh/agent/delta"]
    texts = [d["text"] for d in deltas if d["kind"] == "text"]
    assert len(texts) > 1 and "".join(texts) == text
    pieces = [d for d in deltas if d["kind"] == "tool-arguments"]
    assert {(d["name"], d["callId"]) for d in pieces} == {("exit_plan_mode", pieces[0]["callId"])}
    assert json.loads("".join(d["text"] for d in pieces)) == arguments
    # Every delta of the step came before the step's durable reply.
    order = [n["method"] if n["method"] == "dsh/agent/delta" else n["params"]["event"]["type"] for n in notes]
    assert order.index("assistant/message") > max(i for i, m in enumerate(order) if m == "dsh/agent/delta")
    call_event = next(e for e in read_log(daemons.root, sid) if e["type"] == "tool/call")
    assert call_event["data"]["callId"] == pieces[0]["callId"]
    assert "delta" not in log_text(daemons.root, sid)


def log_text(root: Path, session_id: str) -> str:
    return (root / ".dsh" / "sessions" / session_id / "log.jsonl").read_text()
