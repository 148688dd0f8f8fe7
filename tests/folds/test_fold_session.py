"""apply / fold_open_turn / fold_plan_mode: envelope, turn and plan rules (docs/log-format.md)."""

from __future__ import annotations

import msgspec
import pytest

from dshd.folds import FoldError, PlanState, TurnState, apply, fold_open_turn, fold_plan_mode
from dshd.folds.events import Event

AT = "2026-11-29T18:00:00.000Z"


def event(seq, type_, data, turn=None):
    raw = {"type": type_, "seq": seq, "at": AT, "data": data}
    if turn is not None:
        raw["turn"] = turn
    return msgspec.convert(raw, Event)


START = {"sessionId": "s1", "formatVersion": 1}


class Builder:
    """Folds events with auto seq through apply (the reference path)."""

    def __init__(self):
        self.state = apply(None, event(1, "session/start", START))

    def next(self, type_, data, turn=None, seq=None):
        return event(self.state.seq + 1 if seq is None else seq, type_, data, turn)

    def add(self, type_, data, turn=None):
        self.state = apply(self.state, self.next(type_, data, turn))
        return self

    def rejects(self, type_, data, turn=None, seq=None) -> str:
        with pytest.raises(FoldError) as info:
            apply(self.state, self.next(type_, data, turn, seq))
        return info.value.reason

    def open(self, n=None, cause="prompt"):
        n = self.state.turn.last_turn + 1 if n is None else n
        return self.add("turn/open", {"turn": n, "cause": cause}, turn=n)

    def header(self, step, plan=False, turn=None):
        return self.add("request/header", {"step": step, "planActive": plan, "sections": [], "tools": []}, turn=turn)


def header_data(step, plan=False):
    return {"step": step, "planActive": plan, "sections": [], "tools": []}


# ---- envelope ---------------------------------------------------------------------------


def test_g05_line_1_must_be_session_start():
    with pytest.raises(FoldError, match="^line 1 must be session/start$"):
        apply(None, event(1, "plan/mode", {"active": True}))


def test_g05_first_seq_must_be_1():
    with pytest.raises(FoldError, match="^seq gap: expected 1, got 2$"):
        apply(None, event(2, "session/start", START))


def test_session_start_fills_state():
    state = apply(None, event(1, "session/start", {**START, "title": "t", "forkedFrom": {"sessionId": "s0", "seq": 7}}))
    assert state.session_id == "s1" and state.seq == 1 and state.title == "t"
    assert state.forked_from.sessionId == "s0" and state.last_at == AT
    assert state.plan == PlanState() and state.turn == TurnState()


def test_g05_session_start_only_on_line_1():
    assert Builder().rejects("session/start", START) == "session/start only on line 1"


def test_session_start_may_not_carry_a_turn():
    with pytest.raises(FoldError, match="^session/start has a turn$"):
        apply(None, event(1, "session/start", START, turn=1))


@pytest.mark.parametrize("seq, reason", [(3, "seq gap: expected 2, got 3"), (1, "seq repeat: expected 2, got 1"), (0, "seq repeat: expected 2, got 0")])
def test_g05_seq_must_be_previous_plus_one(seq, reason):
    assert Builder().rejects("plan/mode", {"active": True}, seq=seq) == reason


def test_apply_advances_seq_and_last_at_for_events_no_fold_concerns():
    b = Builder().open()
    before = b.state
    b.add("assistant/message", {"text": "hi"}, turn=1)
    assert b.state.seq == before.seq + 1
    assert b.state.plan is before.plan and b.state.turn is before.turn and b.state.goal is before.goal


# ---- turns (PM-13) ------------------------------------------------------------------------


def test_turn_open_and_close():
    b = Builder().open(cause="steer")
    assert b.state.turn == TurnState(1, True, 0, "steer")
    b.add("turn/close", {"turn": 1, "stopReason": "end_turn"}, turn=1)
    assert b.state.turn == TurnState(1, False, 0, None)
    b.open()
    assert b.state.turn.last_turn == 2 and b.state.turn.open


def test_turn_open_while_open_rejected():
    b = Builder().open()
    assert b.rejects("turn/open", {"turn": 2, "cause": "prompt"}) == "turn/open while turn 1 is open"


@pytest.mark.parametrize("n", [2, 0, 1])
def test_turn_numbers_grow_by_one(n):
    b = Builder()
    if n == 1:
        b.open().add("turn/close", {"turn": 1, "stopReason": "x"})
        n, expected = 1, 2
    else:
        expected = 1
    assert b.rejects("turn/open", {"turn": n, "cause": "prompt"}) == f"turn/open {n}: expected turn {expected}"


def test_turn_close_only_for_open_turn():
    assert Builder().rejects("turn/close", {"turn": 1, "stopReason": "x"}) == "turn/close with no open turn"
    b = Builder().open()
    assert b.rejects("turn/close", {"turn": 2, "stopReason": "x"}) == "turn/close 2 but the open turn is 1"


def test_request_header_only_inside_a_turn():
    assert Builder().rejects("request/header", header_data(1)) == "request/header outside a turn"


def test_request_header_steps_grow_by_one_from_1_in_each_turn():
    b = Builder().open()
    assert b.rejects("request/header", header_data(2)) == "request/header step 2: expected step 1"
    b.header(1).header(2)
    assert b.state.turn.step == 2
    assert b.rejects("request/header", header_data(2)) == "request/header step 2: expected step 3"
    b.add("turn/close", {"turn": 1, "stopReason": "x"}).open().header(1)
    assert b.state.turn.step == 1


def test_envelope_turn_must_name_open_turn():
    b = Builder()
    assert b.rejects("assistant/message", {"text": "x"}, turn=1) == "event in turn 1 but no turn is open"
    b.open()
    assert b.rejects("assistant/message", {"text": "x"}, turn=2) == "event in turn 2 but the open turn is 1"
    assert b.rejects("request/header", header_data(1), turn=3) == "event in turn 3 but the open turn is 1"
    b.add("assistant/message", {"text": "x"}, turn=1)  # naming it is fine
    b.add("assistant/message", {"text": "x"})  # turn is optional on the envelope


def test_envelope_turn_of_turn_open_and_close_matches_data():
    b = Builder()
    assert b.rejects("turn/open", {"turn": 1, "cause": "prompt"}, turn=2) == "envelope turn 2 differs from data turn 1"
    b.open()
    assert b.rejects("turn/close", {"turn": 1, "stopReason": "x"}, turn=2) == "envelope turn 2 differs from data turn 1"


def test_fold_open_turn_ignores_other_events_same_object():
    state = TurnState(3, True, 2, "prompt")
    assert fold_open_turn(state, event(5, "plan/mode", {"active": True})) is state


# ---- plan mode (PM-6, PM-14) --------------------------------------------------------------


def test_pm06_plan_is_last_plan_mode_else_false():
    b = Builder()
    assert b.state.plan.active is False
    b.add("plan/mode", {"active": True})
    assert b.state.plan.active is True
    b.add("plan/mode", {"active": True}).add("plan/mode", {"active": False})
    assert b.state.plan.active is False


def test_pm14_header_active_is_last_request_header():
    b = Builder().open()
    assert b.state.plan.header_active is None
    b.add("plan/mode", {"active": True}).header(1, plan=True)
    assert b.state.plan == PlanState(True, True)
    b.add("plan/mode", {"active": False})
    assert b.state.plan == PlanState(False, True)  # the header that built the step said "on"
    b.header(2, plan=False)
    assert b.state.plan == PlanState(False, False)


def test_fold_plan_mode_returns_same_object_when_unchanged():
    state = PlanState(True, True)
    assert fold_plan_mode(state, event(5, "plan/mode", {"active": True})) is state
    assert fold_plan_mode(state, event(5, "request/header", header_data(1, plan=True))) is state
    assert fold_plan_mode(state, event(5, "assistant/message", {"text": "x"})) is state


def test_folds_are_pure_inputs_unchanged():
    b = Builder().open()
    before = b.state
    snapshot = msgspec.json.encode(before)
    b.add("plan/mode", {"active": True}).header(1, plan=True)
    assert msgspec.json.encode(before) == snapshot
    with pytest.raises((AttributeError, TypeError)):
        before.seq = 99  # frozen
