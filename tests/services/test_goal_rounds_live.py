"""GoalRoundsLog: the rounds of an open session folded once, then only the events
committed since; after every step it equals the fold of the whole log."""

from __future__ import annotations

from pathlib import Path

from dshd.folds.rounds import goal_rounds
from dshd.services.goal_rounds import live_rounds
from rounds_log import Log


def test_the_live_rounds_follow_each_commit_and_equal_the_whole_fold(tmp_path: Path) -> None:
    log = Log(tmp_path / "sessions")
    try:
        live = live_rounds(log.store)
        assert live_rounds(log.store) is live  # one per open store

        def check() -> None:
            assert live.rounds() == goal_rounds(log.store.events())

        check()  # the first read folds the log whole (no goal yet)
        log.goal_change("create", 0)
        log.round(1.0)
        check()  # a running round, read from the events since
        log.reply(2.0, 100, 10)
        log.call(2.0, "c1")
        log.decision(5.0, "c1")
        log.result(5.5, "c1")
        check()
        log.close(6.0)
        log.round(7.0)
        log.close(8.0, "cancelled")
        check()
        assert [(r.round, r.outcome, r.waited_ms) for r in live.rounds().rounds] == [(1, "end-turn", 3000), (2, "cancelled", 0)]
        log.goal_change("clear", 9.0)
        check()
        assert live.rounds().goal_id is None
    finally:
        log.store.close()
