"""The words a person reads: stop reasons, model errors, token counts, goal
changes and the goal status line. One copy for every client (the chat items carry
these texts; the editors' status formatters are checked against the same fixture,
``tests/fixtures/status/goal-status.json``).

Pure functions of plain values (dicts as the log and the wire write them). No revision
numbers in any text: they stay in the fields of detail views.
"""

from __future__ import annotations

from typing import Any

from dshd.formats import clip  # one line, at most a width (defined once, for the tools' titles too)

# ---- numbers -----------------------------------------------------------------------------


def tokens_counted(tokens_used: object, max_tokens: object) -> bool:
    """Whether a goal's tokens are worth showing: once some were counted, or beside a budget.
    Every daemon sends ``tokensUsed``; "0 tok" for a model that reports no usage says nothing."""
    return isinstance(tokens_used, int) and (tokens_used > 0 or isinstance(max_tokens, int))


def tokens(n: int) -> str:
    """A token count as people read it: 950, 1.2k, 12.4k, 182k, 1.5M. Integer arithmetic
    rounding halves up (the editors compute the same text: no float formatting)."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return _tenths((n + 50) // 100) + "k"
    thousands = (n + 500) // 1000
    if thousands < 1000:
        return f"{thousands}k"
    return _tenths((n + 50_000) // 100_000) + "M"


def _tenths(tenths: int) -> str:
    """``125`` -> ``12.5``; ``120`` -> ``12``."""
    return str(tenths // 10) if tenths % 10 == 0 else f"{tenths // 10}.{tenths % 10}"


def seconds(ms: int) -> str:
    """A wait as people read it: 500 ms, 1.5 s, 30 s."""
    if ms < 1000:
        return f"{ms} ms"
    return _tenths((ms + 50) // 100) + " s"


# ---- turns ---------------------------------------------------------------------------------

STOP_REASONS = {
    "end-turn": "finished",
    "cancelled": "stopped",
    "max-steps": "stopped: it reached the step limit",
    "rejected": "stopped: a check refused its next step",
    "model-error": "stopped by a model error",
    "error": "stopped by an internal error (the daemon's log says more)",
    "interrupted": "interrupted: the daemon stopped while it ran",
    "forked": "cut here by a fork",
    "compacted": "compacted the context",
}

ERROR_KINDS = {
    "auth": "authentication failed",
    "rate-limit": "rate limited",
    "connection": "could not connect",
    "timeout": "timed out",
    "bad-request": "request refused",
    "context-overflow": "context too long",
    "server": "server error",
    "bad-response": "bad response",
}


def turn_end_text(turn: int, stop_reason: str, error: dict[str, Any] | None = None) -> str:
    """``Turn 3 finished``; ``Turn 4 stopped: model error (rate limited): <message>``."""
    if error is not None:
        kind = str(error.get("kind", ""))
        words = ERROR_KINDS.get(kind, kind or "error")
        message = str(error.get("message", "")).strip()
        return f"Turn {turn} stopped: model error ({words})" + (f": {message}" if message else "")
    words = STOP_REASONS.get(stop_reason, f"ended: {stop_reason}")
    return f"Turn {turn} {words}"


def retry_text(attempt: int | None, delay_ms: int | None) -> str:
    """``Model call failed; trying again (attempt 2) in 1.5 s``."""
    text = "Model call failed; trying again"
    if attempt is not None:
        text += f" (attempt {attempt})"
    if delay_ms is not None:
        text += f" in {seconds(delay_ms)}"
    return text


def compaction_text(before: int, after: int) -> str:
    """``Context compacted: 182k -> 14k tokens``."""
    return f"Context compacted: {tokens(before)} -> {tokens(after)} tokens"


# ---- tools (a call's title is the tool's own: agent/tools.py, Tool.describe) --------------------


def permission_text(tool: str, outcome: str, by: str | None, feedback: str | None) -> str:
    """``You allowed run_command once``; ``You rejected write_file: <feedback>``;
    ``run_command not run: no one could answer``."""
    if by == "fail-closed":
        text = f"{tool} not run: no one could answer"
    elif by in (None, "", "person", "user"):
        text = {
            "allow-once": f"You allowed {tool} once",
            "allow-session": f"You allowed {tool} for this session",
            "reject": f"You rejected {tool}",
        }.get(outcome, f"You answered {outcome} for {tool}")
    else:
        text = f"{tool} {'rejected' if outcome == 'reject' else 'allowed'} ({by})"
    if feedback and feedback.strip():
        text += f": {feedback.strip()}"
    return text


# ---- plan reviews ------------------------------------------------------------------------------

PLAN_OUTCOMES = {
    "pending": "waiting for your review",
    "approved": "approved",
    "sent-back": "sent back with feedback",
    "not-reviewed": "not reviewed",
}


def plan_mode_text(active: bool) -> str:
    return "Plan mode on" if active else "Plan mode off"


# ---- goals -------------------------------------------------------------------------------------


def rounds_used(used: int, max_rounds: int) -> str:
    return f"{used}/{max_rounds} rounds used"


def goal_change_text(op: str, data: dict[str, Any]) -> str:
    """One line for a ``goal/change`` event: what happened, in words; no revision."""
    if op == "clear":
        return "Goal cleared"
    goal = data.get("goal") if isinstance(data.get("goal"), dict) else {}
    objective = clip(goal.get("objective", ""), 80)
    used = data.get("roundsStarted", 0)
    max_rounds = goal.get("maxRounds", 0)
    budget = f"{max_rounds} rounds"
    if isinstance(goal.get("maxTokens"), int):
        budget += f", {tokens(goal['maxTokens'])} tokens"
    progress = rounds_used(used, max_rounds)
    if tokens_counted(data.get("tokensUsed"), goal.get("maxTokens")):
        progress += f", {tokens(data['tokensUsed'])} tokens"
    if op == "create":
        return f'Goal set: "{objective}" (budget {budget})'
    if op == "edit":
        return f'Goal edited: "{objective}" (budget {budget})'
    if op == "pause":
        return f"Goal paused ({progress})"
    if op == "resume":
        return f"Goal resumed ({progress})"
    if op == "complete":
        return f"Goal complete ({progress})"
    if op == "block":
        reason = goal.get("blockedReason") if isinstance(goal.get("blockedReason"), dict) else {}
        message = str(reason.get("message", "")).strip()
        code = reason.get("code", "")
        return f"Goal blocked: {message} ({code})" if message else f"Goal blocked ({code})"
    return f"Goal {op}"


GOAL_ACTION_ORDER = ("create", "edit", "pause", "resume", "complete", "block", "clear")


def goal_actions(view: dict[str, Any] | None) -> list[str]:
    """The goal actions the daemon accepts in this state (anything else is
    ``invalid-transition``); ``resume`` on an active goal re-arms it, so it is offered
    only while that goal waits for the person."""
    if not view:
        return ["create"]
    phase = view.get("phase")
    rounds_left = int(view.get("roundsLeft", 0)) > 0
    waiting = view.get("activation") != "armed"
    if phase == "active":
        allowed = {"edit", "pause", "complete", "block", "clear"} | ({"resume"} if waiting and rounds_left else set())
    elif phase == "paused":
        allowed = {"edit", "complete", "block", "clear"} | ({"resume"} if rounds_left else set())
    elif phase == "blocked":
        allowed = {"edit", "complete", "clear"} | ({"resume"} if rounds_left else set())
    else:  # complete
        allowed = {"create", "clear"}
    return [a for a in GOAL_ACTION_ORDER if a in allowed]


def goal_status(view: dict[str, Any] | None) -> dict[str, Any]:
    """The status line of a goal (a wire GoalView, or None): ``{text, tooltip, severity,
    actions}``. ``text`` has no icon (each editor puts its own in front); ``tooltip`` is
    plain lines; ``severity`` is ``none``, ``hint`` (waiting for the person) or
    ``warning`` (blocked)."""
    if not view:
        return {
            "text": "no goal",
            "tooltip": ["No goal in this session.", "Actions: create"],
            "severity": "none",
            "actions": ["create"],
        }
    phase = view.get("phase")
    used, max_rounds, left = view.get("roundsStarted", 0), view.get("maxRounds", 0), view.get("roundsLeft", 0)
    waiting = phase == "active" and view.get("activation") != "armed"
    reason = view.get("blockedReason") if isinstance(view.get("blockedReason"), dict) else None
    parts = [f"{used}/{max_rounds}"]
    tokens_used, max_tokens = view.get("tokensUsed"), view.get("maxTokens")
    if tokens_counted(tokens_used, max_tokens):
        parts.append(f"{tokens(tokens_used)}/{tokens(max_tokens)} tok" if isinstance(max_tokens, int) else f"{tokens(tokens_used)} tok")
    if waiting:
        parts.append("waiting for you to resume" if left > 0 else "round budget spent")
    elif phase == "blocked" and reason:
        parts.append(f"blocked: {reason.get('code')}")
    else:
        parts.append(str(phase))
    if phase == "active":
        if not waiting:
            state = "Active: rounds continue on their own."
        elif left > 0:
            state = "Active, waiting for you to resume: nothing runs until you do."
        else:
            state = "Active, but its round budget is spent: raise it (edit) to go on."
    elif phase == "paused":
        state = "Paused: nothing runs until you resume."
    elif phase == "blocked":
        state = f"Blocked: {reason.get('message')} ({reason.get('code')})" if reason else "Blocked."
    else:
        state = "Complete."
    tooltip = [f"Goal: {view.get('objective', '')}", state, f"Rounds: {used} of {max_rounds} used, {left} left"]
    if tokens_counted(tokens_used, max_tokens):
        tooltip.append(
            f"Tokens: {tokens(tokens_used)} of {tokens(max_tokens)} used" if isinstance(max_tokens, int) else f"Tokens: {tokens(tokens_used)} used"
        )
    actions = goal_actions(view)
    tooltip.append("Actions: " + ", ".join(actions))
    severity = "warning" if phase == "blocked" else "hint" if waiting else "none"
    return {"text": " · ".join(parts), "tooltip": tooltip, "severity": severity, "actions": actions}
