"""G-1..G-12: the goal lifecycle, proved on real sessions (SessionStore on tmp dirs,
the strict folds, the scripted model)."""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_support import in_model_call, settle, events_of, make_workspace, replay_strict, goals_of, plan_of

from dshd.errors import DshError
from dshd.folds import replay
from dshd.folds.events import GoalRef
from dshd.services.goals import GoalNotice, GoalService


def kind_of(call) -> DshError:
    with pytest.raises(DshError) as caught:
        call()
    return caught.value


@pytest.fixture
async def ws(tmp_path):
    workspace = make_workspace(tmp_path)
    yield workspace
    await workspace.shutdown()


def quiet(agent):
    """Disarm right after arming ops so the continuation driver starts nothing."""
    goals_of(agent).disarm()


# ---- G-1: optional plugin; the log is the only store; fork and resume inherit ---------


async def test_g01_goals_are_an_optional_plugin(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "hi"}], plugins=[])
    agent = ws.create_session()
    assert goals_of(agent) is None and "goal_complete" not in agent.tools.names()
    assert (await agent.prompt("hello")).stop_reason == "end-turn"
    await ws.shutdown()


async def test_g01_fork_and_resume_inherit_the_goal_through_the_log(ws, tmp_path):
    agent = ws.create_session()
    view = goals_of(agent).create("ship the parser", 10)
    quiet(agent)
    forked = ws.fork(agent.agent_id)
    reopened = ws.open_session(agent.session_id, reload=True)
    for other in (forked, reopened):
        got = goals_of(other).get()
        assert (got.id, got.revision, got.objective, got.max_rounds) == (view.id, 1, "ship the parser", 10)
        assert got.activation == "disarmed"
    # Nothing but the session's own files holds goal data.
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert all(f.startswith(".dsh/sessions/") for f in files - {".dsh/.gitignore"})  # that holds no goal data


# ---- G-2: one durable event per change, full snapshot or tombstone -------------------------


async def test_g02_each_change_is_one_goal_change_with_the_full_snapshot(ws):
    agent = ws.create_session()
    v1 = goals_of(agent).create("objective", 5)
    v2 = goals_of(agent).pause(v1.ref)
    v3 = goals_of(agent).edit(v2.ref, objective="better objective")
    cleared = goals_of(agent).clear(v3.ref)
    lines = [json.loads(l) for l in agent.store.path.read_text().splitlines() if '"goal/change"' in l]
    assert [l["data"]["op"] for l in lines] == ["create", "pause", "edit", "clear"]
    assert lines[2]["data"]["goal"] == {
        "id": v1.id, "revision": 3, "objective": "better objective", "phase": "paused", "maxRounds": 5
    }
    assert set(lines[2]["data"]) == {"version", "op", "goal", "roundsStarted", "tokensUsed", "createdAt", "updatedAt"}
    assert lines[3]["data"]["cleared"] == {"id": v1.id, "revision": 3}
    assert set(lines[3]["data"]) == {"version", "op", "cleared", "clearedAt"}
    assert cleared == GoalRef(id=v1.id, revision=4)


# ---- G-3: CAS refs, +1 per change, fresh ids ----------------------------------------------


async def test_g03_stale_ref_is_rejected_with_the_current_revision(ws):
    agent = ws.create_session()
    v1 = goals_of(agent).create("o")
    v2 = goals_of(agent).pause(v1.ref)
    assert v2.revision == v1.revision + 1
    error = kind_of(lambda: goals_of(agent).resume(v1.ref))
    assert error.kind == "stale-revision" and error.data == {"current": 2, "goalId": v1.id}
    error = kind_of(lambda: goals_of(agent).pause({"id": "g-other", "revision": 2}))
    assert error.kind == "stale-revision"
    assert goals_of(agent).get().revision == 2  # nothing written
    for bad in ({"id": v1.id, "revision": 0}, {"id": v1.id, "revision": "2"}, {"id": v1.id}, "g-1@2"):
        assert kind_of(lambda bad=bad: goals_of(agent).pause(bad)).data["field"] == "ref"


async def test_g03_after_clear_the_returned_ref_gets_no_goal_and_ids_are_fresh(ws):
    agent = ws.create_session()
    first = goals_of(agent).create("o")
    ref = goals_of(agent).clear(first.ref)
    assert ref.revision == first.revision + 1
    assert goals_of(agent).get() is None
    assert kind_of(lambda: goals_of(agent).pause(ref)).kind == "no-goal"
    assert kind_of(lambda: goals_of(agent).resume(first.ref)).kind == "no-goal"
    second = goals_of(agent).create("again")
    assert second.id != first.id and second.revision == 1
    quiet(agent)


# ---- G-4: phases and the blocked reason ----------------------------------------------------


@pytest.mark.parametrize(
    "code, message, field",
    [("Bad Code", "m", "reason.code"), ("under_score", "m", "reason.code"), ("", "m", "reason.code"),
     ("ok-code", "", "reason.message"), ("ok-code", "   ", "reason.message"), (7, "m", "reason.code")],
)
async def test_g04_blocked_reason_needs_kebab_code_and_message(ws, code, message, field):
    agent = ws.create_session()
    view = goals_of(agent).create("o")
    error = kind_of(lambda: goals_of(agent).block(view.ref, code, message))
    assert error.kind == "invalid-params" and error.data["field"] == field
    blocked = goals_of(agent).block(view.ref, "dependency-conflict", "libfoo 2 vs 3")
    assert blocked.phase == "blocked" and blocked.blocked_reason.code == "dependency-conflict"
    resumed = goals_of(agent).resume(blocked.ref)
    assert resumed.blocked_reason is None  # only blocked carries a reason
    quiet(agent)


# ---- G-5: strict fold on replay ---------------------------------------------------------------


async def test_g05_a_tampered_revision_fails_replay_at_that_line(ws):
    agent = ws.create_session()
    v = goals_of(agent).create("o")
    goals_of(agent).pause(v.ref)
    path = agent.store.path
    ws.close(agent.agent_id)
    lines = path.read_text().splitlines()
    bad_line = next(i for i, l in enumerate(lines) if '"op":"pause"' in l)
    lines[bad_line] = lines[bad_line].replace('"revision":2', '"revision":9')
    path.write_text("\n".join(lines) + "\n")
    (path.parent / "projection.json").unlink(missing_ok=True)
    error = kind_of(lambda: replay(path))
    assert error.kind == "replay-failed" and error.data["line"] == bad_line + 1
    assert "previous+1" in error.data["reason"]
    assert kind_of(lambda: ws.open_session(agent.session_id)).kind == "replay-failed"


# ---- G-6: every transition, and everything else is invalid-transition --------------------


async def test_g06_transition_table(ws):
    agent = ws.create_session()
    g = goals_of(agent)
    v = g.create("o", 3)
    assert (v.phase, v.revision, v.activation) == ("active", 1, "armed")
    # create while a goal is not complete
    assert kind_of(lambda: g.create("another")).data == {"phase": "active"}
    # resume on active (already armed): no durable change
    before = len(agent.store.events())
    assert g.resume(v.ref).revision == 1 and len(agent.store.events()) == before
    v = g.pause(v.ref)
    assert (v.phase, v.activation) == ("paused", "disarmed")
    assert kind_of(lambda: g.pause(v.ref)).data == {"phase": "paused"}
    v = g.edit(v.ref, max_rounds=4)
    assert (v.phase, v.max_rounds, v.revision) == ("paused", 4, 3)
    v = g.block(v.ref, "needs-review", "waiting for a person")
    assert v.phase == "blocked"
    assert kind_of(lambda: g.block(v.ref, "again", "x")).kind == "invalid-transition"
    assert kind_of(lambda: g.pause(v.ref)).data == {"phase": "blocked"}
    v = g.resume(v.ref)
    assert (v.phase, v.activation) == ("active", "armed")
    v = g.complete(v.ref)
    assert (v.phase, v.activation) == ("complete", "disarmed")
    for op in (g.pause, g.resume, g.complete):
        assert kind_of(lambda op=op: op(v.ref)).data == {"phase": "complete"}
    assert kind_of(lambda: g.edit(v.ref, objective="x")).kind == "invalid-transition"
    assert kind_of(lambda: g.block(v.ref, "x", "y")).kind == "invalid-transition"
    # create replaces a complete goal
    fresh = g.create("next")
    assert fresh.revision == 1 and fresh.id != v.id
    g.disarm()
    ref = g.clear(fresh.ref)
    assert g.get() is None and ref.revision == 2
    assert replay_strict(agent.store.path).goal.goal is None


async def test_g06_edit_rules_and_invalid_params(ws):
    agent = ws.create_session()
    g = goals_of(agent)
    v = g.create("o", 5)
    quiet(agent)
    cases = [
        (lambda: g.edit(v.ref), "objective"),  # nothing to change
        (lambda: g.edit(v.ref, objective="o", max_rounds=5), "objective"),  # same values
        (lambda: g.edit(v.ref, objective="  "), "objective"),
        (lambda: g.edit(v.ref, max_rounds=0), "maxRounds"),
        (lambda: g.edit(v.ref, max_rounds=True), "maxRounds"),
        (lambda: g.edit(v.ref, max_rounds="7"), "maxRounds"),  # a string is never a number
    ]
    for call, field in cases:
        error = kind_of(call)
        assert (error.kind, error.data["field"]) == ("invalid-params", field)
    assert g.get().revision == 1  # nothing written


async def test_g06_create_invalid_params(ws):
    agent = ws.create_session()
    assert kind_of(lambda: goals_of(agent).create("")).data["field"] == "objective"
    assert kind_of(lambda: goals_of(agent).create("o", 0)).data["field"] == "maxRounds"
    assert kind_of(lambda: goals_of(agent).create("o", 2.5)).data["field"] == "maxRounds"
    assert goals_of(agent).get() is None


async def test_g06_max_rounds_not_below_rounds_started_and_resume_needs_budget(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    goals_of(agent).create("o", 2)
    await settle(agent)  # the driver spends both rounds, then blocks
    v = goals_of(agent).get()
    assert (v.phase, v.rounds_started, v.blocked_reason.code) == ("blocked", 2, "round-budget-exhausted")
    assert kind_of(lambda: goals_of(agent).edit(v.ref, max_rounds=1)).data["field"] == "maxRounds"
    error = kind_of(lambda: goals_of(agent).resume(v.ref))
    assert error.kind == "budget-exhausted"
    v = goals_of(agent).edit(v.ref, max_rounds=3)
    v = goals_of(agent).resume(v.ref)
    assert v.activation == "armed"
    goals_of(agent).disarm()
    await ws.shutdown()


# ---- G-7: activation is in process; every load starts disarmed ----------------------------------


async def test_g07_every_load_starts_disarmed_and_resume_rearms_without_an_event(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    v = goals_of(agent).create("o", 50)
    assert goals_of(agent).armed
    goals_of(agent).disarm()
    await agent.wait_idle()
    turns_before = len(events_of(agent, "turn/open"))
    reopened = ws.open_session(agent.session_id, reload=True)
    view = goals_of(reopened).get()
    assert view.phase == "active" and view.activation == "disarmed"
    await asyncio.sleep(0.05)
    assert len(events_of(reopened, "turn/open")) == turns_before  # nothing started by itself
    count = len(reopened.store.events())
    resumed = goals_of(reopened).resume(view.ref)
    assert resumed.activation == "armed" and resumed.revision == view.revision
    assert not [e for e in reopened.store.events(count) if type(e).__name__ == "GoalChange"]
    goals_of(reopened).disarm()
    assert "armed" not in agent.store.path.read_text()
    await ws.shutdown()


# ---- G-8, G-9: the round budget ---------------------------------------------------------------


async def test_g08_only_continuation_rounds_spend_the_budget(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    v = goals_of(agent).create("o", 3)
    await settle(agent)
    rounds = [e.data.goalRound for e in events_of(agent, "user/message") if e.data.goalRound]
    assert [r.round for r in rounds] == [1, 2, 3]
    assert all(r.goalId == v.id and r.revision == 1 for r in rounds)
    assert all(e.data.source == "plugin" and e.data.plugin == "goals" for e in events_of(agent, "user/message"))
    blocked = goals_of(agent).get()
    edited = goals_of(agent).edit(blocked.ref, max_rounds=10)
    resumed = goals_of(agent).resume(edited.ref)
    goals_of(agent).disarm()
    await agent.wait_idle()
    spent = goals_of(agent).get().rounds_started
    await agent.prompt("a person's own question")
    assert goals_of(agent).get().rounds_started == spent  # a person's message spends nothing
    assert resumed.revision == 4  # create 1, budget block 2, edit 3, resume 4
    await ws.shutdown()


async def test_g09_max_rounds_defaults_from_config_and_budget_blocks(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    assert goals_of(agent)._max_rounds_default == 256
    view = goals_of(agent).create("o")
    goals_of(agent).disarm()
    assert view.max_rounds == 256 and view.rounds_left == 256
    await ws.shutdown()
    (tmp_path / "b").mkdir()
    ws = make_workspace(tmp_path / "b", config={"goals": {"maxRounds": 2}})
    agent = ws.create_session()
    goals_of(agent).create("o")
    await settle(agent)
    view = goals_of(agent).get()
    assert (view.phase, view.rounds_started, view.rounds_left) == ("blocked", 2, 0)
    assert view.blocked_reason.code == "round-budget-exhausted"
    assert len(events_of(agent, "turn/open")) == 2
    await ws.shutdown()


# ---- G-10: the exact live agent ------------------------------------------------------------


async def test_g10_an_old_agent_id_after_reload_is_stale(ws):
    agent = ws.create_session()
    goals_of(agent).create("o")
    quiet(agent)
    new = ws.open_session(agent.session_id, reload=True)
    assert new.agent_id != agent.agent_id
    assert kind_of(lambda: ws.agent(agent.agent_id)).kind == "stale-agent"
    assert kind_of(lambda: ws.agent("a-never-issued")).kind == "unknown-agent"
    assert goals_of(ws.agent(new.agent_id)).get().activation == "disarmed"
    # A service handle kept from the old agent cannot read or write either.
    assert kind_of(lambda: goals_of(agent).get()).kind == "stale-agent"
    assert kind_of(lambda: goals_of(agent).disarm()).kind == "stale-agent"
    assert kind_of(lambda: plan_of(agent).set(True)).kind == "stale-agent"


# ---- G-11: notifications ------------------------------------------------------------------------


async def test_g11_notices_after_durable_changes_with_exact_revisions(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    notices: list[GoalNotice] = []
    durable_at_notice = []

    def listener(notice):
        notices.append(notice)
        if notice.view is not None:
            durable_at_notice.append(replay_strict(agent.store.path).goal.goal.revision == notice.revision)

    def broken(notice):
        raise RuntimeError("listener bug")

    goals_of(agent).add_listener(broken)
    goals_of(agent).add_listener(listener)
    v = goals_of(agent).create("o", 1)  # arms; the driver runs one round then blocks
    await settle(agent)
    v = goals_of(agent).get()
    v = goals_of(agent).edit(v.ref, max_rounds=5)
    v = goals_of(agent).resume(v.ref)
    goals_of(agent).disarm()
    await agent.wait_idle()
    v = goals_of(agent).get()
    v = goals_of(agent).pause(v.ref)
    ref = goals_of(agent).clear(v.ref)
    ops = [(n.op, n.revision) for n in notices]
    assert ops[:3] == [("create", 1), ("round", 1), ("block", 2)]
    # Disarmed before the driver's task ran: no round was started.
    assert ops[3:6] == [("edit", 3), ("resume", 4), ("disarm", 4)]
    assert ops[-2:] == [("pause", 5), ("clear", 6)]
    assert notices[-1].view is None and ref.revision == 6
    assert all(durable_at_notice)  # every notice came after its event was on disk
    round_notice = notices[1]
    assert round_notice.view.rounds_started == 1  # a status bar can track the budget
    await ws.shutdown()


async def test_g11_listeners_are_per_agent(tmp_path):
    ws = make_workspace(tmp_path)
    a, b = ws.create_session(), ws.create_session()
    seen_a, seen_b = [], []
    goals_of(a).add_listener(seen_a.append)
    goals_of(b).add_listener(seen_b.append)
    goals_of(a).create("only a")
    goals_of(a).disarm()
    assert [n.op for n in seen_a] == ["create", "disarm"] and seen_b == []
    await ws.shutdown()


# ---- G-12: the model sees the goal and reports through refs ------------------------------------


async def test_g12_status_section_and_tools_complete_through_the_rendered_ref(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "done", "toolCalls": [{"name": "goal_complete", "arguments": {}}]}, {"text": "ok"}])
    agent = ws.create_session()
    v = goals_of(agent).create("make the tests pass", 5)
    await settle(agent)
    # G-24: the goal is in the system text; its counts, which change every round, are the
    # request's volatile text (sent after the history).
    request = ws.model.requests[0]
    assert "Current goal: make the tests pass" in request.system
    assert request.volatile == f"Goal {v.id} (revision 1) is active. Rounds: 1 of 5 started, 4 left."
    assert "Rounds:" not in request.system and v.id not in request.system
    assert goals_of(agent).get().phase == "complete"
    assert len(events_of(agent, "turn/open")) == 1  # complete disarmed: no next round
    (call_result, *_) = [e.data for e in events_of(agent, "tool/result")]
    assert call_result.ok and "complete" in call_result.content
    await ws.shutdown()


async def test_g12_goal_block_tool_and_stale_ref(tmp_path):
    block = {"name": "goal_block", "arguments": {"code": "missing-credentials", "message": "no API key"}}
    ws = make_workspace(tmp_path, [{"toolCalls": [block]}, {"text": "ok"}, {"toolCalls": [{"name": "goal_complete", "arguments": {}}], "delayMs": 100}, {"text": "x"}])
    agent = ws.create_session()
    goals_of(agent).create("o", 5)
    await settle(agent)
    view = goals_of(agent).get()
    assert view.phase == "blocked" and view.blocked_reason.code == "missing-credentials"
    # The model answers a request that showed revision 3; a person edits meanwhile.
    view = goals_of(agent).resume(view.ref)
    goals_of(agent).disarm()
    turn = asyncio.ensure_future(agent.prompt("finish"))
    await in_model_call(agent)
    goals_of(agent).edit(view.ref, objective="o, but better")
    await turn
    results = [e.data for e in events_of(agent, "tool/result")]
    assert results[-1].ok is False and "changed since this request" in results[-1].content
    assert goals_of(agent).get().phase == "active"
    await ws.shutdown()


def test_goal_service_alone_on_a_store(tmp_path):
    """Layer 3 without the agent loop."""
    from dshd.services.store import SessionStore

    store = SessionStore.create(tmp_path, "s-01m8mcaext7rthc32vvdnh1pd2")
    service = GoalService(store, max_rounds_default=4)
    v = service.create("alone")
    assert service.next_round().round == 1
    service.disarm()
    assert service.next_round() is None
    store.close()
    assert v.max_rounds == 4


async def test_g11_notice_payload_is_the_wire_shape(ws):
    """What the LSP door sends for each notice (its converter, daemon/to_wire.py)."""
    from dshd.daemon.to_wire import goal_notice

    agent = ws.create_session()
    notices = []
    goals_of(agent).add_listener(notices.append)
    view = goals_of(agent).create("o")
    view = goals_of(agent).block(view.ref, {"code": "needs-input", "message": "which branch?"})
    goals_of(agent).clear(view.ref)
    payloads = [goal_notice(n) for n in notices]
    assert payloads[0]["op"] == "create" and payloads[0]["goal"]["activation"] == "armed"
    assert payloads[1]["goal"]["blockedReason"] == {"code": "needs-input", "message": "which branch?"}
    assert payloads[-1] == {"op": "clear", "revision": 3}
    assert kind_of(lambda: goals_of(agent).block({"id": "x", "revision": 1}, {"code": "a"})).kind == "no-goal"
