"""The rounds of the current goal, a pure fold of the log (``dsh/goal/rounds``).

One record per round of the session's current goal: the round's turn (the envelope turn
of its ``user/message`` with ``goalRound``), when that turn opened and closed, the tokens
its model replies reported, its tool calls, how long it waited for a person, and how it
ended (the turn's ``stopReason``, ``"running"`` while open). No process state: the same
log gives the same records in any process, so a bench, the CLI and the daemon share it.

Waiting for a person: a round waits while a plan review (``exit_plan_mode``: until its
``tool/result``) or an approval the person was asked for (until the call's
``permission/decision`` by ``person``, or ``fail-closed`` when no answer came) is open.
The calls of one reply are all written first and then run one after the other, so a call
is asked about only once the call before it has its result: each wait starts at the later
of its call's ``at`` and the last ``tool/result`` of the turn, never counting another
call's run as waiting.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from msgspec import Struct

from dshd.folds.events import decode_line_view

# The tool whose call waits for a person's review until its result (plugins/plan.py's
# name; folds sit below plugins, so the name is repeated here as data of the log format).
PLAN_REVIEW_TOOL = "exit_plan_mode"
# Decisions that came after asking a person (a timeout fails closed after waiting too).
_ASKED_BY = frozenset({"person", "fail-closed"})

RUNNING = "running"


# Lines of these types are never decoded (read from the line's opening, where dshd writes
# the type; a line written otherwise is decoded, and its type then read as usual).
_UNREAD = tuple(
    b'{"type":"' + kind + b'"'
    for kind in (b"request/header", b"session/start", b"plan/mode", b"plan/forget", b"context/compact")
)


class RoundTokens(Struct, frozen=True, gc=False):
    """Tokens the model replies of one round reported: ``cached_input`` is the part of
    ``input`` the provider read from its prompt cache."""

    input: int = 0
    cached_input: int = 0
    output: int = 0


class GoalRoundRecord(Struct, frozen=True, gc=False):
    round: int
    revision: int
    turn: int
    started_at: str
    ended_at: str | None  # None while the round's turn is open
    tokens: RoundTokens
    estimated: bool  # some of the tokens are estimates (the provider reported none)
    tool_calls: int
    waited_ms: int
    outcome: str  # the turn's stopReason, or "running"


class GoalRounds(Struct, frozen=True, gc=False):
    goal_id: str | None  # None: no current goal (none yet, or cleared)
    rounds: list[GoalRoundRecord]


def _ms(at: str) -> float:
    """Milliseconds since the epoch of a log ``at`` (RFC 3339 UTC; replay does not parse
    it, so a value that does not parse counts as no time rather than failing the fold)."""
    try:
        return datetime.fromisoformat(at).timestamp() * 1000.0  # Python 3.11 reads the Z
    except ValueError:
        return float("nan")


class _Round:
    """A round being folded (mutable while its turn is open)."""

    __slots__ = (
        "round", "revision", "turn", "started_at", "ended_at", "input", "cached", "output",
        "estimated", "tool_calls", "waited", "outcome", "asking", "resumed_at",
    )  # fmt: skip

    def __init__(self, round_: int, revision: int, turn: int, started_at: str) -> None:
        self.round, self.revision, self.turn, self.started_at = round_, revision, turn, started_at
        self.ended_at: str | None = None
        self.input = self.cached = self.output = 0
        self.estimated = False
        self.tool_calls = 0
        self.waited = 0.0
        self.outcome = RUNNING
        # callId -> (tool name, the call's at) for calls without a result yet
        self.asking: dict[str, tuple[str, str]] = {}
        self.resumed_at: str | None = None  # the at of the turn's last tool/result

    def wait_until(self, call_at: str, end_at: str) -> None:
        start = _ms(call_at)
        if self.resumed_at is not None:
            start = max(start, _ms(self.resumed_at))
        waited = _ms(end_at) - start
        if waited > 0:  # NaN (an unparsable at) and clock steps back count as nothing
            self.waited += waited

    def record(self) -> GoalRoundRecord:
        return GoalRoundRecord(
            round=self.round,
            revision=self.revision,
            turn=self.turn,
            started_at=self.started_at,
            ended_at=self.ended_at,
            tokens=RoundTokens(self.input, self.cached, self.output),
            estimated=self.estimated,
            tool_calls=self.tool_calls,
            waited_ms=round(self.waited),
            outcome=self.outcome,
        )


class RoundsFold:
    """Feed it a log in seq order, as typed events (:meth:`apply`) or raw lines
    (:meth:`feed_line`), then read :meth:`result`."""

    __slots__ = ("_goal_id", "_rounds", "_open", "_turn_opened")

    def __init__(self) -> None:
        self._goal_id: str | None = None
        self._rounds: list[_Round] = []
        self._open: _Round | None = None  # the round whose turn is open
        self._turn_opened: tuple[int, str] | None = None  # (turn, at) of the last turn/open

    def apply(self, event) -> None:
        """One typed event (dshd.folds.events)."""
        self._fold(event.__struct_config__.tag, event.at, event.turn, event.data)

    def feed_line(self, line: bytes) -> None:
        """One log line (already checked by replay), of which only the fields read here
        are decoded (a tool's arguments and output, texts and plans are skipped unread);
        a line of a type no round reads is not decoded at all when it opens with its type,
        as dshd writes it."""
        if line.startswith(_UNREAD):
            return
        parsed = decode_line_view(line)
        self._fold(parsed.type, parsed.at, parsed.turn, parsed.data)

    def _fold(self, kind: str, at: str, turn: int | None, data) -> None:
        if kind == "turn/open":
            self._turn_opened = (data.turn, at)
            return
        if kind == "goal/change":
            if data.op == "create":
                self._goal_id, self._rounds, self._open = data.goal.id, [], None
            elif data.op == "clear":
                self._goal_id, self._rounds, self._open = None, [], None
            return
        if kind == "user/message":
            goal_round = data.goalRound
            if goal_round is not None and goal_round.goalId == self._goal_id and turn is not None:
                opened = self._turn_opened
                started = opened[1] if opened is not None and opened[0] == turn else at
                self._open = _Round(goal_round.round, goal_round.revision, turn, started)
                self._rounds.append(self._open)
            return
        current = self._open
        if current is None or turn != current.turn:
            return
        if kind == "assistant/message":
            usage = data.usage
            if usage is not None:
                current.input += usage.inputTokens
                current.output += usage.outputTokens
                # Optional fields (absent: none said; a typed event of an older format lacks them).
                current.cached += getattr(usage, "cachedInputTokens", None) or 0
                if getattr(usage, "estimated", False):
                    current.estimated = True
        elif kind == "tool/call":
            current.tool_calls += 1
            current.asking[data.callId] = (data.name, at)
        elif kind == "permission/decision":
            asked = current.asking.get(data.callId)
            if asked is not None and asked[0] != PLAN_REVIEW_TOOL and data.by in _ASKED_BY:
                current.wait_until(asked[1], at)
        elif kind == "tool/result":
            asked = current.asking.pop(data.callId, None)
            if asked is not None and asked[0] == PLAN_REVIEW_TOOL:
                current.wait_until(asked[1], at)
            current.resumed_at = at
        elif kind == "turn/close":
            current.ended_at = at
            current.outcome = data.stopReason
            current.asking.clear()
            self._open = None

    def result(self) -> GoalRounds:
        return GoalRounds(goal_id=self._goal_id, rounds=[r.record() for r in self._rounds])


def goal_rounds(events: Iterable) -> GoalRounds:
    """The current goal's rounds, oldest first, from a whole log's typed events."""
    fold = RoundsFold()
    for event in events:
        fold.apply(event)
    return fold.result()


def goal_rounds_of_lines(lines: Iterable[bytes]) -> GoalRounds:
    """:func:`goal_rounds` over raw log lines (the daemon's store, a command reading a file)."""
    fold = RoundsFold()
    for line in lines:
        fold.feed_line(line)
    return fold.result()
