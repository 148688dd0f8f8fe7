"""What people read about a goal, made once by the daemon (dshd.api.words): the status
words per phase, the token figures, the actions each phase offers, and that those actions
are exactly what the goal service accepts (the one phase table, folds/goal_phases.py).
The editors render these as sent (editors/vscode/test/unit/status.test.ts,
tests/editors/nvim/test_nvim_unit.py::test_the_statusline_shows_the_daemons_words_as_they_are)."""

from __future__ import annotations

import pytest

from dshd.api.words import goal_actions, goal_status, tokens
from dshd.daemon.to_wire import goal_view
from dshd.errors import DshError
from dshd.folds.events import BlockedReason
from dshd.folds.goal_phases import OPS
from dshd.services.goals import GoalService, GoalView
from dshd.services.store import SessionStore
from dshd_protocol import from_wire
from dshd_protocol import types as T

AT = "2026-11-29T18:40:18.123Z"


def view(**kw):
    """A core GoalView; rounds_left follows rounds_started unless given; a blocked_reason
    may be given as {code, message}."""
    v = {"id": "g-1", "revision": 4, "objective": "Ship retries for the HTTP client", "phase": "active", "max_rounds": 40,
         "rounds_started": 3, "rounds_left": 37, "created_at": AT, "updated_at": AT, "activation": "armed", "tokens_used": 0}
    v.update(kw)
    if "rounds_started" in kw and "rounds_left" not in kw:
        v["rounds_left"] = max(v["max_rounds"] - v["rounds_started"], 0)
    if isinstance(v.get("blocked_reason"), dict):
        v["blocked_reason"] = BlockedReason(**v["blocked_reason"])
    return GoalView(**v)


DEPENDENCY = {"code": "dependency-conflict", "message": "urllib3 2.x conflicts with the pinned requests 2.25"}

# name, view, text, short, tone, usage, the state line of detail, actions
CASES = [
    ("active, rounds running on their own", view(tokens_used=12400),
     "3/40 · 12.4k tok · active", "active", "none", "3 of 40 rounds used, 12.4k tokens",
     "Active: rounds continue on their own.", ["edit", "pause", "complete", "block", "clear"]),
    ("active after a load: nothing runs until the person resumes", view(activation="disarmed", tokens_used=12400),
     "3/40 · 12.4k tok · waiting for you to resume", "waiting for you to resume", "hint",
     "3 of 40 rounds used, 12.4k tokens", "Active, waiting for you to resume: nothing runs until you do.",
     ["edit", "pause", "resume", "complete", "block", "clear"]),
    ("active with a token budget", view(rounds_started=6, tokens_used=25900, max_tokens=100000),
     "6/40 · 25.9k/100k tok · active", "active", "none", "6 of 40 rounds used, 25.9k of 100k tokens",
     "Active: rounds continue on their own.", ["edit", "pause", "complete", "block", "clear"]),
    ("paused", view(phase="paused", activation="disarmed", rounds_started=5, tokens_used=31000, max_tokens=200000),
     "5/40 · 31k/200k tok · paused", "paused", "none", "5 of 40 rounds used, 31k of 200k tokens",
     "Paused: nothing runs until you resume.", ["edit", "resume", "complete", "block", "clear"]),
    ("blocked by the agent", view(phase="blocked", activation="disarmed", rounds_started=12, tokens_used=48210, blocked_reason=DEPENDENCY),
     "12/40 · 48.2k tok · blocked: dependency-conflict", "blocked: dependency-conflict", "warning",
     "12 of 40 rounds used, 48.2k tokens", f"Blocked: {DEPENDENCY['message']} (dependency-conflict)",
     ["edit", "resume", "complete", "clear"]),
    ("blocked: the round budget is spent", view(phase="blocked", activation="disarmed", rounds_started=40, tokens_used=250000,
        blocked_reason={"code": "round-budget-exhausted", "message": "all 40 rounds were used"}),
     "40/40 · 250k tok · blocked: round-budget-exhausted", "blocked: round-budget-exhausted", "warning",
     "40 of 40 rounds used, 250k tokens", "Blocked: all 40 rounds were used (round-budget-exhausted)",
     ["edit", "raise", "complete", "clear"]),
    ("blocked: the token budget is spent (no resume either)", view(phase="blocked", activation="disarmed", rounds_started=8,
        tokens_used=1260000, max_tokens=1000000, blocked_reason={"code": "token-budget-exhausted", "message": "over"}),
     "8/40 · 1.3M/1M tok · blocked: token-budget-exhausted", "blocked: token-budget-exhausted", "warning",
     "8 of 40 rounds used, 1.3M of 1M tokens", "Blocked: over (token-budget-exhausted)", ["edit", "raise", "complete", "clear"]),
    ("complete", view(phase="complete", activation="disarmed", rounds_started=6, tokens_used=950),
     "6/40 · 950 tok · complete", "complete", "none", "6 of 40 rounds used, 950 tokens", "Complete.", ["create", "clear"]),
    ("active and disarmed with the round budget spent", view(activation="disarmed", max_rounds=3, rounds_started=3),
     "3/3 · round budget spent", "round budget spent", "hint", "3 of 3 rounds used",
     "Active, but its round budget is spent: raise it (edit) to go on.", ["edit", "pause", "complete", "block", "clear"]),
    # G-20: a plan review or an approval of the agent is open while the goal runs.
    ("active, waiting for a plan review", view(tokens_used=12400, waiting_for="plan-review"),
     "3/40 · 12.4k tok · waiting for you", "waiting for you", "hint", "3 of 40 rounds used, 12.4k tokens",
     "Active, waiting for you: a plan review is open.", ["edit", "pause", "complete", "block", "clear"]),
    ("active, waiting for an approval", view(waiting_for="approval"),
     "3/40 · waiting for you", "waiting for you", "hint", "3 of 40 rounds used",
     "Active, waiting for you: an approval is open.", ["edit", "pause", "complete", "block", "clear"]),
    # G-21: a budget raised by an edit: resume is offered, not raise again.
    ("blocked for its budget, raised since", view(phase="blocked", activation="disarmed", rounds_started=40, max_rounds=50,
        blocked_reason={"code": "round-budget-exhausted", "message": "all 40 rounds were used"}),
     "40/50 · blocked: round-budget-exhausted", "blocked: round-budget-exhausted", "warning",
     "40 of 50 rounds used", "Blocked: all 40 rounds were used (round-budget-exhausted)",
     ["edit", "resume", "complete", "clear"]),
    # No token counted and no budget: no token figure (a model that reports no usage).
    ("no tokens counted yet", view(), "3/40 · active", "active", "none", "3 of 40 rounds used",
     "Active: rounds continue on their own.", ["edit", "pause", "complete", "block", "clear"]),
    ("no tokens counted yet, beside a token budget", view(max_tokens=50000), "3/40 · 0/50k tok · active", "active", "none",
     "3 of 40 rounds used, 0 of 50k tokens", "Active: rounds continue on their own.", ["edit", "pause", "complete", "block", "clear"]),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_words_of_each_phase(case):
    _, goal, text, short, tone, usage, state, actions = case
    status = goal_status(goal)
    assert (status["text"], status["short"], status["tone"], status["usage"]) == (text, short, tone, usage)
    assert status["detail"][:3] == [f"Goal: {goal.objective}", state,
                                    f"Rounds: {goal.rounds_started} of {goal.max_rounds} used, {goal.rounds_left} left"]
    assert [a["id"] for a in goal_actions(goal)] == actions
    # What goes on the wire (the LSP door's converter) is a strict wire GoalView, words
    # included, and no revision in them.
    wire = goal_view(goal)
    from_wire(T.GoalView, wire)
    assert (wire["status"], wire["actions"]) == (status, goal_actions(goal))
    assert "revision" not in " ".join([wire["status"]["text"], *wire["status"]["detail"]]).lower()
    assert "disarmed" not in wire["status"]["text"]


def test_no_goal_offers_only_create():
    assert goal_status(None)["text"] == "no goal"
    assert goal_actions(None) == [{"id": "create", "label": "Create a goal…"}]


def test_action_labels_are_words_and_in_a_fixed_order():
    every = goal_actions(view(activation="disarmed"))
    assert [a["label"] for a in every] == ["Edit the goal…", "Pause", "Resume", "Mark complete", "Block…", "Clear"]


def test_raise_is_offered_after_edit_on_a_goal_blocked_for_its_budget():
    spent = view(phase="blocked", activation="disarmed", rounds_started=40,
                 blocked_reason={"code": "round-budget-exhausted", "message": "all 40 rounds were used"})
    assert goal_actions(spent)[:2] == [{"id": "edit", "label": "Edit the goal…"},
                                       {"id": "raise", "label": "Raise the budget and resume…"}]
    # Blocked for another reason (the model's own block): no raise (control).
    other = view(phase="blocked", activation="disarmed", rounds_started=40, blocked_reason=DEPENDENCY)
    assert "raise" not in [a["id"] for a in goal_actions(other)]


def test_waiting_counts_only_while_the_goal_is_active(tmp_path):
    service = _reach(tmp_path / "w", "active-armed")
    notices = []
    service.add_listener(notices.append)
    service.set_waiting("approval")
    assert service.get().waiting_for == "approval" and [(n.op, n.view.waiting_for) for n in notices] == [("waiting", "approval")]
    service.set_waiting("approval")  # no change: no notice
    service.set_waiting(None)
    assert service.get().waiting_for is None and [n.op for n in notices] == ["waiting", "waiting"]
    assert notices[-1].revision == notices[0].revision == service.get().revision  # revision unchanged
    paused = _reach(tmp_path / "p", "paused")
    paused_notices = []
    paused.add_listener(paused_notices.append)
    paused.set_waiting("plan-review")
    assert paused.get().waiting_for is None and paused_notices == []


def test_typed_text_in_the_words_is_escaped():
    words = goal_status(view(objective="fix\u202eit\nnow", phase="blocked", blocked_reason={"code": "x", "message": "a\nb"}))
    assert words["detail"][0] == "Goal: fix\\u202eit\\nnow" and words["detail"][1] == "Blocked: a\\nb (x)"


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0"), (950, "950"), (999, "999"), (1000, "1k"), (12400, "12.4k"), (12449, "12.4k"), (12450, "12.5k"),
     (12000, "12k"), (99949, "99.9k"), (99950, "100k"), (182000, "182k"), (999499, "999k"), (999500, "1M"),
     (1000000, "1M"), (1260000, "1.3M"), (3000000, "3M")],
)
def test_token_counts_are_short(n, text):
    assert tokens(n) == text


# ---- the offered actions are what the service accepts ------------------------------------


def _reach(tmp_path, state: str) -> GoalService:
    """A real session store (on disk, strict fold) whose goal is in ``state``."""
    store = SessionStore.create(tmp_path / state, "s-01m8mcaext7rthc32vvdnh1pd2")
    service = GoalService(store)
    if state == "none":
        return service
    goal = service.create("ship it", 10)
    if state == "active-disarmed":
        service.disarm()
    elif state == "paused":
        service.pause(goal.ref)
    elif state == "blocked":
        service.block(goal.ref, "needs-x", "waiting for x")
    elif state == "complete":
        service.complete(goal.ref)
    return service


def _try(service: GoalService, op: str) -> str | None:
    """Run ``op`` on the current goal; the refusal kind, or None when it was accepted."""
    current = service.get()
    ref = current.ref if current else {"id": "g-none", "revision": 1}
    calls = {
        "create": lambda: service.create("another"),
        "edit": lambda: service.edit(ref, objective="changed"),
        "pause": lambda: service.pause(ref),
        "resume": lambda: service.resume(ref),
        "complete": lambda: service.complete(ref),
        "block": lambda: service.block(ref, "needs-y", "waiting for y"),
        "clear": lambda: service.clear(ref),
    }
    try:
        calls[op]()
    except DshError as exc:
        return exc.kind
    return None


@pytest.mark.parametrize("state", ["none", "active-armed", "active-disarmed", "paused", "blocked", "complete"])
def test_offered_actions_are_exactly_the_accepted_ones(tmp_path, state):
    offered = [a["id"] for a in goal_actions(_reach(tmp_path / "look", state).get())]
    for op in OPS:
        refusal = _try(_reach(tmp_path / op, state), op)
        if op in offered:
            assert refusal is None, (state, op, refusal)
        elif state == "active-armed" and op == "resume":
            assert refusal is None  # re-arming an armed goal changes nothing: accepted, not offered
        else:
            assert refusal in ("invalid-transition", "no-goal"), (state, op, refusal)
    assert offered  # every state offers something (positive control of the loop above)
