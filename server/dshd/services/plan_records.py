"""The plans of record of one live session (P-21, P-22): folds/plans.py over its log, read
whole once, then only the events committed since each read.

Nothing here lives only in the process: every value is the fold of the log as it stands
(a session opened again, forked or reloaded folds its own log afresh), so what
``dsh/plan/history`` answers and what ``plan:approved`` renders are the log's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from dshd.folds.plans import PlanHistory, PlanRecord

if TYPE_CHECKING:
    from dshd.services.store import SessionStore


class PlanRecords:
    def __init__(self, store: "SessionStore") -> None:
        self._store = store
        self._fold: PlanHistory | None = None
        self._seq = 0  # the last seq folded
        self._lock = threading.Lock()

    def history(self) -> list[PlanRecord]:
        """Every plan presented in the session, oldest first."""
        return list(self._folded().records)

    def approved(self) -> PlanRecord | None:
        """The plan of record: the last approved, unless a ``plan/forget`` named it since."""
        return self._folded().approved

    def _folded(self) -> PlanHistory:
        with self._lock:
            if self._fold is None:
                fold = PlanHistory()
                count = 0

                def line(raw: bytes) -> None:
                    nonlocal count
                    count += 1  # line number == seq in a replayed log
                    fold.feed_line(raw)

                self._store.each_line(line)
                self._fold, self._seq = fold, count
            elif self._store.state.seq > self._seq:
                fold = self._fold

                def event(ev) -> None:
                    fold.feed(ev)
                    self._seq = ev.seq

                self._store.each_event(event, after_seq=self._seq)
            return self._fold
