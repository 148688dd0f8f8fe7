"""fold_goal against a plain restatement of G-3..G-8 and the token rules (an independent
model), on random sequences of goal writes, rounds and model replies with usage, most of
them slightly wrong: the fold accepts exactly what the model accepts, and then agrees with
it on the folded values."""

from __future__ import annotations

import pytest

from dataclasses import dataclass, field

import msgspec
import hypothesis
from hypothesis import given, settings
from hypothesis import strategies as st

from dshd.folds import FoldError, GoalState, fold_goal
from dshd.folds.events import AssistantMessage, GoalChange, UserMessage

PHASES = ["active", "paused", "blocked", "complete"]
OPS = ["create", "edit", "pause", "resume", "complete", "block", "clear", "round", "usage"]
TARGET = {"pause": "paused", "resume": "active", "complete": "complete", "block": "blocked"}


@dataclass
class Model:
    goal_id: str | None = None
    revision: int = 0
    phase: str | None = None
    max_rounds: int = 0
    rounds: int = 0
    created: str | None = None
    used: set = field(default_factory=set)
    max_tokens: int | None = None
    tokens: int = 0  # usage counted in the current goal's round turns
    round_turn: int | None = None  # the turn of its latest round

    def accepts(self, a: dict) -> bool:
        op = a["op"]
        live = self.goal_id is not None
        if op == "usage":
            return True  # a reply never breaks a goal rule; it may only count
        # a blockedReason is written exactly when the phase is blocked; its code may be bad
        reason_ok = a["phase"] != "blocked" or a["reason_ok"]
        budget_ok = a["max_tokens"] is None or a["max_tokens"] >= 1
        counted = 0 if op == "create" else self.tokens
        # tokensUsed is the count; absent only while nothing was counted (older logs)
        tokens_ok = a["tokens"] == counted or (a["tokens"] is None and counted == 0)
        if op == "create":
            return ((not live or self.phase == "complete") and a["id"] not in self.used and a["revision"] == 1
                    and a["phase"] == "active" and a["rounds"] == 0 and a["max"] >= 1 and reason_ok
                    and budget_ok and tokens_ok)
        if op == "clear":
            return live and a["id"] == self.goal_id and a["revision"] == self.revision
        if op == "round":
            return (live and a["id"] == self.goal_id and self.phase == "active" and a["revision"] == self.revision
                    and a["round"] == self.rounds + 1 and 1 <= a["round"] <= self.max_rounds
                    and (self.max_tokens is None or self.tokens < self.max_tokens))
        if not (live and self.phase != "complete" and a["id"] == self.goal_id and a["revision"] == self.revision + 1
                and a["created"] == self.created and a["rounds"] == self.rounds and a["max"] >= 1 and reason_ok
                and budget_ok and tokens_ok):
            return False
        if op == "edit":
            return a["phase"] == self.phase and a["max"] >= self.rounds
        sources = {"pause": {"active"}, "resume": {"paused", "blocked"}, "complete": {"active", "paused", "blocked"},
                   "block": {"active", "paused"}}[op]
        if self.phase not in sources or a["phase"] != TARGET[op]:
            return False
        if op == "resume":
            return self.rounds < a["max"] and (a["max_tokens"] is None or self.tokens < a["max_tokens"])
        return True

    def apply(self, a: dict) -> None:
        op = a["op"]
        if op == "usage":
            if self.goal_id is not None and a["turn"] == self.round_turn:
                self.tokens += a["usage"]
        elif op == "clear":
            self.goal_id, self.phase, self.rounds, self.created = None, None, 0, None
            self.tokens, self.round_turn = 0, None
        elif op == "round":
            self.rounds, self.round_turn = a["round"], a["turn"]
        else:
            if op == "create":
                self.used.add(a["id"])
                self.rounds, self.created, self.tokens, self.round_turn = 0, a["created"], 0, None
            self.goal_id, self.revision, self.phase, self.max_rounds = a["id"], a["revision"], a["phase"], a["max"]
            self.max_tokens = a["max_tokens"]


def to_event(a: dict):
    op = a["op"]
    if op == "usage":
        data = {"text": "ok", "usage": {"inputTokens": a["usage"] - 1, "outputTokens": 1}}
        return msgspec.convert({"seq": 2, "at": "t", "turn": a["turn"], "data": data}, AssistantMessage)
    if op == "round":
        data = {"text": "go", "source": "plugin", "goalRound": {"goalId": a["id"], "round": a["round"], "revision": a["revision"]}}
        return msgspec.convert({"seq": 2, "at": "t", "turn": a["turn"], "data": data}, UserMessage)
    if op == "clear":
        data = {"version": 1, "op": "clear", "cleared": {"id": a["id"], "revision": a["revision"]}, "clearedAt": "t"}
        return msgspec.convert({"seq": 2, "at": "t", "data": data}, GoalChange)
    goal = {"id": a["id"], "revision": a["revision"], "objective": "o", "phase": a["phase"], "maxRounds": a["max"]}
    if a["max_tokens"] is not None:
        goal["maxTokens"] = a["max_tokens"]
    if a["phase"] == "blocked":
        goal["blockedReason"] = {"code": "stuck" if a["reason_ok"] else "Stuck", "message": "m"}
    data = {"version": 1, "op": op, "goal": goal, "roundsStarted": a["rounds"], "createdAt": a["created"], "updatedAt": "t"}
    if a["tokens"] is not None:
        data["tokensUsed"] = a["tokens"]
    return msgspec.convert({"seq": 2, "at": "t", "data": data}, GoalChange)


@st.composite
def action(draw, model: Model):
    """Mostly right, each field wrong now and then (about 1 in 13), so long valid runs happen."""

    def usually(right, *wrong):
        return draw(st.sampled_from([right] * 12 + list(wrong)))

    op = draw(st.sampled_from(OPS))
    if op == "create":
        goal_id = usually(f"g{len(model.used) + 1}", "g1", "g2")
        revision = usually(1, 0, 2)
        phase = usually("active", *PHASES)
        rounds = usually(0, 1)
        created = "c0"
    else:
        goal_id = usually(model.goal_id or "g1", "g1", "g2", "g9")
        step = 0 if op in ("clear", "round") else 1
        revision = usually(model.revision + step, model.revision + step - 1, model.revision + step + 1)
        phase = usually(model.phase if op == "edit" else TARGET.get(op, "active"), *PHASES)
        rounds = usually(model.rounds, model.rounds + 1, model.rounds - 1)
        created = usually(model.created or "c0", "c9")
    return {
        "op": op,
        "id": goal_id,
        "revision": revision,
        "phase": phase or "active",
        "max": usually(model.max_rounds or 3, 0, 1, 2, 5, model.rounds),
        "rounds": rounds,
        "round": usually(model.rounds + 1, model.rounds, model.rounds + 2, 0, -1),
        "created": created,
        "reason_ok": usually(True, False),
        # budgets small enough that rounds and replies run into them
        "max_tokens": usually(model.max_tokens, None, 0, 1, 30, 60, model.tokens, model.tokens + 1),
        "tokens": usually(0 if op == "create" else model.tokens, None, model.tokens + 1, model.tokens - 1),
        "turn": usually(model.round_turn or 1, 1, 2, 3) if op == "usage" else draw(st.integers(1, 3)),
        "usage": draw(st.integers(1, 25)),
    }


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.data())
def test_g05_fold_goal_accepts_exactly_what_the_rules_allow(data):
    model = Model()
    state = GoalState()
    accepted = 0
    for _ in range(40):
        a = data.draw(action(model))
        event = to_event(a)
        expect = model.accepts(a)
        try:
            new = fold_goal(state, event)
            ok = True
        except FoldError as exc:
            ok, reason = False, exc.reason
        assert ok == expect, (a, None if ok else reason, model)
        if ok:
            accepted += 1
            hypothesis.event(f"accepted {a['op']}")
            model.apply(a)
            state = new
            if model.goal_id is None:
                assert state.goal is None and (state.cleared is not None or not model.used)
            else:
                g = state.goal
                assert (g.id, g.revision, g.phase, g.maxRounds) == (model.goal_id, model.revision, model.phase, model.max_rounds)
                assert state.rounds_started == model.rounds and state.created_at == model.created
                assert g.maxTokens == model.max_tokens
            assert (state.tokens_used, state.round_turn) == (model.tokens, model.round_turn)
            assert state.used_ids == model.used
