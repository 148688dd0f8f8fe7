"""The goal's phase table: which change may start from which phase, and where it leads.

The one copy. The strict fold (``rules.py``) checks the log against it, ``GoalService``
refuses with it (``invalid-transition``), and the daemon's words offer a person only the
actions it allows (``api/words.py``); the editors show those actions and decide none.
"""

from __future__ import annotations

PHASES = ("active", "paused", "blocked", "complete")

# Every goal operation, in the order people are offered them.
OPS = ("create", "edit", "pause", "resume", "complete", "block", "clear")

# op -> (phases it may start from, the phase it leads to; None keeps the phase).
TRANSITIONS: dict[str, tuple[frozenset[str], str | None]] = {
    "edit": (frozenset({"active", "paused", "blocked"}), None),
    "pause": (frozenset({"active"}), "paused"),
    "resume": (frozenset({"paused", "blocked"}), "active"),
    "complete": (frozenset({"active", "paused", "blocked"}), "complete"),
    "block": (frozenset({"active", "paused"}), "blocked"),
}

# A new goal may replace only a complete one (or none); clear takes any current goal.
CREATE_OVER = frozenset({"complete"})


def may(op: str, phase: str) -> bool:
    """Whether ``op`` may start from a goal in ``phase`` (create and clear included)."""
    if op == "create":
        return phase in CREATE_OVER
    if op == "clear":
        return True
    entry = TRANSITIONS.get(op)
    return entry is not None and phase in entry[0]


def offered_ops(phase: str | None, *, armed: bool, budget_left: bool) -> list[str]:
    """The operations a person may ask for now, in ``OPS`` order (anything else is refused).

    ``resume`` needs budget left. On an active goal it is not a transition but re-arms a
    goal that waits for the person (after a load or a cancel), so it is offered only then.
    """
    if phase is None:
        return ["create"]
    offered = []
    for op in OPS:
        if op == "resume":
            ok = budget_left and (may(op, phase) or (phase == "active" and not armed))
        else:
            ok = may(op, phase)
        if ok:
            offered.append(op)
    return offered
