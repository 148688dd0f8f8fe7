"""SessionStore.copy_events: a fork's prefix is copied as written (times, turns, data),
checked by the fold, durable a batch at a time; a bad event writes nothing of its batch."""

from __future__ import annotations

import msgspec
import pytest

from dshd.folds import FoldError, replay
from dshd.services.store import SessionStore

SID_A = "s-01aaaaaaaaaaaaaaaaaaaaaaaa"
SID_B = "s-01bbbbbbbbbbbbbbbbbbbbbbbb"


def _source(tmp_path, turns: int) -> SessionStore:
    store = SessionStore.create(tmp_path, SID_A, title="source")
    store.commit("plan/mode", {"active": True}, writer="plan")
    for n in range(1, turns + 1):
        store.commit("turn/open", {"turn": n, "cause": "prompt"}, turn=n)
        store.commit("user/message", {"text": f"do {n}", "source": "user"}, turn=n)
        store.commit("request/header", {"step": 1, "planActive": True, "sections": [], "tools": []}, turn=n)
        store.commit("assistant/message", {"text": f"done {n}"}, turn=n)
        store.commit("turn/close", {"turn": n, "stopReason": "end-turn"}, turn=n)
    return store


def test_copy_keeps_each_event_but_its_session(tmp_path):
    source = _source(tmp_path, turns=30)
    fork = SessionStore.create(tmp_path, SID_B, forked_from={"sessionId": SID_A, "seq": source.state.seq})
    copied = fork.copy_events(source.events(after_seq=1), batch=7)
    assert copied == source.state.seq - 1
    original, copy = source.events(after_seq=1), fork.events(after_seq=1)
    assert [msgspec.to_builtins(e) for e in copy] == [msgspec.to_builtins(e) for e in original]
    assert fork.state.plan == source.state.plan and fork.state.turn == source.state.turn
    fork.close()
    source.close()
    assert replay(tmp_path / SID_B / "log.jsonl", use_checkpoint=False).state.seq == copied + 1


def test_copy_rejected_by_the_fold_writes_nothing_of_the_batch(tmp_path):
    source = _source(tmp_path, turns=2)
    fork = SessionStore.create(tmp_path, SID_B)
    size_before = fork.path.stat().st_size
    events = source.events(after_seq=1)
    # Drop a turn/open: the next in-turn event no longer follows the prefix.
    broken = [e for e in events if type(e).__name__ != "TurnOpen" or e.data.turn != 2]
    with pytest.raises(FoldError):
        fork.copy_events(broken, batch=1000)
    assert fork.path.stat().st_size == size_before and fork.state.seq == 1
    fork.close()
    source.close()
