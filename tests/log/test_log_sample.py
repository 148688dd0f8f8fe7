"""Builders of realistic sound sessions (used by the other log tests) and the shipped sample log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dshd.folds import replay
from dshd.formats import utc_now
from dshd.services.store import SessionStore

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample-session" / "log.jsonl"
DSHD = [sys.executable, "-m", "dshd"]


def snapshot(op, goal_id, revision, phase, *, rounds=0, max_rounds=3, objective="Make the parser tests pass",
             created_at="2026-11-29T18:00:00.000Z", blocked=None, tokens=None, max_tokens=None):
    """A goal/change snapshot; ``tokens`` None leaves tokensUsed out, as logs written before
    token budgets do."""
    goal = {"id": goal_id, "revision": revision, "objective": objective, "phase": phase, "maxRounds": max_rounds}
    if blocked is not None:
        goal["blockedReason"] = {"code": blocked[0], "message": blocked[1]}
    if max_tokens is not None:
        goal["maxTokens"] = max_tokens
    data = {"version": 1, "op": op, "goal": goal, "roundsStarted": rounds, "createdAt": created_at,
            "updatedAt": utc_now()}
    if tokens is not None:
        data["tokensUsed"] = tokens
    return data


def tombstone(goal_id, revision):
    return {"version": 1, "op": "clear", "cleared": {"id": goal_id, "revision": revision}, "clearedAt": utc_now()}


class Session:
    """Small driver that writes well-formed turns through a SessionStore (as the agent loop would)."""

    def __init__(self, store: SessionStore):
        self.store = store

    def goal(self, data):
        return self.store.commit("goal/change", data, writer="goals")

    def plan(self, active, turn=None):
        return self.store.commit("plan/mode", {"active": active}, turn=turn, writer="plan")

    def turn(self, text, *, cause="prompt", goal_round=None, plan_active=False, steps=1, tool=None, usage=None):
        """One turn; ``usage`` (inputTokens, outputTokens) goes on its assistant message."""
        s = self.store
        n = s.state.turn.last_turn + 1
        s.commit("turn/open", {"turn": n, "cause": cause}, turn=n)
        msg = {"text": text, "source": "user"}
        if goal_round is not None:
            msg = {"text": text, "source": "plugin", "plugin": "goals", "goalRound": goal_round}
        s.commit("user/message", msg, turn=n)
        for step in range(1, steps + 1):
            sections = ["base:system"] + (["plan:policy"] if plan_active else [])
            s.commit("request/header", {"step": step, "planActive": plan_active, "sections": sections,
                                        "tools": ["read_file", "write_file", "exit_plan_mode"]}, turn=n)
            if tool is not None and step < steps:
                call_id = f"call-{n}-{step}"
                s.commit("tool/call", {"callId": call_id, "name": tool, "arguments": {"path": "parser.py"}}, turn=n)
                s.commit("tool/result", {"callId": call_id, "ok": True, "content": "def parse(src): ..."}, turn=n)
        reply = {"text": f"Done with turn {n}."}
        if usage is not None:
            reply["usage"] = {"inputTokens": usage[0], "outputTokens": usage[1]}
        s.commit("assistant/message", reply, turn=n)
        s.commit("turn/close", {"turn": n, "stopReason": "end_turn"}, turn=n)
        return n


def build_sample_session(store: SessionStore) -> None:
    """A plan-mode turn with an approved plan, then a goal that runs rounds, pauses, is edited,
    resumes and completes: every event type of SPEC section 3."""
    s = Session(store)
    c = store.commit
    # Turn 1: the person chose plan mode at prompt time; it is appended at the first pre-step.
    c("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    c("user/message", {"text": "Split the tokenizer out of parser.py", "source": "user"}, turn=1)
    s.plan(True, turn=1)
    c("request/header", {"step": 1, "planActive": True, "sections": ["base:system", "plan:policy"],
                         "tools": ["read_file", "write_file", "exit_plan_mode"]}, turn=1)
    c("tool/call", {"callId": "call-1", "name": "read_file", "arguments": {"path": "parser.py"}}, turn=1)
    c("tool/result", {"callId": "call-1", "ok": True, "content": "import re\n\ndef tokenize(src): ...\n"}, turn=1)
    c("request/header", {"step": 2, "planActive": True, "sections": ["base:system", "plan:policy"],
                         "tools": ["read_file", "write_file", "exit_plan_mode"]}, turn=1)
    plan = "# Split the tokenizer\n\n1. Move `tokenize` to tokenizer.py\n2. Import it from parser.py\n3. Run the tests\n"
    c("tool/call", {"callId": "call-2", "name": "exit_plan_mode", "arguments": {"plan": plan}}, turn=1)
    c("tool/result", {"callId": "call-2", "ok": True, "content": "{\"approved\": true}"}, turn=1)
    s.plan(False, turn=1)
    c("request/header", {"step": 3, "planActive": False, "sections": ["base:system"],
                         "tools": ["read_file", "write_file", "exit_plan_mode"]}, turn=1)
    c("tool/call", {"callId": "call-3", "name": "write_file", "arguments": {"path": "tokenizer.py"}}, turn=1)
    c("tool/result", {"callId": "call-3", "ok": True, "content": "wrote 14 lines"}, turn=1)
    c("request/header", {"step": 4, "planActive": False, "sections": ["base:system"],
                         "tools": ["read_file", "write_file", "exit_plan_mode"]}, turn=1)
    c("assistant/message", {"text": "Moved tokenize() to tokenizer.py; parser.py imports it."}, turn=1)
    c("turn/close", {"turn": 1, "stopReason": "end_turn"}, turn=1)
    # A goal with a budget of 3 rounds.
    created = utc_now()
    gid = "g-7f3a2c"
    s.goal(snapshot("create", gid, 1, "active", created_at=created))
    s.turn("Continue toward the goal: Make the parser tests pass (round 1 of 3)", cause="continuation",
           goal_round={"goalId": gid, "round": 1, "revision": 1}, steps=2, tool="read_file")
    s.turn("Continue toward the goal: Make the parser tests pass (round 2 of 3)", cause="continuation",
           goal_round={"goalId": gid, "round": 2, "revision": 1})
    s.goal(snapshot("pause", gid, 2, "paused", rounds=2, created_at=created))
    s.goal(snapshot("edit", gid, 3, "paused", rounds=2, max_rounds=5, created_at=created,
                    objective="Make the parser and tokenizer tests pass"))
    s.goal(snapshot("resume", gid, 4, "active", rounds=2, max_rounds=5, created_at=created,
                    objective="Make the parser and tokenizer tests pass"))
    s.turn("Continue toward the goal (round 3 of 5)", cause="continuation",
           goal_round={"goalId": gid, "round": 3, "revision": 4})
    s.goal(snapshot("block", gid, 5, "blocked", rounds=3, max_rounds=5, created_at=created,
                    objective="Make the parser and tokenizer tests pass",
                    blocked=("needs-decision", "Two tests contradict each other; which one is right?")))
    s.turn("test_empty_input is right; drop the other one.")
    s.goal(snapshot("resume", gid, 6, "active", rounds=3, max_rounds=5, created_at=created,
                    objective="Make the parser and tokenizer tests pass"))
    s.turn("Continue toward the goal (round 4 of 5)", cause="continuation",
           goal_round={"goalId": gid, "round": 4, "revision": 6})
    s.goal(snapshot("complete", gid, 7, "complete", rounds=4, max_rounds=5, created_at=created,
                    objective="Make the parser and tokenizer tests pass"))


def test_sample_builder_makes_a_sound_log_with_every_event_type(tmp_path):
    with SessionStore.create(tmp_path, "sample", title="Split the tokenizer") as store:
        build_sample_session(store)
        state = store.state
        types = {e.__class__.__struct_config__.tag for e in store.events()}
    assert types == {"session/start", "turn/open", "turn/close", "user/message", "request/header",
                     "assistant/message", "tool/call", "tool/result", "plan/mode", "goal/change"}
    result = replay(tmp_path / "sample" / "log.jsonl", use_checkpoint=False)
    assert result.state == state
    assert state.goal.goal.phase == "complete" and state.goal.rounds_started == 4
    assert state.plan.active is False and state.plan.header_active is False


def test_shipped_sample_log_is_sound():
    # examples/sample-session/log.jsonl is what `./run demo` shows until `dshd demo` exists.
    proc = subprocess.run(DSHD + ["log", "verify", str(SAMPLE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sound" in proc.stdout
    result = replay(SAMPLE, use_checkpoint=False)
    assert result.state.goal.goal is not None and result.torn_tail is None
