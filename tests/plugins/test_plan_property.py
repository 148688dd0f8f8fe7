"""PM-10/PM-12 over random interleavings (hypothesis stateful test).

Rules: a person's set, proposing a step (downstream accepts or rejects), an append
failure (store.commit raises for plan/mode once), an approved exit, opening and closing
turns, and a restart (PM-15). After every rule:

* the log on disk replays strictly (nothing half-written);
* every request/header's planActive equals the fold of the prefix before it, and every
  in-turn plan/mode is followed by its step's request/header before anything else but
  its narration: each committed plan/mode comes before the header it affects;
* ``get()`` equals the fold plus the pending choice of an independent model of PM-8.
"""

from __future__ import annotations

import pytest

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dshd.agent.steps import Decision, StepProposal
from dshd.folds import apply, replay
from dshd.folds.events import PlanMode, RequestHeader, TurnClose, TurnOpen, UserMessage, decode_line
from dshd.services.plan_mode import PlanModeController, PlanView
from dshd.services.store import SessionStore

SESSION = "s-01m8mcaext7rthc32vvdnh1pd2"
TOOLS = ["exit_plan_mode"]


class PlanModeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="plan-prop-"))
        self.store = SessionStore.create(self.root, SESSION)
        self.controller = PlanModeController(self.store)
        self.pending: bool | None = None  # the model of the in-process choice

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ---- helpers ----------------------------------------------------------------------

    @property
    def recorded(self) -> bool:
        return self.store.state.plan.active

    @property
    def turn_open(self) -> bool:
        return self.store.state.turn.open

    def expected_set_outcome(self, active: bool) -> str:
        if self.pending is not None:
            if self.pending == active:
                return "noop"
            if self.recorded == active:
                self.pending = None
                return "cancelled"
        elif self.recorded == active:
            return "noop"
        if self.turn_open:
            self.pending = active
            return "queued"
        self.pending = None
        return "committed"

    # ---- rules ------------------------------------------------------------------------

    @rule(active=st.booleans())
    def person_sets(self, active: bool) -> None:
        expected = self.expected_set_outcome(active)
        assert self.controller.set(active) == expected

    @precondition(lambda self: not self.turn_open)
    @rule()
    def open_turn(self) -> None:
        turn = self.store.state.turn.last_turn + 1
        self.store.commit("turn/open", {"turn": turn, "cause": "prompt"}, turn=turn)
        self.store.commit("user/message", {"text": "go", "source": "user"}, turn=turn)

    @precondition(lambda self: self.turn_open)
    @rule(downstream_accepts=st.booleans(), append_fails=st.booleans())
    def propose_step(self, downstream_accepts: bool, append_fails: bool) -> None:
        state = self.store.state
        proposal = StepProposal(turn=state.turn.last_turn, step=state.turn.step + 1, attempt=1)
        real_commit = self.store.commit
        failed = []

        def commit_failing_plan_mode_once(type_, data, **kw):
            if type_ == "plan/mode" and not failed:
                failed.append(True)
                raise OSError("injected: disk full")
            return real_commit(type_, data, **kw)

        if append_fails:
            self.store.commit = commit_failing_plan_mode_once  # type: ignore[method-assign]
        try:
            decision = self.controller.pre_step(
                proposal, lambda p: Decision.accept() if downstream_accepts else Decision.reject("no")
            )
        finally:
            if append_fails:
                del self.store.commit  # back to the class's method
        assert decision.accepted is downstream_accepts  # PM-12: the step's verdict is untouched
        if not downstream_accepts:
            return  # pending unchanged
        if self.pending is not None and not failed:
            self.pending = None  # appended
        # The step's request is derived now, from the fold (as the agent loop does).
        active = self.store.state.plan.active
        self.store.commit(
            "request/header",
            {"step": proposal.step, "planActive": active, "sections": ["plan:policy"] if active else [], "tools": TOOLS},
            turn=proposal.turn,
        )

    @precondition(lambda self: self.turn_open and self.recorded)
    @rule()
    def exit_approved(self) -> None:
        outcome = self.controller.approve_exit()
        if self.pending is False:
            assert outcome == "noop"
        else:
            assert outcome == "queued"
            self.pending = False

    @precondition(lambda self: self.turn_open)
    @rule()
    def close_turn(self) -> None:
        turn = self.store.state.turn.last_turn
        self.store.commit("turn/close", {"turn": turn, "stopReason": "end-turn"}, turn=turn)

    @rule()
    def restart(self) -> None:
        """PM-15: the process lets go; the pending choice is lost, the log stays."""
        self.store.close()
        self.store = SessionStore.open(self.root, SESSION)
        if self.store.state.turn.open:  # what the agent does on load
            turn = self.store.state.turn.last_turn
            self.store.commit("turn/close", {"turn": turn, "stopReason": "interrupted"}, turn=turn)
        self.controller = PlanModeController(self.store)
        self.pending = None

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def get_is_fold_plus_pending(self) -> None:
        folded = replay(self.store.path, use_checkpoint=False).state  # strict: raises if unsound
        assert folded == self.store.state
        assert self.controller.get() == PlanView(folded.plan.active, self.pending)

    @invariant()
    def every_plan_mode_precedes_the_header_it_affects(self) -> None:
        state = None
        waiting_for_header = False  # an in-turn plan/mode whose step header must come next
        previous_was_plan_mode = False
        for line in self.store.path.read_bytes().splitlines():
            event = decode_line(line)
            if isinstance(event, RequestHeader):
                assert event.data.planActive == state.plan.active
                waiting_for_header = False
            elif isinstance(event, PlanMode):
                assert not waiting_for_header
                waiting_for_header = event.turn is not None
            elif isinstance(event, UserMessage) and event.data.source == "plugin":
                assert previous_was_plan_mode  # narration comes right after its plan/mode
            else:
                assert not waiting_for_header, f"{type(event).__name__} between plan/mode and its header"
            previous_was_plan_mode = isinstance(event, PlanMode)
            state = apply(state, event)
            if isinstance(event, (TurnOpen, TurnClose)):
                assert not waiting_for_header


TestPlanModeInterleavings = pytest.mark.slow(PlanModeMachine.TestCase)
TestPlanModeInterleavings.settings = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
