"""permission/decision: the fold's rules and their exact reasons (docs/log-format.md), the
same through the replay fast path, and the store's single writer."""

from __future__ import annotations

import json

import pytest

from dshd.errors import DshError
from dshd.folds import replay
from dshd.services.store import SessionStore
from folds.test_fold_session import Builder


def decision(call_id="c1", tool="edit_file", outcome="allow-once", by="person", **extra):
    return {"callId": call_id, "tool": tool, "outcome": outcome, "by": by, **extra}


def in_turn() -> Builder:
    b = Builder().open()
    b.add("request/header", {"step": 1, "planActive": False, "sections": [], "tools": ["edit_file"]}, turn=1)
    b.add("tool/call", {"callId": "c1", "name": "edit_file", "arguments": {}}, turn=1)
    return b


@pytest.mark.parametrize(
    ("outcome", "by", "extra"),
    [
        ("allow-once", "person", {}),
        ("allow-session", "person", {"feedback": "fine, but keep it short"}),
        ("reject", "person", {"feedback": "no"}),
        ("allow-session", "session", {}),
        ("allow-once", "policy", {}),
        ("reject", "fail-closed", {}),
    ],
)
def test_consistent_decisions_are_accepted(outcome, by, extra):
    b = in_turn().add("permission/decision", decision(outcome=outcome, by=by, **extra), turn=1)
    assert b.state.turn.decided == frozenset({"c1"})
    b.add("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    assert b.state.turn.decided == frozenset()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (decision(by="policy", outcome="reject"), "permission/decision by policy cannot be reject"),
        (decision(by="session", outcome="allow-once"), "permission/decision by session cannot be allow-once"),
        (decision(by="fail-closed", outcome="allow-once"), "permission/decision by fail-closed cannot be allow-once"),
        (decision(by="fail-closed", outcome="reject", feedback="x"), "permission/decision by fail-closed carries feedback"),
        (decision(call_id=" "), "permission/decision needs a callId and a tool"),
        (decision(tool=""), "permission/decision needs a callId and a tool"),
    ],
)
def test_inconsistent_decisions_are_rejected(data, reason):
    assert in_turn().rejects("permission/decision", data, turn=1) == reason


def test_a_decision_names_a_call_waiting_for_its_result():
    assert in_turn().rejects("permission/decision", decision(call_id="c9"), turn=1) == (
        "permission/decision for call c9, which is not waiting for its result"
    )
    done = in_turn().add("tool/result", {"callId": "c1", "ok": True, "content": ""}, turn=1)
    assert done.rejects("permission/decision", decision(), turn=1) == (
        "permission/decision for call c1, which is not waiting for its result"
    )


def test_one_decision_per_call_and_only_inside_a_turn():
    b = in_turn().add("permission/decision", decision(), turn=1)
    assert b.rejects("permission/decision", decision(outcome="reject"), turn=1) == "second permission/decision for call c1"
    assert Builder().rejects("permission/decision", decision()) == "permission/decision outside a turn"
    assert in_turn().rejects("permission/decision", decision()) == "permission/decision outside a turn"  # no envelope turn


def test_unknown_outcome_or_decider_is_malformed():
    store_line = json.dumps({"type": "permission/decision", "seq": 2, "at": "2026-11-29T18:00:00.000Z", "turn": 1,
                             "data": decision(by="robot")})
    from dshd.folds.events import decode_line

    with pytest.raises(Exception, match="robot|by"):
        decode_line(store_line.encode())


def test_replay_fast_path_agrees_and_names_the_line(tmp_path):
    store = SessionStore.create(tmp_path, "s-perm")
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    store.commit("tool/call", {"callId": "c1", "name": "edit_file", "arguments": {}}, turn=1)
    store.commit("permission/decision", decision(), turn=1, writer="approvals")
    store.commit("tool/result", {"callId": "c1", "ok": True, "content": "done"}, turn=1)
    with pytest.raises(ValueError, match="written only by writer='approvals'"):
        store.commit("permission/decision", decision(call_id="c2"), turn=1)
    store.close()
    path = tmp_path / "s-perm" / "log.jsonl"
    assert replay(path, use_checkpoint=False).state.turn.decided == frozenset({"c1"})
    # A decision for c1 appended by hand after its result: replay names its line and the reason.
    line = {"type": "permission/decision", "seq": 6, "at": "2026-11-29T18:00:00.000Z", "turn": 1,
            "data": decision(outcome="reject", by="fail-closed")}
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    with pytest.raises(DshError) as info:
        replay(path, use_checkpoint=False)
    assert info.value.data == {
        "seq": 6, "line": 6, "reason": "permission/decision for call c1, which is not waiting for its result",
    }
