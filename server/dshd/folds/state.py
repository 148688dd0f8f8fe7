"""Folded state of a session: frozen msgspec Structs (cheap to build, encodable for checkpoints)."""

from __future__ import annotations

from msgspec import Struct

from dshd.folds.events import ForkedFrom, GoalRef, GoalSnapshot

# A title is for a list row: a longer one is cut when it is set and when it is read back
# from a log written before the cap (the fold caps it, so no state holds more).
TITLE_MAX = 200


def cap_title(title: str | None) -> str | None:
    """``title`` cut to TITLE_MAX characters, the last of them an ellipsis, if longer."""
    if title is None or len(title) <= TITLE_MAX:
        return title
    return title[: TITLE_MAX - 1] + "\u2026"


class PlanState(Struct, frozen=True):
    """PM-6: ``active`` is the last plan/mode's value, else False.
    ``header_active`` is the last request/header's planActive (None before any header), for PM-14.
    P-22: ``approved_call``/``approved_seq``: the ``exit_plan_mode`` call (and its seq) of
    the plan of record, the last one approved unless a plan/forget named it since (None:
    none); ``reviewing``: the plan calls of the open turn still without a result,
    (callId, seq) each. The plan's text stays in the log, on that call."""

    active: bool = False
    header_active: bool | None = None
    approved_call: str | None = None
    approved_seq: int = 0
    reviewing: tuple[tuple[str, int], ...] = ()


class TurnState(Struct, frozen=True):
    """PM-13: whether a turn is open comes from here. ``step`` is the last request/header step
    of the open turn (0 before its first)."""

    last_turn: int = 0
    open: bool = False
    step: int = 0
    cause: str | None = None
    # Call ids of the open turn that have a permission/decision (one each).
    decided: frozenset[str] = frozenset()


class GoalState(Struct, frozen=True):
    """G-1..G-8 as folded from goal/change events, goalRound messages and the usage of
    assistant messages in round turns."""

    goal: GoalSnapshot | None = None  # None: no goal yet, or cleared
    rounds_started: int = 0  # rounds counted for the current goal
    created_at: str | None = None
    updated_at: str | None = None
    cleared: GoalRef | None = None  # the tombstoned ref while no goal follows it
    used_ids: frozenset[str] = frozenset()
    # Tokens (input + output) of the assistant messages in turns started as rounds of the
    # current goal, and the turn of its latest round (None: no round with a turn yet).
    tokens_used: int = 0
    round_turn: int | None = None
    # Some of tokens_used is an estimate (characters/4): a reply's usage said "estimated".
    tokens_estimated: bool = False


class ContextState(Struct, frozen=True):
    """What strict replay needs to check a ``context/compact``, and where the model
    transcript starts (the cold path reads the log from ``through_seq`` on).

    A tool batch is open while a ``tool/call`` has no ``tool/result`` yet (it also ends
    with its turn); ``batch_from`` is the seq of the first call of the open batch (0: none
    open), ``quiet_from`` the seq where the last batch ended (0: none yet)."""

    compact_seq: int = 0  # seq of the last context/compact (0: none)
    through_seq: int = 0  # its throughSeq
    pending_calls: frozenset[str] = frozenset()
    batch_from: int = 0
    quiet_from: int = 0


class SessionState(Struct, frozen=True):
    session_id: str
    seq: int  # seq of the last event folded (= its line number)
    plan: PlanState
    turn: TurnState
    goal: GoalState
    # Beyond docs/architecture.md's minimum, for session/list: title from session/start,
    # where a fork came from, and the `at` of the last event.
    title: str | None = None
    forked_from: ForkedFrom | None = None
    last_at: str | None = None
    context: ContextState = ContextState()
