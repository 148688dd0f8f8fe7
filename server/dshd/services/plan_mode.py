"""Plan mode: the only writer of ``plan/mode`` (PM-5..PM-15, PM-18, PM-22) and of
``plan/forget`` (P-22).

One controller per live agent. The recorded state is the fold
(``store.state.plan.active``); the controller adds only a *pending* choice, held in
this process until the next accepted in-turn pre-step appends it (PM-10, PM-11).

PM-15, stated plainly: a pending choice lives in memory only. If the process exits (or
the session is reloaded or forked) before the next accepted in-turn pre-step, the choice
is lost and the log still says the old state; the person sees that state on reopen.

Narration (PM-14): when a person's choice is appended, a ``user/message``
``{source: "plugin", plugin: "plan"}`` tells the model, but only if the last recorded
``request/header`` described the other state (no header yet: nothing to correct). An
exit approved through ``exit_plan_mode`` is silent: the tool result already told the
model. If that narration append fails after the ``plan/mode`` was appended, the mode
change stands (it is durable) and only the sentence is lost; it is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import attrs

from dshd.errors import DshError

if TYPE_CHECKING:
    from dshd.services.store import SessionStore

# The pre-step types (StepProposal, Decision) belong to the agent loop, a layer above;
# this listener only needs ``decision.accepted``, so it takes them untyped.

log = logging.getLogger(__name__)

Outcome = Literal["committed", "queued", "cancelled", "noop"]

NARRATION = {
    True: "The person turned plan mode on. Plan first and do not change files yet; "
    "present the plan with exit_plan_mode.",
    False: "The person turned plan mode off. You may carry out the work now.",
}


@attrs.frozen
class PlanView:
    """Plan mode as the doors show it (each door's converter writes its own shape)."""

    active: bool
    pending: bool | None = None


@attrs.frozen
class _Pending:
    active: bool
    narrate: bool  # False for an approved exit (PM-18: silent)


class PlanModeController:
    def __init__(self, store: "SessionStore") -> None:
        self._store = store
        self._pending: _Pending | None = None
        self._listeners: list[Callable[[PlanView], None]] = []
        self._detached = False

    def detach(self) -> None:
        """The agent closed: drop the pending choice (PM-15); later calls are stale-agent."""
        self._detached = True
        self._pending = None
        self._listeners.clear()

    def _live(self) -> None:
        if self._detached:
            raise DshError("stale-agent", "this session was closed or opened again since: open it again and retry")

    # ---- reading -------------------------------------------------------------------

    def get(self) -> PlanView:
        """PM-9: the recorded state that builds steps, plus the choice still waiting."""
        self._live()
        return PlanView(self._store.state.plan.active, None if self._pending is None else self._pending.active)

    def add_listener(self, fn: Callable[[PlanView], None]) -> Callable[[], None]:
        """``fn(view)`` after every change of active or pending (the daemon sends
        ``dsh/plan/changed``). A raising listener is logged and ignored."""
        self._listeners.append(fn)

        def remove() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return remove

    # ---- choosing ------------------------------------------------------------------

    def set(self, active: bool) -> Outcome:
        """PM-8. A person's choice. Raises only if an immediate append fails (then
        nothing changed: no pending choice is left behind either)."""
        self._live()
        if not isinstance(active, bool):
            raise DshError("invalid-params", "active must be true or false", field="active")
        return self._choose(_Pending(active, narrate=True))

    def approve_exit(self) -> Outcome:
        """PM-18: an approved ``exit_plan_mode``: a silent pending exit, appended at the
        next accepted in-turn pre-step (the rest of this tool batch still runs under
        plan guidance)."""
        before = self.get()
        if self._pending is not None and not self._pending.active:
            return "noop"  # an exit is already waiting
        if not before.active:
            return self._drop(before) if self._pending is not None else "noop"
        self._pending = _Pending(False, narrate=False)
        self._notify(before)
        return "queued"

    def forget(self, call_id: str) -> None:
        """P-22: ``/plan forget``: the approved plan of ``call_id`` is no longer the plan of
        record (the caller found it with folds/plans.py). Durable at once, in or out of a
        turn: it changes only what a later request's sections say."""
        self._live()
        self._store.commit("plan/forget", {"callId": call_id}, writer="plan")

    def _drop(self, before: PlanView) -> Outcome:
        self._pending = None
        self._notify(before)
        return "cancelled"

    def _choose(self, choice: _Pending) -> Outcome:
        before = self.get()
        recorded = before.active
        if self._pending is not None:
            if self._pending.active == choice.active:
                return "noop"
            if recorded == choice.active:
                return self._drop(before)
            # A pending value equal to the recorded one cannot come from set(); clear it.
            self._pending = None
        elif recorded == choice.active:
            return "noop"
        if self._store.state.turn.open:  # PM-13: the open-turn fold, not a status field
            self._pending = choice
            self._notify(before)
            return "queued"
        self._append(choice, turn=None)
        self._notify(before)
        return "committed"

    # ---- the pre-step listener (placed first in the chain) -------------------------------

    def pre_step(self, proposal: Any, downstream: Callable[[Any], Any]) -> Any:
        """PM-10..PM-12: ask the rest of the chain first; only if it accepted, append the
        pending choice, before the step's request/header is derived. A rejection or a
        failed append keeps the choice pending; the step's decision is unchanged."""
        decision = downstream(proposal)
        if not decision.accepted or self._pending is None:
            return decision
        state = self._store.state
        if not state.turn.open:
            return decision
        choice = self._pending
        before = self.get()
        try:
            self._append(choice, turn=state.turn.last_turn)
        except Exception:
            log.warning("plan/mode append failed; the choice stays pending", exc_info=True)
            return decision
        self._pending = None
        self._notify(before)
        return decision

    def _append(self, choice: _Pending, turn: int | None) -> None:
        header_active = self._store.state.plan.header_active
        self._store.commit("plan/mode", {"active": choice.active}, turn=turn, writer="plan")
        if choice.narrate and header_active is not None and header_active != choice.active:
            try:
                self._store.commit(
                    "user/message",
                    {"text": NARRATION[choice.active], "source": "plugin", "plugin": "plan"},
                    turn=turn,
                )
            except Exception:
                log.warning("plan narration could not be appended", exc_info=True)

    def _notify(self, before: PlanView) -> None:
        after = self.get()
        if after == before:
            return
        for fn in list(self._listeners):
            try:
                fn(after)
            except Exception:
                log.exception("plan listener failed")
