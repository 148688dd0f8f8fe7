"""The words a person reads: stop reasons, model errors, token counts, goal
changes and the goal status line. One copy for every client (the chat items carry
these texts; every GoalView on the wire carries its ``status`` and ``actions``, which the
editors render as they are).

Pure functions of plain values (the log's event data as written, the core's GoalView);
no wire shape: each door's converter puts these words into its own messages. No revision
numbers in any text: they stay in the fields of detail views.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from dshd.folds.goal_phases import offered_ops
from dshd.formats import shown
from dshd.formats import clip  # one line, at most a width (defined once, for the tools' titles too)

if TYPE_CHECKING:
    from dshd.services.goals import GoalView

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
    "output-limit": "reply cut at the output limit",
}


def turn_end_text(turn: int, stop_reason: str, error: dict[str, Any] | None = None, other: str | None = None) -> str:
    """``Turn 3 finished``; ``Turn 4 stopped: model error (rate limited): <message>``;
    cancelled by another client (``other``, its name): ``Turn 5 stopped in Neovim 2``."""
    if stop_reason == "cancelled" and other is not None and error is None:
        return f"Turn {turn} stopped in {other}"
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


# ---- who did it (several clients on one session) -------------------------------------------

CLIENT_NAME_WIDTH = 80  # characters of a client's name shown (a log from elsewhere may hold any)


def other_client(client: object, me: str | None) -> str | None:
    """The name to show for an act recorded with ``client``, as the client named ``me``
    reads it: None when it was ``me`` (the words then say "You"), or the log names no
    client (written before clients were named, or nobody's act); else the other client's
    name, escaped and cut to one short line."""
    if not isinstance(client, str) or not client.strip() or client == me:
        return None
    return clip(shown(client), CLIENT_NAME_WIDTH)


def user_label(other: str | None) -> str:
    """Who sent a person's message: ``You``, or ``From Neovim (pid 4242)``."""
    return "You" if other is None else f"From {other}"


def by_other(text: str, other: str | None) -> str:
    """A goal change's line as another client's act: ``Goal paused (…) — from VS Code — ws-a``."""
    return text if other is None else f"{text} — from {other}"


def late_answer_text(what: str, winner: str | None, outcome: str | None) -> str:
    """What a client whose answer lost is told, once: ``Your answer to the approval changed
    nothing: answered in Neovim 2 first (allowed once).``"""
    if winner is None:
        return f"Your answer to the {what} changed nothing: the question had already closed."
    said = OUTCOME_WORDS.get(outcome or "", outcome or "")
    return f"Your answer to the {what} changed nothing: answered in {winner} first" + (f" ({said})." if said else ".")


OUTCOME_WORDS = {
    "approve": "approved",
    "revise": "sent back",
    "allow-once": "allowed once",
    "allow-session": "allowed for this session",
    "reject": "rejected",
}


# ---- tools (a call's title is the tool's own: agent/tools.py, Tool.describe) --------------------


def permission_text(tool: str, outcome: str, by: str | None, feedback: str | None, other: str | None = None) -> str:
    """``You allowed run_command once``; ``You rejected write_file: <feedback>``;
    ``run_command not run: no one could answer``; another client's answer (``other``, its
    name): ``edit_file allowed once, approved in Neovim 2``, ``edit_file rejected in Neovim 2``."""
    if by == "fail-closed":
        text = f"{tool} not run: no one could answer"
    elif other is not None and by in (None, "", "person", "user"):
        text = {
            "allow-once": f"{tool} allowed once, approved in {other}",
            "allow-session": f"{tool} allowed for this session, approved in {other}",
            "reject": f"{tool} rejected in {other}",
        }.get(outcome, f"{tool}: {outcome}, answered in {other}")
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


# ---- MCP servers ----------------------------------------------------------------------------

MCP_REASON_WIDTH = 200  # a server's own words (its stderr, an exception) can run long


def mcp_server_failed_text(name: str, reason: str | None) -> str:
    """``MCP server "time" failed: exited with status 1. Its tools are gone for this
    session; open the session again to restart it.`` The name and the reason come from
    a config file and the server's own output: escaped, the reason cut to one short line."""
    why = clip(shown(reason), MCP_REASON_WIDTH) if isinstance(reason, str) and reason.strip() else "no reason given"
    return f'MCP server "{shown(name)}" failed: {why}. Its tools are gone for this session; open the session again to restart it.'


# ---- plan reviews ------------------------------------------------------------------------------

PLAN_OUTCOMES = {
    "pending": "waiting for your review",
    "approved": "approved",
    "sent-back": "sent back with feedback",
    "not-reviewed": "not reviewed",
}


def plan_outcome_text(outcome: str, other: str | None) -> str:
    """``approved``; another client's verdict: ``approved in VS Code — ws-a``."""
    text = PLAN_OUTCOMES[outcome]
    if other is None or outcome not in ("approved", "sent-back"):
        return text
    return f"approved in {other}" if outcome == "approved" else f"sent back with feedback in {other}"


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
        check = data.get("check") if isinstance(data.get("check"), dict) else None
        if check is not None:  # G-23: the model's complete, after [goals] check passed
            return f"Goal complete ({progress}): its check `{clip(str(check.get('command', '')), 60)}` passed"
        return f"Goal complete ({progress})"
    if op == "block":
        reason = goal.get("blockedReason") if isinstance(goal.get("blockedReason"), dict) else {}
        message = str(reason.get("message", "")).strip()
        code = reason.get("code", "")
        return f"Goal blocked: {message} ({code})" if message else f"Goal blocked ({code})"
    return f"Goal {op}"


GOAL_ACTION_LABELS = {
    "create": "Create a goal…",
    "edit": "Edit the goal…",
    "raise": "Raise the budget and resume…",
    "pause": "Pause",
    "resume": "Resume",
    "complete": "Mark complete",
    "block": "Block…",
    "clear": "Clear",
}


# A goal blocked for one of these codes is offered "raise" (G-21): not a method, the client
# asks for the new budget(s), then sends dsh/goal/edit and dsh/goal/resume with edit's ref.
RAISABLE_CODES = frozenset({"round-budget-exhausted", "token-budget-exhausted"})


def _raisable(view: "GoalView") -> bool:
    reason = view.blocked_reason
    # Once an edit left budget again, "resume" is offered instead.
    return view.phase == "blocked" and reason is not None and reason.code in RAISABLE_CODES and not _budget_left(view)


def _budget_left(view: "GoalView") -> bool:
    tokens_left = view.max_tokens is None or view.tokens_used < view.max_tokens
    return view.rounds_left > 0 and tokens_left


def goal_actions(view: "GoalView | None") -> list[dict[str, str]]:
    """The goal actions the daemon accepts now, ``[{id, label}]`` in a fixed order (the
    phase table of ``folds/goal_phases.py``; anything else is ``invalid-transition``)."""
    if view is None:
        return list(_actions_for(None, False, False))
    return list(_actions_for(view.phase, view.activation == "armed", _budget_left(view), _raisable(view)))


@functools.lru_cache(maxsize=64)
def _actions_for(phase: str | None, armed: bool, budget_left: bool, raisable: bool = False) -> tuple[dict[str, str], ...]:
    """Made once per state (a listing of 1,000 goals asks 1,000 times); the dicts are shared
    by every answer, so nothing may change them (the wire encoder only reads). ``raise``
    (edit then resume, composed by the client) comes right after ``edit``."""
    ops = offered_ops(phase, armed=armed, budget_left=budget_left)
    if raisable and "edit" in ops:
        ops.insert(ops.index("edit") + 1, "raise")
    return tuple({"id": op, "label": GOAL_ACTION_LABELS[op]} for op in ops)


WAITING_FOR = {"plan-review": "a plan review", "approval": "an approval"}

NO_GOAL_STATUS = {
    "text": "no goal",
    "short": "no goal",
    "tone": "none",
    "usage": "no goal",
    "detail": ["No goal in this session."],
}


def goal_status(view: "GoalView | None") -> dict[str, Any]:
    """What a person reads about a goal (the core's GoalView, or None):
    ``{text, short, tone, usage, detail}``.

    ``text`` is the status line without an icon (each editor puts its own in front):
    ``3/40 · 12.4k/100k tok · active``; ``short`` its last part (the phase, or what the goal
    waits for); ``tone`` is ``none``, ``hint`` (waiting for the person) or ``warning``
    (blocked); ``usage`` the budget in a sentence, for notices (``3 of 40 rounds used,
    12.4k tokens``); ``detail`` the lines of a tooltip or a detail view. No revision.
    Made once per distinct goal: shared by every answer, so nothing may change it."""
    if view is None:
        return {**NO_GOAL_STATUS, "detail": list(NO_GOAL_STATUS["detail"])}
    reason = view.blocked_reason
    return _status_for(
        view.objective, view.phase, view.max_rounds, view.rounds_started, view.rounds_left,
        view.tokens_used, view.max_tokens, view.activation, None if reason is None else (reason.code, reason.message),
        waiting_for=view.waiting_for if view.phase == "active" else None, estimated=view.tokens_estimated,
    )  # fmt: skip


def goal_words(view: "GoalView | None") -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``(status, actions)``: what every wire GoalView carries for people to read (each
    door's converter adds them), so the editors render these and recompute nothing."""
    return goal_status(view), goal_actions(view)


@functools.lru_cache(maxsize=4096)
def _status_for(
    objective: str, phase: str, max_rounds: int, used: int, left: int, tokens_used: int, max_tokens: int | None,
    activation: str, reason: tuple[str, str] | None, waiting_for: str | None = None, estimated: bool = False,
) -> dict[str, Any]:
    """goal_status, made once per distinct goal: a listing of 1,000 sessions with goals asks
    for the same words at every list. ``estimated``: the tokens used are partly characters/4
    (the provider reported no usage), written ``~12k``."""
    waiting = phase == "active" and activation != "armed"
    counted = tokens_counted(tokens_used, max_tokens)
    budgeted = isinstance(max_tokens, int)
    used_tokens = ("~" if estimated else "") + tokens(tokens_used)
    if waiting_for is not None:
        short = "waiting for you"
    elif waiting:
        short = "waiting for you to resume" if left > 0 else "round budget spent"
    elif phase == "blocked" and reason:
        short = f"blocked: {reason[0]}"
    else:
        short = str(phase)
    parts = [f"{used}/{max_rounds}"]
    usage = f"{used} of {max_rounds} rounds used"
    if counted:
        parts.append(f"{used_tokens}/{tokens(max_tokens)} tok" if budgeted else f"{used_tokens} tok")
        usage += f", {used_tokens} of {tokens(max_tokens)} tokens" if budgeted else f", {used_tokens} tokens"
    parts.append(short)
    if phase == "active":
        if waiting_for is not None:
            state = f"Active, waiting for you: {WAITING_FOR.get(waiting_for, 'a question')} is open."
        elif not waiting:
            state = "Active: rounds continue on their own."
        elif left > 0:
            state = "Active, waiting for you to resume: nothing runs until you do."
        else:
            state = "Active, but its round budget is spent: raise it (edit) to go on."
    elif phase == "paused":
        state = "Paused: nothing runs until you resume."
    elif phase == "blocked":
        # The objective and the reason were typed by a person or the model: escaped (formats.shown).
        state = f"Blocked: {shown(reason[1])} ({reason[0]})" if reason else "Blocked."
    else:
        state = "Complete."
    detail = [f"Goal: {shown(objective)}", state, f"Rounds: {used} of {max_rounds} used, {left} left"]
    if counted:
        detail.append(
            f"Tokens: {used_tokens} of {tokens(max_tokens)} used" if budgeted else f"Tokens: {used_tokens} used"
        )
        if estimated:
            detail.append("Estimated (characters/4): the model's server reports no token usage.")
    tone = "warning" if phase == "blocked" else "hint" if waiting or waiting_for is not None else "none"
    return {"text": " · ".join(parts), "short": short, "tone": tone, "usage": usage, "detail": detail}
