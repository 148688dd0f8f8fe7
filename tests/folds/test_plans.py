"""The plans-of-record fold (P-21): typed events and raw lines give one history, on a log
written by the real store, including lines built to fool the byte filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshd.folds import FoldError
from dshd.folds.replay import replay
from dshd.folds.plans import PlanComment, PlanHistory, plan_history, plan_history_of_lines, previous_for
from dshd.services.store import SessionStore

PLAN_A = "# Plan: A\n\n1. one\n"
PLAN_B = "## B, revised\n\n1. two\n"


def _store(tmp_path: Path) -> SessionStore:
    return SessionStore.create(tmp_path / ".dsh" / "sessions", "s-" + "0" * 25 + "7")


def _call(store, turn, call_id, name, arguments):
    store.commit("tool/call", {"callId": call_id, "name": name, "arguments": arguments}, turn=turn)


def test_history_from_events_and_from_lines_agree(tmp_path):
    store = _store(tmp_path)
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    # Another tool whose arguments and result name the plan tool and a plan call's id.
    _call(store, 1, "c-0", "read_file", {"path": "exit_plan_mode.md", "plan": "# not a plan"})
    store.commit("tool/result", {"callId": "c-0", "ok": True, "content": 'c-1 "turn/close" exit_plan_mode'}, turn=1)
    _call(store, 1, "c-1", "exit_plan_mode", {"plan": PLAN_A})
    store.commit(
        "tool/result",
        {
            "callId": "c-1",
            "ok": False,
            "content": "keep planning",
            "review": {"outcome": "revise", "feedback": "smaller", "comments": [{"line": 3, "text": "why?"}]},
        },
        turn=1,
    )
    _call(store, 1, "c-2", "exit_plan_mode", {"plan": "   "})  # blank: not a plan presented
    store.commit("tool/result", {"callId": "c-2", "ok": False, "content": "give the plan"}, turn=1)
    _call(store, 1, "c-3", "exit_plan_mode", {"plan": PLAN_B})
    store.commit("tool/result", {"callId": "c-3", "ok": True, "content": "{}", "review": {"outcome": "approved"}}, turn=1)
    _call(store, 1, "c-4", "exit_plan_mode", {"plan": PLAN_A})  # the turn ends before its review
    store.commit("turn/close", {"turn": 1, "stopReason": "cancelled"}, turn=1)
    store.commit("turn/open", {"turn": 2, "cause": "prompt"}, turn=2)
    _call(store, 2, "c-5", "exit_plan_mode", {"plan": PLAN_B})  # under review now
    path = store.path
    events = store.events()
    state = store.state
    store.close()

    records = plan_history(events)
    assert [(r.call_id, r.title, r.outcome) for r in records] == [
        ("c-1", "Plan: A", "revise"),
        ("c-3", "B, revised", "approved"),
        ("c-4", "Plan: A", "failed"),
        ("c-5", "B, revised", "pending"),
    ]
    assert records[0].feedback == "smaller" and records[0].comments == (PlanComment(3, "why?"),)
    assert records[1].feedback is None and records[1].comments is None
    assert [r.seq for r in records] == [e.seq for e in events if getattr(e.data, "callId", None) in {"c-1", "c-3", "c-4", "c-5"} and e.__class__.__name__ == "ToolCall"]
    # The byte-filtered read of the file's lines finds the same history.
    assert plan_history_of_lines(path.read_bytes().splitlines(keepends=True)) == records
    # P-22: the folded state knows the plan of record (c-3, where its call is) and the plan
    # call under review; replay's hot loop folds the same.
    seqs = {r.call_id: r.seq for r in records}
    assert (state.plan.approved_call, state.plan.approved_seq) == ("c-3", seqs["c-3"])
    assert state.plan.reviewing == (("c-5", seqs["c-5"]),)
    assert replay(path, use_checkpoint=False).state == state

    # P-23: the previous of c-5 is the last plan a person reviewed (c-3, approved): none;
    # of c-3 it is c-1, sent back.
    assert previous_for(records, "c-5") is None
    assert previous_for(records, "c-3") == records[0]
    assert previous_for(records, "c-1") is None


def test_a_result_written_before_review_data_is_read_by_its_opening(tmp_path):
    from dshd.folds.plans import SENT_BACK

    store = _store(tmp_path)
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    for call_id, ok, content in (("c-1", False, SENT_BACK + "\nFeedback: x"), ("c-2", True, "{}"), ("c-3", False, "could not")):
        _call(store, 1, call_id, "exit_plan_mode", {"plan": PLAN_A})
        store.commit("tool/result", {"callId": call_id, "ok": ok, "content": content}, turn=1)
    records = plan_history(store.events())
    store.close()
    assert [r.outcome for r in records] == ["revise", "approved", "failed"]


def test_plan_forget_drops_only_the_approved_plan_it_names_and_replay_agrees(tmp_path):
    store = _store(tmp_path)
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    approved = {"outcome": "approved"}
    for call_id in ("c-1", "c-2"):
        _call(store, 1, call_id, "exit_plan_mode", {"plan": PLAN_A})
        store.commit("tool/result", {"callId": call_id, "ok": True, "content": "{}", "review": approved}, turn=1)
    store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    # Only the plan plugin writes it, and it must name a call.
    with pytest.raises(ValueError, match="written only by writer='plan'"):
        store.commit("plan/forget", {"callId": "c-2"})
    with pytest.raises(FoldError, match="plan/forget needs a callId"):
        store.commit("plan/forget", {"callId": " "}, writer="plan")
    fold = PlanHistory()
    store.commit("plan/forget", {"callId": "c-1"}, writer="plan")  # not the approved one: no change
    store.each_event(fold.feed)
    assert fold.approved is not None and fold.approved.call_id == "c-2"
    assert store.state.plan.approved_call == "c-2" and store.state.plan.approved_seq == fold.approved.seq
    store.commit("plan/forget", {"callId": "c-2"}, writer="plan")
    assert (store.state.plan.approved_call, store.state.plan.approved_seq) == (None, 0)
    fold = PlanHistory()
    store.each_line(fold.feed_line)
    assert fold.approved is None and [r.outcome for r in fold.records] == ["approved", "approved"]
    state, path = store.state, store.path
    store.close()
    # The hot replay loop takes plan/forget through the reference fold: the same state.
    assert replay(path, use_checkpoint=False).state == state


def test_the_byte_filter_is_not_fooled_by_ids_or_a_line_written_by_hand(tmp_path):
    store = _store(tmp_path)
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    _call(store, 1, "tool/call", "exit_plan_mode", {"plan": PLAN_A})  # a provider's odd id
    store.commit("tool/result", {"callId": "tool/call", "ok": True, "content": "{}", "review": {"outcome": "approved"}}, turn=1)
    lines = store.path.read_bytes().splitlines(keepends=True)
    store.close()
    assert [r.outcome for r in plan_history_of_lines(lines)] == ["approved"]
    # The same call and result with their keys in another order (valid JSON, not ours).
    reordered = [json.dumps(dict(reversed(list(json.loads(line).items())))).encode() + b"\n" for line in lines]
    assert not reordered[2].startswith(b'{"type"')
    assert plan_history_of_lines(reordered) == plan_history_of_lines(lines)
