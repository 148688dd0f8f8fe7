"""Plans of record (P-21, P-22): every plan presented in a session, as a pure fold of its log.

A plan is the ``plan`` argument of an ``exit_plan_mode`` tool call (the plan plugin never
keeps it anywhere else); its outcome is the ``review`` of that call's result (P-20).
:func:`plan_history` folds typed events; :class:`PlanHistory` also takes raw log lines
and decodes only the few that can concern a plan, so a long session costs about what
reading its bytes costs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import msgspec
from msgspec import Struct

from dshd.folds.events import PlanForget, ToolCall, ToolResult, ToolResultData, TurnClose, TurnOpen, decode_line

PLAN_TOOL = "exit_plan_mode"
DEFAULT_TITLE = "Plan"

# The openings of the plan tool's two "keep planning" results (the plan plugin writes
# them). Only a log written before results carried ``review`` is read by them.
SENT_BACK = "The person wants you to keep planning."
APPROVED_WITH_FEEDBACK = "The approval came with feedback, so it is not a clean approval:"

_HEADING = re.compile(r"#{1,6}[ \t]+\S")
_TYPE_OPENING = b'{"type":"'  # how dshd's encoder starts every line (the tag first)
_TYPE_AT = len(_TYPE_OPENING)
_PLAN_TOOL_BYTES = PLAN_TOOL.encode()

PlanOutcome = Literal["approved", "revise", "failed", "pending"]


def first_heading(plan: str) -> str | None:
    """The text of the plan's first non-blank line if it is a markdown # heading."""
    for line in plan.splitlines():
        if line.strip():
            stripped = line.strip()
            return stripped.lstrip("#").strip() if _HEADING.match(stripped) else None
    return None


class PlanComment(Struct, frozen=True, gc=False):
    line: int  # 1-based line of the plan
    text: str


class PlanRecord(Struct, frozen=True, gc=False):
    """One plan presented for review. ``seq``/``at``: its ``exit_plan_mode`` call's.
    ``outcome`` "pending": no result yet (under review now); "failed": nothing was
    approved (the review could not happen, or the turn ended first)."""

    call_id: str
    seq: int
    title: str
    markdown: str
    outcome: PlanOutcome
    at: str
    feedback: str | None = None
    comments: tuple[PlanComment, ...] | None = None


def _judged(record: PlanRecord, result: ToolResultData) -> PlanRecord:
    review = result.review
    if review is None:  # a log written before P-20: read the plan tool's own openings
        if result.ok:
            return msgspec.structs.replace(record, outcome="approved")
        revised = result.content.startswith((SENT_BACK, APPROVED_WITH_FEEDBACK))
        return msgspec.structs.replace(record, outcome="revise" if revised else "failed")
    comments = tuple(PlanComment(c.line, c.text) for c in review.comments) if review.comments else None
    return msgspec.structs.replace(record, outcome=review.outcome, feedback=review.feedback, comments=comments)


class PlanHistory:
    """The fold, fed one event (:meth:`feed`) or one raw log line (:meth:`feed_line`) at a
    time, oldest first; :attr:`records` is the history so far, :attr:`approved` the plan
    of record (P-22): the last one approved, unless a ``plan/forget`` named it since."""

    def __init__(self) -> None:
        self.records: list[PlanRecord] = []
        self.approved: PlanRecord | None = None
        self._open: dict[str, int] = {}  # callId -> index of its record, until its result
        self._result_marks: dict[str, bytes] = {}  # callId -> its JSON text, to spot its result

    def feed(self, event) -> None:
        cls = event.__class__
        if cls is ToolCall:
            data = event.data
            if data.name != PLAN_TOOL:
                return
            plan = data.arguments.get("plan")
            if not isinstance(plan, str) or not plan.strip():
                return
            self._open[data.callId] = len(self.records)
            self._result_marks[data.callId] = msgspec.json.encode(data.callId)
            title = first_heading(plan) or DEFAULT_TITLE
            self.records.append(PlanRecord(data.callId, event.seq, title, plan, "pending", event.at))
        elif cls is ToolResult:
            index = self._open.pop(event.data.callId, None)
            if index is not None:
                del self._result_marks[event.data.callId]
                record = self.records[index] = _judged(self.records[index], event.data)
                if record.outcome == "approved":
                    self.approved = record
        elif cls is PlanForget:
            if self.approved is not None and self.approved.call_id == event.data.callId:
                self.approved = None
        elif cls is TurnClose or cls is TurnOpen:
            # A call whose turn ended without its result was never reviewed.
            for index in self._open.values():
                self.records[index] = msgspec.structs.replace(self.records[index], outcome="failed")
            self._open.clear()
            self._result_marks.clear()

    def feed_line(self, line: bytes) -> None:
        """One log line (already checked by replay). Only a plan tool's call, the result
        of an open one, a turn's end while one is open and a ``plan/forget`` are decoded.
        The type is read from the line's opening, where dshd writes it; a line written
        otherwise (by hand) is decoded whole."""
        if not line.startswith(_TYPE_OPENING):
            self.feed(decode_line(line))
            return
        kind = line[_TYPE_AT : line.find(b'"', _TYPE_AT)]
        if kind == b"tool/call":
            if _PLAN_TOOL_BYTES not in line:
                return
        elif kind == b"tool/result":
            if not self._open or not any(mark in line for mark in self._result_marks.values()):
                return
        elif kind == b"turn/close" or kind == b"turn/open":
            if not self._open:
                return
        elif kind != b"plan/forget":
            return
        self.feed(decode_line(line))


def plan_history(events: Iterable) -> list[PlanRecord]:
    """Every plan presented in the session the events are of, oldest first."""
    fold = PlanHistory()
    for event in events:
        fold.feed(event)
    return fold.records


def plan_history_of_lines(lines: Iterable[bytes]) -> list[PlanRecord]:
    """:func:`plan_history` over raw log lines (a bench or a command reading a file)."""
    fold = PlanHistory()
    for line in lines:
        fold.feed_line(line)
    return fold.records


def previous_for(records: list[PlanRecord], call_id: str) -> PlanRecord | None:
    """P-23: the plan a person last reviewed before the one of ``call_id`` (a plan that
    was never reviewed is skipped), when they sent it back; None otherwise."""
    index = next((i for i in range(len(records) - 1, -1, -1) if records[i].call_id == call_id), len(records))
    for record in reversed(records[:index]):
        if record.outcome in ("approved", "revise"):
            return record if record.outcome == "revise" else None
    return None
