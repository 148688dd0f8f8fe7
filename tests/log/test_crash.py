"""Crash safety (SPEC section 3): SIGKILL at random moments loses no acknowledged event;
a second process gets session-locked naming the holder and writes nothing."""

from __future__ import annotations

import pytest

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from dshd.folds import replay
from dshd.folds.events import GoalChange
from dshd.services.store import SessionStore
from log.test_log_sample import snapshot

CHILD = Path(__file__).with_name("crash_child.py")
SID = "crashy"
KILLS = 36


def spawn(mode: str, sessions: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(sessions), SID],
        stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def make_session(sessions: Path) -> None:
    with SessionStore.create(sessions, SID) as store:
        store.commit("goal/change", snapshot("create", "g1", 1, "active", max_rounds=5), writer="goals")


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_event(tmp_path):
    rng = random.Random(20261129)
    make_session(tmp_path)
    acked: dict[int, int] = {}  # seq -> goal revision, as the child saw them committed
    torn_tails = 0
    started = time.monotonic()
    for i in range(KILLS):
        child = spawn("append", tmp_path)
        ready = child.stdout.readline()
        assert ready.startswith(b"ready"), child.stderr.read().decode()
        time.sleep(rng.uniform(0, 0.04))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        for line in out.decode().split("\n")[:-1]:  # the last piece may be cut mid-line
            _, seq, revision = line.split()
            assert int(seq) not in acked, "a seq was acknowledged twice"
            acked[int(seq)] = int(revision)

        # Every reopen succeeds, cuts and reports a torn tail if any, and holds every ack.
        with SessionStore.open(tmp_path, SID) as store:
            if store.torn_tail is not None:
                torn_tails += 1
                assert store.torn_tail.saved_to.exists()
                assert store.torn_tail.saved_to.stat().st_size == store.torn_tail.length
            assert store.path.read_bytes().endswith(b"\n")
            events = store.events()
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            by_seq = {e.seq: e for e in events}
            for seq, revision in acked.items():
                assert isinstance(by_seq[seq], GoalChange) and by_seq[seq].data.goal.revision == revision
            # Revisions grow by one per event after create: nothing duplicated or skipped.
            revisions = [e.data.goal.revision for e in events if isinstance(e, GoalChange)]
            assert revisions == list(range(1, len(revisions) + 1))
    elapsed = time.monotonic() - started
    assert len(acked) > KILLS  # the children got real work done between kills
    # A read-only verify agrees with the store.
    assert replay(tmp_path / SID / "log.jsonl", use_checkpoint=False).events >= max(acked)
    print(f"{KILLS} kills, {len(acked)} acknowledged events, {torn_tails} torn tails cut, {elapsed:.1f} s")
    assert elapsed < 60


def test_second_process_gets_session_locked_naming_holder_and_writes_nothing(tmp_path):
    make_session(tmp_path)
    store = SessionStore.open(tmp_path, SID)
    try:
        size = store.path.stat().st_size
        child = spawn("try-open", tmp_path)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 3, err.decode()
        assert json.loads(out) == {"kind": "session-locked", "pid": os.getpid()}
        assert store.path.stat().st_size == size
        store.commit("plan/mode", {"active": True}, writer="plan")  # the holder goes on writing
    finally:
        store.close()
    # Once released, the other process gets in.
    child = spawn("try-open", tmp_path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    with SessionStore.open(tmp_path, SID) as again:
        events = again.events()
        assert [e.seq for e in events] == [1, 2, 3, 4]  # start, create, ours, the child's: no loss, no dup
        assert again.state.plan.active is False


def test_in_process_opener_is_refused_while_another_process_holds_it(tmp_path):
    make_session(tmp_path)
    holder = spawn("hold", tmp_path, stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"ready\n"
        from dshd.log import SessionLocked

        try:
            SessionStore.open(tmp_path, SID)
        except SessionLocked as exc:
            assert exc.kind == "session-locked" and exc.data == {"pid": holder.pid}
            assert str(holder.pid) in str(exc)
        else:
            raise AssertionError("opened a session another process holds")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    with SessionStore.open(tmp_path, SID) as store:
        assert store.state.seq == 2
