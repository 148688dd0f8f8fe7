"""SessionStore (docs/architecture.md layer 3): the single commit path of a session."""

from __future__ import annotations

import errno
import logging
import re

import pytest

from dshd.folds import FoldError, replay
from dshd.folds.events import GoalChange, PlanMode, TurnOpen
from dshd.services import store as store_module
from dshd.log import SessionLog
from dshd.services.store import SessionStore

AT = "2026-11-29T18:40:18.123Z"

# The real values (1000, 1024) make these tests do thousands of fsyncs; the logic under
# test is the same with small ones.
SMALL_EVERY = 40


@pytest.fixture
def small_intervals(monkeypatch):
    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY", SMALL_EVERY)
    monkeypatch.setattr(store_module, "_INDEX_EVERY", 16)


def goal_create(goal_id="g1", max_rounds=3):
    return {
        "version": 1,
        "op": "create",
        "goal": {"id": goal_id, "revision": 1, "objective": "ship it", "phase": "active", "maxRounds": max_rounds},
        "roundsStarted": 0,
        "createdAt": AT,
        "updatedAt": AT,
    }


def test_create_writes_session_start_and_open_replays(tmp_path):
    store = SessionStore.create(tmp_path, "s1", title="first")
    assert store.state.seq == 1 and store.state.title == "first" and store.session_id == "s1"
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    store.commit("goal/change", goal_create(), writer="goals")
    before = store.state
    store.close()
    again = SessionStore.open(tmp_path, "s1")
    try:
        assert again.state == before
        assert again.checkpoint_status == "used"
        assert [type(e) for e in again.events()][1:] == [TurnOpen, GoalChange]
    finally:
        again.close()


def test_commit_envelope_seq_and_rfc3339_utc_ms(tmp_path):
    with SessionStore.create(tmp_path, "s1") as store:
        event = store.commit("plan/mode", {"active": True}, writer="plan")
    assert event.seq == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", event.at)
    assert isinstance(event, PlanMode) and event.data.active is True


def test_fold_error_writes_nothing(tmp_path):
    with SessionStore.create(tmp_path, "s1") as store:
        size = store.path.stat().st_size
        with pytest.raises(FoldError, match="turn/close with no open turn"):
            store.commit("turn/close", {"turn": 1, "stopReason": "end"}, turn=1)
        assert store.path.stat().st_size == size and store.state.seq == 1
        # the next good event still gets seq 2
        assert store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1).seq == 2


@pytest.mark.parametrize(
    "type_, data, writer",
    [
        ("plan/mode", {"active": True}, None),
        ("plan/mode", {"active": True}, "goals"),
        ("goal/change", goal_create(), "plan"),
        ("goal/change", goal_create(), None),
    ],
)
def test_ownership_plan_mode_and_goal_change_need_their_writer(tmp_path, type_, data, writer):
    with SessionStore.create(tmp_path, "s1") as store:
        with pytest.raises(ValueError, match="written only by"):
            store.commit(type_, data, writer=writer)
        assert store.state.seq == 1
        assert len(store.events()) == 1


def test_bad_payload_is_a_clear_error_and_writes_nothing(tmp_path):
    with SessionStore.create(tmp_path, "s1") as store:
        with pytest.raises(ValueError, match=r"\$\.active"):
            store.commit("plan/mode", {"active": "false"}, writer="plan")
        with pytest.raises(ValueError, match="unknown event type"):
            store.commit("plan/nonsense", {})
        with pytest.raises(ValueError, match="unknown field"):
            store.commit("plan/mode", {"active": True, "extra": 1}, writer="plan")
        assert len(store.events()) == 1


def test_listeners_run_after_commit_and_a_raising_one_is_logged_and_ignored(tmp_path, caplog):
    seen = []
    with SessionStore.create(tmp_path, "s1") as store:

        def boom(event):
            raise RuntimeError("listener bug")

        store.add_listener(boom)
        remove = store.add_listener(lambda e: seen.append((e.seq, store.state.seq)))
        with caplog.at_level(logging.ERROR, logger="dshd"):
            store.commit("plan/mode", {"active": True}, writer="plan")
        assert seen == [(2, 2)]  # state was already set when the listener ran
        assert "listener bug" in caplog.text
        remove()
        store.commit("plan/mode", {"active": False}, writer="plan")
        assert seen == [(2, 2)]
        assert store.state.plan.active is False


def test_events_after_seq_and_limit(tmp_path):
    with SessionStore.create(tmp_path, "s1") as store:
        for i in range(5):
            store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
        assert [e.seq for e in store.events()] == [1, 2, 3, 4, 5, 6]
        assert [e.seq for e in store.events(after_seq=3)] == [4, 5, 6]
        assert [e.seq for e in store.events(after_seq=1, limit=2)] == [2, 3]
        assert store.events(after_seq=6) == []
        assert store.events(limit=0) == []


@pytest.mark.parametrize("bad", ["", "../x", "/etc", "a/b", ".", "..", "x" * 200, "a b"])
def test_session_id_must_be_a_token(tmp_path, bad):
    from dshd.errors import DshError

    with pytest.raises(DshError) as info:
        SessionStore.create(tmp_path, bad)
    assert info.value.kind == "invalid-params" and info.value.data == {"field": "sessionId"}


def test_create_existing_session_fails_and_keeps_it(tmp_path):
    SessionStore.create(tmp_path, "s1").close()
    with pytest.raises(FileExistsError):
        SessionStore.create(tmp_path, "s1")
    with SessionStore.open(tmp_path, "s1") as store:
        assert store.state.seq == 1


def test_open_missing_session(tmp_path):
    with pytest.raises(FileNotFoundError):
        SessionStore.open(tmp_path, "nope")


def test_checkpoint_written_every_n_events(tmp_path, small_intervals):
    CHECKPOINT_EVERY = store_module.CHECKPOINT_EVERY
    with SessionStore.create(tmp_path, "s1") as store:
        cp = store.dir / "projection.json"
        for i in range(CHECKPOINT_EVERY - 2):
            store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
        assert not cp.exists()
        store.commit("plan/mode", {"active": True}, writer="plan")  # event number CHECKPOINT_EVERY
        assert cp.exists()
        result = replay(store.path)
        assert result.checkpoint == "used" and result.tail_events == 0


def test_closed_store_rejects_commit(tmp_path):
    store = SessionStore.create(tmp_path, "s1")
    store.close()
    store.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        store.commit("plan/mode", {"active": True}, writer="plan")


def test_events_after_seq_across_index_points_and_reopen(tmp_path, small_intervals):
    every = store_module._INDEX_EVERY
    n = every * 2 + 5
    with SessionStore.create(tmp_path, "s1") as store:
        for i in range(n):
            store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
        total = store.state.seq
        for after in (0, 1, every - 2, every - 1, every, every + 1, 2 * every - 1, 2 * every, 2 * every + 1, total - 1, total, total + 5):
            got = [e.seq for e in store.events(after_seq=after, limit=3)]
            assert got == list(range(after + 1, min(after + 3, total) + 1)), after
    with SessionStore.open(tmp_path, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
        for after in (0, 5, 2 * every - 3, total - 1, total, total + 1):
            got = [e.seq for e in store.events(after_seq=after, limit=2)]
            assert got == list(range(after + 1, min(after + 2, total + 1) + 1)), after
        assert [e.seq for e in store.events(after_seq=-3, limit=1)] == [1]


def test_checkpoint_write_failure_never_fails_open_commit_or_close(tmp_path, caplog, small_intervals, monkeypatch):
    CHECKPOINT_EVERY = store_module.CHECKPOINT_EVERY
    with SessionStore.create(tmp_path, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
    cp = tmp_path / "s1" / "projection.json"
    cp.unlink()
    # (A folder where the temp file goes is refused outright now: unsafe-path.) The disk
    # refusing the temp file makes every checkpoint write fail.
    def no_space(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.dir / "projection.json.tmp"))

    monkeypatch.setattr(SessionLog, "write_checkpoint", no_space)
    with caplog.at_level(logging.ERROR, logger="dshd"):
        with SessionStore.open(tmp_path, "s1") as store:
            assert store.checkpoint_status == "absent"
            for i in range(CHECKPOINT_EVERY + 1):
                store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
            state = store.state
    assert "checkpoint write failed" in caplog.text
    assert not cp.exists()
    monkeypatch.undo()
    with SessionStore.open(tmp_path, "s1") as store:
        assert store.state == state


@pytest.mark.parametrize("kwargs", [{"title": 7}, {"forked_from": {"sessionId": "s0"}}, {"forked_from": "s0@3"}])
def test_create_with_bad_start_data_creates_nothing(tmp_path, kwargs):
    with pytest.raises(ValueError, match="invalid session/start"):
        SessionStore.create(tmp_path, "s1", **kwargs)
    assert not (tmp_path / "s1" / "log.jsonl").exists()
    with SessionStore.create(tmp_path, "s1", title="ok", forked_from={"sessionId": "s0", "seq": 3}) as store:
        assert store.state.forked_from.seq == 3 and store.state.title == "ok"


def test_commits_from_several_threads_get_unique_gap_free_seqs(tmp_path):
    import threading

    seen = []
    with SessionStore.create(tmp_path, "s1") as store:
        store.add_listener(lambda e: seen.append(e.seq))

        def work(k):
            for i in range(25):
                store.commit("assistant/message", {"text": f"thread {k} message {i}"})

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.state.seq == 101
        assert seen == list(range(2, 102))  # listeners in commit order, each event once
    assert replay(tmp_path / "s1" / "log.jsonl").events == 101
