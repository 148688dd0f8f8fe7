"""The current goal's rounds of one live session (G-22): folds/rounds.py over its log, read
whole once, then only the events committed since each read.

Nothing here lives only in the process: every answer is the fold of the log as it stands
(a session opened again, forked or reloaded folds its own log afresh), so what
``dsh/goal/rounds`` answers is the log's.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from dshd.folds.rounds import GoalRounds, RoundsFold
from dshd.services.followed_fold import FollowedFold

if TYPE_CHECKING:
    from dshd.services.store import SessionStore


class GoalRoundsLog:
    def __init__(self, store: "SessionStore") -> None:
        self._fold = FollowedFold(store, RoundsFold, RoundsFold.feed_line, RoundsFold.apply)

    def rounds(self) -> GoalRounds:
        """The current goal's rounds, oldest first."""
        return self._fold.folded().result()


# One per open store, shared by every connection of this process; gone with its store (a
# reload opens a new store, which folds its log afresh).
_LIVE: "weakref.WeakKeyDictionary[SessionStore, GoalRoundsLog]" = weakref.WeakKeyDictionary()
_LIVE_LOCK = threading.Lock()


def live_rounds(store: "SessionStore") -> GoalRoundsLog:
    """The rounds view of an open session's store (made on first use)."""
    with _LIVE_LOCK:
        view = _LIVE.get(store)
        if view is None:
            view = _LIVE[store] = GoalRoundsLog(store)
        return view
