"""The plans of record of one live session (P-21, P-22): folds/plans.py over its log, read
whole once, then only the events committed since each read.

Nothing here lives only in the process: every value is the fold of the log as it stands
(a session opened again, forked or reloaded folds its own log afresh), so what
``dsh/plan/history`` answers and what ``plan:approved`` renders are the log's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dshd.folds.plans import PlanHistory, PlanRecord
from dshd.services.followed_fold import FollowedFold

if TYPE_CHECKING:
    from dshd.services.store import SessionStore


class PlanRecords:
    def __init__(self, store: "SessionStore") -> None:
        self._fold = FollowedFold(store, PlanHistory, PlanHistory.feed_line, PlanHistory.feed)

    def history(self) -> list[PlanRecord]:
        """Every plan presented in the session, oldest first."""
        return list(self._fold.folded().records)

    def approved(self) -> PlanRecord | None:
        """The plan of record: the last approved, unless a ``plan/forget`` named it since."""
        return self._fold.folded().approved
