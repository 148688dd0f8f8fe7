"""Goals: the only writer of ``goal/change`` (G-1..G-12).

The durable goal is the fold of the log (``store.state.goal``); this service adds only
the in-process *activation* (armed / disarmed, G-7): every load starts disarmed, only
``create`` and ``resume`` arm, and nothing here starts work: the continuation driver
(goals plugin) asks :meth:`GoalService.next_round` when it may start a round.

Compare-and-set (G-3): every write names the ref it read. A ref for another goal id or
another revision is ``stale-revision`` with ``current`` = the current revision (SPEC 6)
and ``goalId`` = the current goal's id, so a client can build the ref to retry with. After ``clear`` there is no goal: the returned ref
``{id, cleared revision + 1}`` names nothing, and writes with it get ``no-goal``.

Notifications (G-11): listeners get a :class:`GoalNotice` after the event is durable
(``store.commit`` returned). Ops: create/edit/pause/resume/complete/block/clear, and
``round`` (a committed user/message with goalRound), ``usage`` (an assistant message
whose usage counted toward the goal's tokens), ``arm``, ``disarm``, ``waiting`` (the view's
``waiting_for`` appeared or went: G-20) (revision unchanged). A raising listener is logged; it never undoes or blocks a change.

Waiting (G-20): ``waiting_for`` is in-process only, like the activation. The goals plugin
tells :meth:`GoalService.set_waiting` what the agent waits for ("plan-review", "approval"
or None) from the agent's activity; the view carries it while the goal is active.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from dshd.errors import DshError
from dshd.folds import GoalState
from dshd.folds.goal_phases import may
from dshd.folds.events import AssistantMessage, BlockedReason, GoalCheck, GoalRef, GoalRound, GoalSnapshot, UserMessage
from dshd.formats import is_kebab_case, utc_now
from dshd.services.acting import acting, with_client

if TYPE_CHECKING:
    from dshd.services.store import SessionStore

log = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 256
BUDGET_EXHAUSTED_CODE = "round-budget-exhausted"
TOKEN_BUDGET_EXHAUSTED_CODE = "token-budget-exhausted"


class GoalView(msgspec.Struct, frozen=True, omit_defaults=True):
    """A goal as the core hands it to the doors: plain values, snake_case (each door's
    converter builds its wire GoalView from it: daemon/to_wire.py, acp/convert.py)."""

    id: str
    revision: int
    objective: str
    phase: str
    max_rounds: int
    rounds_started: int
    rounds_left: int
    tokens_used: int  # input + output tokens of the turns started as rounds of this goal
    created_at: str
    updated_at: str
    activation: str  # "armed" | "disarmed"
    blocked_reason: BlockedReason | None = None
    max_tokens: int | None = None  # the token budget; absent: none
    waiting_for: str | None = None  # "plan-review" | "approval": a question of this agent is open (active goals only)
    tokens_estimated: bool = False  # some of tokens_used is characters/4: the provider reported no usage

    @property
    def ref(self) -> GoalRef:
        return GoalRef(id=self.id, revision=self.revision)


@attrs.frozen
class GoalNotice:
    op: str  # create edit pause resume complete block clear round usage arm disarm waiting
    revision: int
    view: GoalView | None  # None after clear


def goal_view(goal_state: GoalState, armed: bool, waiting_for: str | None = None) -> GoalView | None:
    """The view of a folded goal state (None: no goal); ``armed`` and ``waiting_for`` are
    the in-process parts (what the agent waits for counts only while the goal is active:
    a paused or stopped goal waits for nothing, whatever a person's own turn asks)."""
    goal = goal_state.goal
    if goal is None:
        return None
    return GoalView(
        id=goal.id,
        revision=goal.revision,
        objective=goal.objective,
        phase=goal.phase,
        max_rounds=goal.maxRounds,
        rounds_started=goal_state.rounds_started,
        rounds_left=max(goal.maxRounds - goal_state.rounds_started, 0),
        tokens_used=goal_state.tokens_used,
        created_at=goal_state.created_at or "",
        updated_at=goal_state.updated_at or "",
        activation="armed" if armed and goal.phase == "active" else "disarmed",
        blocked_reason=goal.blockedReason,
        max_tokens=goal.maxTokens,
        waiting_for=waiting_for if goal.phase == "active" else None,
        tokens_estimated=goal_state.tokens_estimated,
    )


def _invalid(field: str, message: str) -> DshError:
    return DshError("invalid-params", message, field=field)


def as_ref(ref: Any) -> GoalRef:
    """A GoalRef from a GoalRef or a ``{"id", "revision"}`` mapping; strict."""
    if isinstance(ref, GoalRef):
        value = ref
    else:
        try:
            value = msgspec.convert(ref, GoalRef, strict=True)
        except msgspec.ValidationError as exc:
            raise _invalid("ref", f"ref must be {{id: string, revision: integer}}: {exc}") from exc
    if value.revision < 1 or not value.id:
        raise _invalid("ref", "ref needs a non-empty id and a positive revision")
    return value


def _check_objective(objective: Any) -> str:
    if not isinstance(objective, str) or not objective.strip():
        raise _invalid("objective", "objective must be non-empty text")
    return objective


def _check_max_rounds(max_rounds: Any, rounds_started: int = 0) -> int:
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise _invalid("maxRounds", "maxRounds must be an integer of at least 1")
    if max_rounds < rounds_started:
        raise _invalid("maxRounds", f"maxRounds {max_rounds} is below the {rounds_started} rounds already started")
    return max_rounds


def _check_max_tokens(max_tokens: Any, tokens_used: int = 0) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _invalid("maxTokens", "maxTokens must be an integer of at least 1")
    if max_tokens <= tokens_used:
        raise _invalid("maxTokens", f"maxTokens {max_tokens} is not above the {tokens_used} tokens already used")
    return max_tokens


def check_reason(code: Any, message: Any) -> BlockedReason:
    if not is_kebab_case(code):
        raise _invalid("reason.code", "reason code must be lowercase-kebab-case, like dependency-conflict")
    if not isinstance(message, str) or not message.strip():
        raise _invalid("reason.message", "reason message must be non-empty text")
    return BlockedReason(code=code, message=message)


class GoalService:
    def __init__(
        self,
        store: "SessionStore",
        max_rounds_default: int = DEFAULT_MAX_ROUNDS,
        max_tokens_default: int | None = None,
    ) -> None:
        self._store = store
        self._max_rounds_default = max_rounds_default
        self._max_tokens_default = max_tokens_default
        self._armed = False  # G-7: every load starts disarmed
        self._detached = False
        self._waiting: str | None = None  # what the agent waits for now (set_waiting)
        self._listeners: list[Callable[[GoalNotice], None]] = []
        self._remove_store_listener = store.add_listener(self._on_event)

    # ---- reading -------------------------------------------------------------------

    @property
    def armed(self) -> bool:
        return self._armed and self._current_phase() == "active"

    def get(self) -> GoalView | None:
        self._live()
        return goal_view(self._store.state.goal, self.armed, self._waiting)

    def set_waiting(self, kind: str | None) -> None:
        """What the agent waits for now ("plan-review", "approval", None): in process only.
        Sends op "waiting" (revision unchanged) when the view's ``waiting_for`` appears or goes."""
        if self._detached or kind == self._waiting:
            return
        before = self.get()
        self._waiting = kind
        after = self.get()
        if after is not None and (before is None or before.waiting_for != after.waiting_for):
            self._emit(GoalNotice("waiting", after.revision, after))

    def add_listener(self, fn: Callable[[GoalNotice], None]) -> Callable[[], None]:
        self._listeners.append(fn)

        def remove() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return remove

    def detach(self) -> None:
        """Stop following the store (the agent is closing). Every later call on this
        instance is ``stale-agent`` (G-10): a handle kept past a reload cannot write."""
        self._remove_store_listener()
        self._armed = False
        self._detached = True

    def _live(self) -> None:
        if self._detached:
            raise DshError("stale-agent", "this session was closed or opened again since: open it again and retry")

    # ---- writes --------------------------------------------------------------------

    def create(self, objective: str, max_rounds: int | None = None, max_tokens: int | None = None) -> GoalView:
        self._live()
        objective = _check_objective(objective)
        max_rounds = self._max_rounds_default if max_rounds is None else _check_max_rounds(max_rounds)
        max_tokens = self._max_tokens_default if max_tokens is None else _check_max_tokens(max_tokens)
        current = self._store.state.goal.goal
        if current is not None and not may("create", current.phase):
            raise DshError(
                "invalid-transition",
                f"cannot create a goal while goal {current.id} is {current.phase}: clear, complete or resume it",
                phase=current.phase,
            )
        goal_id = self._fresh_id()
        now = utc_now()
        snapshot = GoalSnapshot(
            id=goal_id, revision=1, objective=objective, phase="active", maxRounds=max_rounds, maxTokens=max_tokens
        )
        self._commit("create", snapshot, rounds_started=0, tokens_used=0, created_at=now, updated_at=now)
        self._armed = True
        return self._notify("create")

    def edit(
        self,
        ref: Any,
        objective: str | None = None,
        max_rounds: int | None = None,
        max_tokens: int | None = None,
    ) -> GoalView:
        self._live()
        goal = self._current(ref)
        self._allow("edit", goal)
        state = self._store.state.goal
        new_objective = goal.objective if objective is None else _check_objective(objective)
        new_max = goal.maxRounds if max_rounds is None else _check_max_rounds(max_rounds, state.rounds_started)
        new_tokens = goal.maxTokens if max_tokens is None else _check_max_tokens(max_tokens, state.tokens_used)
        if (new_objective, new_max, new_tokens) == (goal.objective, goal.maxRounds, goal.maxTokens):
            raise _invalid("objective", "edit changes nothing: give a new objective, maxRounds and/or maxTokens")
        self._write("edit", goal, objective=new_objective, maxRounds=new_max, maxTokens=new_tokens)
        return self._notify("edit")

    def check_can(self, op: str, ref: Any) -> None:
        """Raise what ``op`` (pause) with ``ref`` would raise now, writing nothing."""
        self._live()
        self._allow(op, self._current(ref))

    def pause(self, ref: Any) -> GoalView:
        self._live()
        goal = self._current(ref)
        self._allow("pause", goal)
        self._write("pause", goal, phase="paused")
        self._armed = False
        return self._notify("pause")

    def resume(self, ref: Any) -> GoalView:
        self._live()
        goal = self._current(ref)
        if goal.phase == "active":
            # G-6: after a load an active goal is disarmed; resume re-arms it, no event.
            if not self._armed:
                self._armed = True
                self._notify("arm")
            return self.get()  # type: ignore[return-value]
        self._allow("resume", goal)
        state = self._store.state.goal
        rounds = state.rounds_started
        if rounds >= goal.maxRounds:
            raise DshError(
                "budget-exhausted",
                f"no rounds left ({rounds} of {goal.maxRounds}): raise maxRounds with edit first",
                roundsStarted=rounds,
                maxRounds=goal.maxRounds,
            )
        if goal.maxTokens is not None and state.tokens_used >= goal.maxTokens:
            raise DshError(
                "budget-exhausted",
                f"no tokens left ({state.tokens_used} of {goal.maxTokens}): raise maxTokens with edit first",
                tokensUsed=state.tokens_used,
                maxTokens=goal.maxTokens,
            )
        self._write("resume", goal, phase="active", blockedReason=None)
        self._armed = True
        return self._notify("resume")

    def complete(self, ref: Any, check: GoalCheck | None = None) -> GoalView:
        """``check``: the ``[goals] check`` that passed before the model's complete (G-23),
        recorded in the event; a person's complete has none."""
        self._live()
        goal = self._current(ref)
        self._allow("complete", goal)
        self._write("complete", goal, check=check, phase="complete", blockedReason=None)
        self._armed = False
        return self._notify("complete")

    def block(self, ref: Any, reason: Any, message: str | None = None) -> GoalView:
        """``block(ref, {"code", "message"})`` (the wire's shape, or a BlockedReason) or
        ``block(ref, code, message)``."""
        self._live()
        goal = self._current(ref)
        if message is None:
            if isinstance(reason, BlockedReason):
                reason = {"code": reason.code, "message": reason.message}
            if not isinstance(reason, dict) or set(reason) != {"code", "message"}:
                raise _invalid("reason", "reason must be {code, message}")
            reason = check_reason(reason["code"], reason["message"])
        else:
            reason = check_reason(reason, message)
        self._allow("block", goal)
        self._write("block", goal, phase="blocked", blockedReason=reason)
        self._armed = False
        return self._notify("block")

    def clear(self, ref: Any) -> GoalRef:
        self._live()
        goal = self._current(ref)
        data = {
            "version": 1,
            "op": "clear",
            "cleared": {"id": goal.id, "revision": goal.revision},
            "clearedAt": utc_now(),
        }
        with_client(data, acting.get())
        self._store.commit("goal/change", data, turn=self._open_turn(), writer="goals")
        self._armed = False
        returned = GoalRef(id=goal.id, revision=goal.revision + 1)
        self._emit(GoalNotice("clear", returned.revision, None))
        return returned

    def disarm(self) -> GoalView | None:
        """G-6: no durable change. Returns the view (None: no goal)."""
        self._live()
        if self._armed:
            self._armed = False
            if self.get() is not None:
                self._notify("disarm")
        return self.get()

    # ---- the continuation driver's side ---------------------------------------------------

    def next_round(self) -> GoalRound | None:
        """The round a continuation turn may start now, or None when there is none.

        When a budget is spent this blocks the goal and returns None: with
        ``round-budget-exhausted`` when every round was started (G-9), with
        ``token-budget-exhausted`` when the rounds so far used ``maxTokens`` tokens or more
        (the driver asks right after each round ends, so that is when a round that went
        over the budget stops the goal). The caller records the round by committing the
        turn's ``user/message`` with this ``goalRound``; that commit is what spends it (G-8).
        """
        state = self._store.state.goal
        goal = state.goal
        if goal is None or goal.phase != "active" or not self._armed:
            return None
        rounds = state.rounds_started
        if rounds >= goal.maxRounds:
            return self._block_spent(goal, BUDGET_EXHAUSTED_CODE, f"all {goal.maxRounds} continuation rounds were spent")
        if goal.maxTokens is not None and state.tokens_used >= goal.maxTokens:
            return self._block_spent(
                goal,
                TOKEN_BUDGET_EXHAUSTED_CODE,
                f"the rounds used {state.tokens_used} tokens of a budget of {goal.maxTokens}",
            )
        return GoalRound(goalId=goal.id, round=rounds + 1, revision=goal.revision)

    def _block_spent(self, goal: GoalSnapshot, code: str, message: str) -> None:
        self._write("block", goal, phase="blocked", blockedReason=BlockedReason(code=code, message=message))
        self._armed = False
        self._notify("block")
        return None

    # ---- internals -----------------------------------------------------------------

    def _current_phase(self) -> str | None:
        goal = self._store.state.goal.goal
        return None if goal is None else goal.phase

    def _fresh_id(self) -> str:
        used = self._store.state.goal.used_ids
        while True:
            goal_id = "g-" + secrets.token_hex(8)
            if goal_id not in used:
                return goal_id

    def _current(self, ref: Any) -> GoalSnapshot:
        wanted = as_ref(ref)
        goal = self._store.state.goal.goal
        if goal is None:
            raise DshError("no-goal", "there is no current goal (none was created, or it was cleared)")
        if wanted.id != goal.id or wanted.revision != goal.revision:
            raise DshError(
                "stale-revision",
                "the goal changed since it was read (it was edited, paused, resumed or replaced): "
                f"look at it again and retry (goal {goal.id} is at change {goal.revision}, not {wanted.revision})",
                current=goal.revision,
                goalId=goal.id,
            )
        return goal

    @staticmethod
    def _allow(op: str, goal: GoalSnapshot) -> None:
        """``invalid-transition`` unless the phase table lets ``op`` start from the goal's phase."""
        if not may(op, goal.phase):
            raise DshError(
                "invalid-transition",
                f"cannot {op} a goal that is {goal.phase}",
                phase=goal.phase,
            )

    def _open_turn(self) -> int | None:
        turn = self._store.state.turn
        return turn.last_turn if turn.open else None

    def _write(self, op: str, goal: GoalSnapshot, check: GoalCheck | None = None, **changes: Any) -> None:
        snapshot = msgspec.structs.replace(goal, revision=goal.revision + 1, **changes)
        state = self._store.state.goal
        self._commit(op, snapshot, state.rounds_started, state.tokens_used, state.created_at or utc_now(), utc_now(), check)

    def _commit(
        self, op: str, snapshot: GoalSnapshot, rounds_started: int, tokens_used: int, created_at: str, updated_at: str,
        check: GoalCheck | None = None,
    ) -> None:
        data = {
            "version": 1,
            "op": op,
            "goal": msgspec.to_builtins(snapshot),
            "roundsStarted": rounds_started,
            "tokensUsed": tokens_used,
            "createdAt": created_at,
            "updatedAt": updated_at,
        }
        if check is not None:
            data["check"] = msgspec.to_builtins(check)
        with_client(data, acting.get())  # a person's write (the model's and the driver's run unattributed)
        self._store.commit("goal/change", data, turn=self._open_turn(), writer="goals")

    def _notify(self, op: str) -> GoalView:
        view = self.get()
        assert view is not None
        self._emit(GoalNotice(op, view.revision, view))
        return view

    def _emit(self, notice: GoalNotice) -> None:
        for fn in list(self._listeners):
            try:
                fn(notice)
            except Exception:
                log.exception("goal listener failed on %s", notice.op)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, UserMessage) and event.data.goalRound is not None:
            op = "round"
        elif (
            isinstance(event, AssistantMessage)
            and event.data.usage is not None
            and event.turn is not None
            and event.turn == self._store.state.goal.round_turn
        ):
            op = "usage"  # the round's tokens grew: a status bar shows tokensUsed live
        else:
            return
        view = self.get()
        if view is not None:
            self._emit(GoalNotice(op, view.revision, view))
