"""A fold kept beside one open session's store: its log read whole once (line by line, so a
fold may decode only what it reads), then only the events committed since each read.

Nothing here lives only in the process: every answer is the fold of the log as it stands
(a session opened again, forked or reloaded folds its own log afresh). The plans of record
(``plan_records.py``) and the goal's rounds (``goal_rounds.py``) are two such folds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from dshd.services.store import SessionStore

F = TypeVar("F")


class FollowedFold(Generic[F]):
    """``make()`` builds an empty fold; ``feed_line(fold, raw)`` folds one log line of the
    first read, ``feed_event(fold, event)`` one event committed after it."""

    def __init__(
        self,
        store: "SessionStore",
        make: Callable[[], F],
        feed_line: Callable[[F, bytes], Any],
        feed_event: Callable[[F, Any], Any],
    ) -> None:
        self._store = store
        self._make = make
        self._feed_line = feed_line
        self._feed_event = feed_event
        self._fold: F | None = None
        self._seq = 0  # the last seq folded
        self._lock = threading.Lock()

    def folded(self) -> F:
        """The fold, brought up to the store's last committed event."""
        with self._lock:
            if self._fold is None:
                fold = self._make()
                count = 0

                def line(raw: bytes) -> None:
                    nonlocal count
                    count += 1  # line number == seq in a replayed log
                    self._feed_line(fold, raw)

                self._store.each_line(line)
                self._fold, self._seq = fold, count
            elif self._store.state.seq > self._seq:
                fold = self._fold

                def event(ev: Any) -> None:
                    self._feed_event(fold, ev)
                    self._seq = ev.seq

                self._store.each_event(event, after_seq=self._seq)
            return self._fold
