"""Pure folds (layer 2). Each returns a new frozen state, or the same object when the
event does not concern it, or raises :class:`FoldError` with the reason the event may
not follow the prefix. Every reason text is listed in docs/log-format.md.
"""

from __future__ import annotations

import re

import msgspec

from dshd.folds.plans import PLAN_TOOL
from dshd.folds.titles import title_from_prompt
from dshd.folds.events import (
    AssistantMessage,
    CheckpointRestored,
    CheckpointTaken,
    ContextCompact,
    GoalChange,
    GoalChangeData,
    GoalRef,
    McpServer,
    PermissionDecision,
    PlanForget,
    PlanMode,
    RequestHeader,
    SessionStart,
    ToolCall,
    ToolResult,
    TurnClose,
    TurnOpen,
    UserMessage,
)
from dshd.folds.state import ContextState, GoalState, PlanState, SessionState, TurnState, cap_title
from dshd.folds.goal_phases import CREATE_OVER, TRANSITIONS
from dshd.formats import is_kebab_case


class FoldError(Exception):
    """An event that may not follow the prefix it is applied to."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_INITIAL_PLAN = PlanState()
_INITIAL_TURN = TurnState()
_INITIAL_GOAL = GoalState()
_INITIAL_CONTEXT = ContextState()

# The largest token figure a context/compact may carry (wire integers stop at 2^53-1).
MAX_TOKENS = 2**53 - 1


# ---- plan mode (PM-6, PM-14) ------------------------------------------------------


def fold_plan_mode(state: PlanState, event) -> PlanState:
    cls = event.__class__
    if cls is PlanMode:
        active = event.data.active
        return state if state.active is active else msgspec.structs.replace(state, active=active)
    if cls is RequestHeader:
        header_active = event.data.planActive
        return state if state.header_active is header_active else msgspec.structs.replace(state, header_active=header_active)
    if cls is ToolCall:
        return _plan_call(state, event)
    if cls is ToolResult:
        return _plan_result(state, event.data) if state.reviewing else state
    if cls is TurnClose or cls is TurnOpen:
        # A plan call whose turn ended without its result approved nothing.
        return msgspec.structs.replace(state, reviewing=()) if state.reviewing else state
    if cls is PlanForget:
        call_id = event.data.callId
        if not call_id.strip():
            raise FoldError("plan/forget needs a callId")
        if call_id == state.approved_call:
            return msgspec.structs.replace(state, approved_call=None, approved_seq=0)
    return state


def _plan_call(state: PlanState, event) -> PlanState:
    """P-22: an ``exit_plan_mode`` call presenting a plan (the same test as folds/plans.py)."""
    data = event.data
    if data.name != PLAN_TOOL:
        return state
    plan = data.arguments.get("plan")
    if not isinstance(plan, str) or not plan.strip():
        return state
    rest = tuple(pair for pair in state.reviewing if pair[0] != data.callId)
    return msgspec.structs.replace(state, reviewing=rest + ((data.callId, event.seq),))


def _plan_result(state: PlanState, data) -> PlanState:
    """The result of a plan call: approved (its review says so; a result written before
    reviews were recorded: ok) makes it the plan of record."""
    seq = next((s for call_id, s in state.reviewing if call_id == data.callId), None)
    if seq is None:
        return state
    rest = tuple(pair for pair in state.reviewing if pair[0] != data.callId)
    approved = data.review.outcome == "approved" if data.review is not None else data.ok
    if approved:
        return msgspec.structs.replace(state, reviewing=rest, approved_call=data.callId, approved_seq=seq)
    return msgspec.structs.replace(state, reviewing=rest)


# ---- open turn (PM-13) ------------------------------------------------------------


def fold_open_turn(state: TurnState, event) -> TurnState:
    cls = event.__class__
    if cls is RequestHeader:
        if not state.open:
            raise FoldError("request/header outside a turn")
        step = event.data.step
        if step != state.step + 1:
            raise FoldError(f"request/header step {step}: expected step {state.step + 1}")
        return TurnState(state.last_turn, True, step, state.cause, state.decided)
    if cls is TurnOpen:
        if state.open:
            raise FoldError(f"turn/open while turn {state.last_turn} is open")
        turn = event.data.turn
        if turn != state.last_turn + 1:
            raise FoldError(f"turn/open {turn}: expected turn {state.last_turn + 1}")
        return TurnState(turn, True, 0, event.data.cause)
    if cls is TurnClose:
        if not state.open:
            raise FoldError("turn/close with no open turn")
        if event.data.turn != state.last_turn:
            raise FoldError(f"turn/close {event.data.turn} but the open turn is {state.last_turn}")
        if event.data.error is not None and event.data.stopReason != "model-error":
            raise FoldError(f"turn/close with an error but stopReason {event.data.stopReason!r} (only model-error has one)")
        return TurnState(state.last_turn, False, 0, None)
    return state


# ---- permission decisions ---------------------------------------------------------

# Which outcome each decider may give: the policy and an earlier allow-session only allow,
# a channel that failed only refuses; the person may answer anything.
_OUTCOMES_BY = {
    "policy": ("allow-once",),
    "session": ("allow-session",),
    "fail-closed": ("reject",),
    "person": ("allow-once", "allow-session", "reject"),
}


def fold_permission(state: TurnState, context: ContextState, event) -> TurnState:
    """A decision belongs to the open turn, names a tool call of it that has no result yet,
    once, and says who decided consistently."""
    data = event.data
    if event.turn is None or not state.open:
        raise FoldError("permission/decision outside a turn")
    if not data.callId.strip() or not data.tool.strip():
        raise FoldError("permission/decision needs a callId and a tool")
    if data.callId not in context.pending_calls:
        raise FoldError(f"permission/decision for call {data.callId}, which is not waiting for its result")
    if data.callId in state.decided:
        raise FoldError(f"second permission/decision for call {data.callId}")
    if data.outcome not in _OUTCOMES_BY[data.by]:
        raise FoldError(f"permission/decision by {data.by} cannot be {data.outcome}")
    if data.feedback is not None and data.by != "person":
        raise FoldError(f"permission/decision by {data.by} carries feedback")
    return TurnState(state.last_turn, True, state.step, state.cause, state.decided | {data.callId})


def _check_envelope_turn(state: TurnState, event) -> None:
    """``turn`` on an event names the open turn (for turn/open and turn/close: the turn in data)."""
    turn = event.turn
    cls = event.__class__
    if cls is TurnOpen or cls is TurnClose:
        if turn != event.data.turn:
            raise FoldError(f"envelope turn {turn} differs from data turn {event.data.turn}")
        return
    if not state.open:
        raise FoldError(f"event in turn {turn} but no turn is open")
    if turn != state.last_turn:
        raise FoldError(f"event in turn {turn} but the open turn is {state.last_turn}")


# ---- checkpoints ----------------------------------------------------------------------

_TREE_ID = re.compile(r"[0-9a-f]{40}")
_PHASES = ("before", "after")


def check_checkpoint(state: TurnState, event) -> None:
    """A ``checkpoint/taken`` belongs to the open turn's current step and names a git tree;
    a ``checkpoint/restored`` comes between turns (a restore refuses while one runs),
    names an earlier event, and lists workspace paths, the forced ones among them.
    Neither changes the folded state: which seq is a "before" checkpoint is the
    checkpoint service's to check (it reads the log), so the state stays small."""
    data = event.data
    if event.__class__ is CheckpointTaken:
        if event.turn is None or not state.open:
            raise FoldError("checkpoint/taken outside a turn")
        if data.step < 1:
            raise FoldError(f"checkpoint/taken step {data.step} is below 1")
        if data.step != state.step:
            raise FoldError(f"checkpoint/taken step {data.step} but the open turn is at step {state.step}")
        if data.phase not in _PHASES:
            raise FoldError(f"checkpoint/taken phase {data.phase!r} is not before or after")
        if _TREE_ID.fullmatch(data.tree) is None:
            raise FoldError(f"checkpoint/taken tree {data.tree!r} is not a 40-hex tree id")
        if data.files < 0:
            raise FoldError(f"checkpoint/taken files {data.files} is below 0")
        return
    if state.open:
        raise FoldError(f"checkpoint/restored while turn {state.last_turn} is open")
    if not 1 <= data.checkpoint < event.seq:
        raise FoldError(f"checkpoint/restored names checkpoint {data.checkpoint}, which is not an earlier seq")
    for path in data.files:
        if not _is_workspace_path(path):
            raise FoldError(f"checkpoint/restored file {path!r} is not a relative workspace path")
    if data.forced:
        files = set(data.files)
        for path in data.forced:
            if path not in files:
                raise FoldError(f"checkpoint/restored forced {path!r} is not one of its files")


def _is_workspace_path(path: str) -> bool:
    """Relative, "/"-separated, no empty, "." or ".." part, no NUL: a path inside the root."""
    if not path or path.startswith("/") or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


# ---- goals (G-3..G-8) -------------------------------------------------------------

_SNAPSHOT_KEYS = ("goal", "roundsStarted", "createdAt", "updatedAt")  # required in a snapshot
_SNAPSHOT_ONLY_KEYS = _SNAPSHOT_KEYS + ("tokensUsed",)  # optional: older logs lack it
_TOMBSTONE_KEYS = ("cleared", "clearedAt")
# Which op may start from which phase: goal_phases.TRANSITIONS, the one phase table.


def _present(data: GoalChangeData, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if getattr(data, k) is not None]


def _no_current(state: GoalState, goal_id: str, what: str) -> FoldError:
    if state.cleared is not None and state.cleared.id == goal_id:
        return FoldError(f"write to cleared goal {goal_id}")
    return FoldError(f"{what} of goal {goal_id} but there is no current goal")


def _check_tokens_used(data: GoalChangeData, counted: int) -> None:
    """A snapshot's tokensUsed is the tokens counted; absent only while none were
    counted (logs written before token budgets never counted any)."""
    written = data.tokensUsed
    if written is None:
        if counted:
            raise FoldError(f"tokensUsed absent but tokens counted {counted}")
    elif written != counted:
        raise FoldError(f"tokensUsed {written} disagrees with tokens counted {counted}")


def _goal_change(state: GoalState, data: GoalChangeData) -> GoalState:
    op = data.op
    if op == "clear":
        extra = _present(data, _SNAPSHOT_ONLY_KEYS)
        if extra:
            raise FoldError(f"malformed goal/change: clear with snapshot keys {', '.join(extra)}")
        cleared = data.cleared
        if cleared is None or data.clearedAt is None:
            raise FoldError("malformed goal/change: clear needs cleared and clearedAt")
        current = state.goal
        if current is None:
            raise _no_current(state, cleared.id, "clear")
        if cleared.id != current.id:
            raise FoldError(f"clear of goal {cleared.id} but the current goal is {current.id}")
        if cleared.revision != current.revision:
            raise FoldError(f"clear names revision {cleared.revision}, the current revision is {current.revision}")
        return GoalState(cleared=GoalRef(id=current.id, revision=current.revision), used_ids=state.used_ids)

    extra = _present(data, _TOMBSTONE_KEYS)
    if extra:
        raise FoldError(f"malformed goal/change: {op} with tombstone keys {', '.join(extra)}")
    if data.check is not None and op != "complete":
        raise FoldError(f"malformed goal/change: {op} with a check (only a complete records one)")
    missing = [k for k in _SNAPSHOT_KEYS if getattr(data, k) is None]
    if missing:
        raise FoldError(f"malformed goal/change: {op} without {', '.join(missing)}")
    goal = data.goal
    reason = goal.blockedReason
    if goal.phase == "blocked":
        if reason is None:
            raise FoldError("blocked goal without blockedReason")
        if not is_kebab_case(reason.code):
            raise FoldError(f"blockedReason code {reason.code!r} is not lowercase-kebab-case")
        if not reason.message.strip():
            raise FoldError("blockedReason message is empty")
    elif reason is not None:
        raise FoldError(f"blockedReason on a goal in phase {goal.phase}")
    if goal.maxRounds < 1:
        raise FoldError(f"maxRounds {goal.maxRounds} is below 1")
    if goal.maxTokens is not None and goal.maxTokens < 1:
        raise FoldError(f"maxTokens {goal.maxTokens} is below 1")

    if op == "create":
        current = state.goal
        if current is not None and current.phase not in CREATE_OVER:
            raise FoldError(f"create while goal {current.id} is {current.phase}")
        if goal.id in state.used_ids:
            raise FoldError(f"reused goal id {goal.id}")
        if goal.revision != 1:
            raise FoldError(f"revision {goal.revision} is not previous+1: expected 1")
        if goal.phase != "active":
            raise FoldError(f"invalid transition create to {goal.phase}")
        if data.roundsStarted != 0:
            raise FoldError(f"roundsStarted {data.roundsStarted} disagrees with rounds counted 0")
        _check_tokens_used(data, 0)
        return GoalState(goal, 0, data.createdAt, data.updatedAt, None, state.used_ids | {goal.id})

    current = state.goal
    if current is None:
        raise _no_current(state, goal.id, op)
    if goal.id != current.id:
        raise FoldError(f"{op} of goal {goal.id} but the current goal is {current.id}")
    if current.phase == "complete":
        raise FoldError(f"write to stopped goal {goal.id}")
    if goal.revision != current.revision + 1:
        raise FoldError(f"revision {goal.revision} is not previous+1: expected {current.revision + 1}")
    if data.createdAt != state.created_at:
        raise FoldError(f"createdAt changed from {state.created_at} to {data.createdAt}")
    if data.roundsStarted != state.rounds_started:
        raise FoldError(f"roundsStarted {data.roundsStarted} disagrees with rounds counted {state.rounds_started}")
    _check_tokens_used(data, state.tokens_used)
    sources, target = TRANSITIONS[op]
    if current.phase not in sources:
        raise FoldError(f"invalid transition {op} from {current.phase}")
    expected = current.phase if target is None else target
    if goal.phase != expected:
        raise FoldError(f"invalid transition {op} from {current.phase} to {goal.phase}")
    if op == "edit" and goal.maxRounds < state.rounds_started:
        raise FoldError(f"maxRounds {goal.maxRounds} is below roundsStarted {state.rounds_started}")
    if op == "resume":
        if state.rounds_started >= goal.maxRounds:
            raise FoldError(f"resume with no rounds left ({state.rounds_started} of {goal.maxRounds})")
        if goal.maxTokens is not None and state.tokens_used >= goal.maxTokens:
            raise FoldError(f"resume with no tokens left ({state.tokens_used} of {goal.maxTokens})")
    return msgspec.structs.replace(state, goal=goal, updated_at=data.updatedAt)


def _goal_round(state: GoalState, goal_round, turn: int | None) -> GoalState:
    goal_id = goal_round.goalId
    current = state.goal
    if current is None:
        raise _no_current(state, goal_id, "round")
    if goal_id != current.id:
        raise FoldError(f"round of goal {goal_id} but the current goal is {current.id}")
    if current.phase == "complete":
        raise FoldError(f"write to stopped goal {goal_id}")
    if current.phase != "active":
        raise FoldError(f"round of goal {goal_id} in phase {current.phase}")
    if goal_round.revision != current.revision:
        raise FoldError(f"round names revision {goal_round.revision}, the current revision is {current.revision}")
    n = goal_round.round
    if n <= 0:
        raise FoldError(f"non-positive round {n}")
    if n != state.rounds_started + 1:
        raise FoldError(f"non-sequential round {n}: expected {state.rounds_started + 1}")
    if n > current.maxRounds:
        raise FoldError(f"rounds over the cap: round {n} > maxRounds {current.maxRounds}")
    if current.maxTokens is not None and state.tokens_used >= current.maxTokens:
        raise FoldError(
            f"tokens over the budget: round {n} starts with {state.tokens_used} of maxTokens {current.maxTokens} used"
        )
    return msgspec.structs.replace(state, rounds_started=n, round_turn=turn)


def _goal_usage(state: GoalState, event) -> GoalState:
    """The usage of an assistant message counts when its turn was started as a round of
    the current goal (the envelope's turn names the open turn: checked before this)."""
    turn = event.turn
    if turn is None or turn != state.round_turn or state.goal is None:
        return state
    usage = event.data.usage
    return msgspec.structs.replace(
        state,
        tokens_used=state.tokens_used + usage.inputTokens + usage.outputTokens,
        tokens_estimated=state.tokens_estimated or usage.estimated,
    )


def fold_goal(state: GoalState, event) -> GoalState:
    cls = event.__class__
    if cls is GoalChange:
        return _goal_change(state, event.data)
    if cls is UserMessage:
        goal_round = event.data.goalRound
        if goal_round is not None:
            return _goal_round(state, goal_round, event.turn)
    elif cls is AssistantMessage:
        if event.data.usage is not None:
            return _goal_usage(state, event)
    return state


# ---- context compaction ------------------------------------------------------------


def check_compact(state: ContextState, seq: int, data) -> None:
    """Raise FoldError if a context/compact with ``data`` may not come at ``seq``."""
    through = data.throughSeq
    if not data.summary.strip():
        raise FoldError("context/compact with an empty summary")
    if through < 1:
        raise FoldError(f"throughSeq {through} is not in the log")
    if through >= seq:
        raise FoldError(f"throughSeq {through} is not before this event (seq {seq})")
    if through < state.compact_seq:
        raise FoldError(f"throughSeq {through} is before the last compaction (seq {state.compact_seq})")
    if state.pending_calls and through >= state.batch_from:
        raise FoldError(f"throughSeq {through} is inside the open tool batch (from seq {state.batch_from})")
    if through < state.quiet_from:
        raise FoldError(f"throughSeq {through} is before the end of the last tool batch (seq {state.quiet_from})")
    for name in ("tokensBefore", "tokensAfter"):
        value = getattr(data, name)
        if not 1 <= value <= MAX_TOKENS:
            raise FoldError(f"{name} {value} is not a token count from 1 to {MAX_TOKENS}")


def fold_context(state: ContextState, event) -> ContextState:
    """Tool batches (open while a call has no result; a batch also ends with its turn)
    and the last compaction."""
    cls = event.__class__
    if cls is ToolCall:
        calls = state.pending_calls
        call_id = event.data.callId
        if call_id in calls:
            return state
        return ContextState(
            state.compact_seq, state.through_seq, calls | {call_id}, state.batch_from or event.seq, state.quiet_from
        )
    if cls is ToolResult:
        calls = state.pending_calls
        call_id = event.data.callId
        if call_id not in calls:
            return state
        rest = calls - {call_id}
        if rest:
            return ContextState(state.compact_seq, state.through_seq, rest, state.batch_from, state.quiet_from)
        return ContextState(state.compact_seq, state.through_seq, frozenset(), 0, event.seq)
    if cls is TurnClose:
        if not state.pending_calls:
            return state
        return ContextState(state.compact_seq, state.through_seq, frozenset(), 0, event.seq)
    if cls is ContextCompact:
        check_compact(state, event.seq, event.data)
        return ContextState(
            event.seq, event.data.throughSeq, state.pending_calls, state.batch_from, state.quiet_from
        )
    return state


# ---- the whole session --------------------------------------------------------------


def _start(event) -> SessionState:
    if event.__class__ is not SessionStart:
        raise FoldError("line 1 must be session/start")
    if event.turn is not None:
        raise FoldError("session/start has a turn")
    data = event.data
    return SessionState(
        data.sessionId,
        event.seq,
        _INITIAL_PLAN,
        _INITIAL_TURN,
        _INITIAL_GOAL,
        cap_title(data.title),
        data.forkedFrom,
        event.at,
        _INITIAL_CONTEXT,
    )


def apply(state: SessionState | None, event) -> SessionState:
    """The state after ``event``; raises FoldError if it may not follow ``state``.

    ``state`` is None only before session/start. Dispatch is on the event class so the
    common events (messages, tool calls) cost one dict lookup and one small Struct.
    """
    seq = event.seq
    if state is None:
        if seq != 1:
            raise FoldError(f"seq gap: expected 1, got {seq}")
        return _start(event)
    expected = state.seq + 1
    if seq != expected:
        kind = "gap" if seq > expected else "repeat"
        raise FoldError(f"seq {kind}: expected {expected}, got {seq}")
    turn = state.turn
    if event.turn is not None:
        _check_envelope_turn(turn, event)
    plan = state.plan
    goal = state.goal
    context = state.context
    concern = _CONCERNS.get(event.__class__)
    if concern is None:
        raise FoldError("session/start only on line 1")
    if concern & _TURN:
        turn = fold_open_turn(turn, event)
    if concern & _PLAN:
        plan = fold_plan_mode(plan, event)
    if concern & _GOAL:
        goal = fold_goal(goal, event)
    if concern & _CONTEXT:
        context = fold_context(context, event)
    if concern & _PERMISSION:
        turn = fold_permission(turn, state.context, event)
    if concern & _CHECKPOINT:
        check_checkpoint(turn, event)
    title = state.title
    if title is None and event.__class__ is UserMessage and event.data.source == "user":
        title = title_from_prompt(event.data.text)  # untitled: the first prompt's words (folds/titles.py)
    return SessionState(state.session_id, seq, plan, turn, goal, title, state.forked_from, event.at, context)


_TURN, _PLAN, _GOAL, _CONTEXT, _PERMISSION, _CHECKPOINT = 1, 2, 4, 8, 16, 32
# Which folds an event class concerns (0: none; the state only advances seq). SessionStart is
# absent on purpose: after line 1 it is an error.
_CONCERNS: dict[type, int] = {
    TurnOpen: _TURN | _PLAN,
    TurnClose: _TURN | _CONTEXT | _PLAN,
    RequestHeader: _TURN | _PLAN,
    PlanMode: _PLAN,
    PlanForget: _PLAN,
    GoalChange: _GOAL,
    UserMessage: _GOAL,
    AssistantMessage: _GOAL,  # its usage counts toward the goal's tokens in a round turn
    ToolCall: _CONTEXT | _PLAN,  # a plan call (P-22)
    ToolResult: _CONTEXT | _PLAN,
    ContextCompact: _CONTEXT,
    PermissionDecision: _PERMISSION,
    McpServer: 0,  # a server's failure: news for people, nothing the state holds
    CheckpointTaken: _CHECKPOINT,
    CheckpointRestored: _CHECKPOINT,
}

