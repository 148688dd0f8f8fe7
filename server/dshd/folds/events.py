"""Typed session-log events, format version 1 (SPEC section 3).

One msgspec Struct per event type, tagged on the envelope's ``type`` field, so a
whole line decodes in one C call and a wrong shape fails with a path in the
message (``Expected `int`, got `str` - at `$.data.goal.revision```).

The log layer (layer 1) stores and reads lines; it never imports this module.
Callers hand it :func:`decode_line` when they want typed events.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta, Struct

FORMAT_VERSION = 1


class _Data(Struct, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """Base for payloads: strict (unknown keys are corruption), absent optionals omitted."""


# ---- payloads ---------------------------------------------------------------


class ForkedFrom(_Data):
    sessionId: str
    seq: int


class SessionStartData(_Data):
    sessionId: str
    formatVersion: Literal[1]
    forkedFrom: ForkedFrom | None = None
    # Our addition (documented in docs/log-format.md): the title shown by session/list.
    title: str | None = None


# "compact": a turn opened by /compact to compact the context (no user/message of its own).
TurnCause = Literal["prompt", "continuation", "steer", "compact"]


class TurnOpenData(_Data):
    turn: int
    cause: TurnCause


ModelErrorKind = Literal[
    "auth", "rate-limit", "connection", "timeout", "bad-request", "context-overflow", "server", "bad-response",
    "output-limit",
]


class TurnError(_Data):
    """Why a model call failed (stopReason "model-error"); ``message`` says what to do."""

    kind: ModelErrorKind
    message: str


class TurnCloseData(_Data):
    turn: int
    stopReason: str
    error: TurnError | None = None  # only with stopReason "model-error"
    client: str | None = None  # the name of the client that cancelled it (stopReason "cancelled" only): absent for older logs
    failure: str | None = None  # stopReason "error" on a disk error: what failed, its path and the OS error


class GoalRound(_Data):
    goalId: str
    round: int
    revision: int


class UserMessageData(_Data):
    text: str
    source: Literal["user", "plugin"]
    plugin: str | None = None
    goalRound: GoalRound | None = None
    client: str | None = None  # the name of the client that sent it (a person's prompt or steer): absent for older logs


class RequestHeaderData(_Data):
    step: int
    planActive: bool
    sections: list[str]
    tools: list[str]


TokenCount = Annotated[int, Meta(ge=0)]


class Usage(_Data):
    """Tokens one model call took, as the provider reported them (``estimated``: it
    reported none, and the counts are characters/4 of the request and the reply)."""

    inputTokens: TokenCount
    outputTokens: TokenCount
    # The part of inputTokens the provider read from its prompt cache (absent: none said).
    cachedInputTokens: TokenCount | None = None
    estimated: bool = False


class AssistantMessageData(_Data):
    text: str
    usage: Usage | None = None  # present when the provider reported both counts


class ToolCallData(_Data):
    callId: str  # the call's identity in this session (unique in it)
    name: str
    arguments: dict
    # Our addition: the provider's own id, when it differs from callId (the provider used
    # it before in this session); the model is sent this one back.
    providerCallId: str | None = None


class ReviewComment(_Data):
    line: int  # 1-based line of the reviewed text
    text: str


class ReviewData(_Data):
    """A person's verdict on what a tool call presented (``exit_plan_mode``'s plan): the
    outcome as data, so readers never parse the text written for the model."""

    outcome: Literal["approved", "revise", "failed"]
    feedback: str | None = None  # the person's words, as given
    comments: list[ReviewComment] | None = None  # line comments, as given
    client: str | None = None  # the name of the client that gave the verdict: absent for older logs


class ToolResultData(_Data):
    callId: str
    ok: bool
    content: str
    # Our addition: present on results of a tool that asks a person to review (absent in
    # logs written before it; readers then fall back to the result's text).
    review: ReviewData | None = None


class PlanModeData(_Data):
    active: bool


class PlanForgetData(_Data):
    """``/plan forget``: the approved plan of this call is no longer the plan of record, so
    it is not rendered as prompt section ``plan:approved`` after a compaction (P-22)."""

    callId: str


class ContextCompactData(_Data):
    """The transcript is ``summary`` plus the events after ``throughSeq`` from here on.
    ``tokensBefore`` / ``tokensAfter``: the estimated request size before and after."""

    summary: str
    throughSeq: int
    tokensBefore: int
    tokensAfter: int


class PermissionDecisionData(_Data):
    """Who allowed or refused a tool call (written by the approvals gate only)."""

    callId: str
    tool: str
    outcome: Literal["allow-once", "allow-session", "reject"]
    by: Literal["person", "session", "policy", "fail-closed"]
    feedback: str | None = None
    client: str | None = None  # the name of the client that answered (by "person" only): absent for older logs


class McpServerData(_Data):
    """An MCP server that failed to start, died or hung (written by the mcp plugin, once
    per server per session); its tools are gone for the rest of the session."""

    name: str
    state: Literal["failed"]
    reason: str


GoalPhase = Literal["active", "paused", "blocked", "complete"]
GoalOp = Literal["create", "edit", "pause", "resume", "complete", "block", "clear"]


class BlockedReason(_Data):
    code: str
    message: str


class GoalRef(_Data):
    id: str
    revision: int


class GoalSnapshot(_Data):
    id: str
    revision: int
    objective: str
    phase: GoalPhase
    maxRounds: int
    blockedReason: BlockedReason | None = None
    maxTokens: int | None = None  # token budget; absent: none


class GoalCheck(_Data):
    """The ``[goals] check`` command that passed (exit 0) before the model's complete (G-23):
    the command as run and the goal_complete call that ran it."""

    command: str
    callId: str


class GoalChangeData(_Data):
    """Either a snapshot (op != "clear": goal, roundsStarted, createdAt, updatedAt, and
    tokensUsed, which logs written before token budgets lack) or a tombstone
    (op == "clear": cleared, clearedAt). Which keys go with which op is checked by the
    goal fold, which reports the exact line."""

    version: Literal[1]
    op: GoalOp
    goal: GoalSnapshot | None = None
    roundsStarted: int | None = None
    tokensUsed: int | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    cleared: GoalRef | None = None
    clearedAt: str | None = None
    check: GoalCheck | None = None  # only on a complete whose check passed (G-23)
    client: str | None = None  # the name of the client that asked for the change (a person's write): absent for older logs


class CheckpointTakenData(_Data):
    """A snapshot of the workspace's files in the shadow repository (.dsh/checkpoints.git):
    ``phase`` "before" a step's first tool ran (only for a step with a write or exec call)
    or "after" its last result; ``tree`` the 40-hex git tree id, ``files`` how many files
    it holds. Written in the step's turn."""

    step: int
    tree: str
    files: int
    phase: str  # "before" | "after": checked by the fold, which names a wrong one


class CheckpointRestoredData(_Data):
    """Files put back as they were at a "before" checkpoint (``checkpoint``: its seq);
    ``forced``: those of ``files`` the person had changed and chose to overwrite."""

    checkpoint: int
    files: list[str]
    forced: list[str] = []


# ---- envelopes ----------------------------------------------------------------


class _Event(Struct, tag_field="type", forbid_unknown_fields=True, omit_defaults=True, frozen=True, kw_only=True):
    seq: int
    at: str
    turn: int | None = None


class SessionStart(_Event, tag="session/start", kw_only=True):
    data: SessionStartData


class TurnOpen(_Event, tag="turn/open", kw_only=True):
    data: TurnOpenData


class TurnClose(_Event, tag="turn/close", kw_only=True):
    data: TurnCloseData


class UserMessage(_Event, tag="user/message", kw_only=True):
    data: UserMessageData


class RequestHeader(_Event, tag="request/header", kw_only=True):
    data: RequestHeaderData


class AssistantMessage(_Event, tag="assistant/message", kw_only=True):
    data: AssistantMessageData


class ToolCall(_Event, tag="tool/call", kw_only=True):
    data: ToolCallData


class ToolResult(_Event, tag="tool/result", kw_only=True):
    data: ToolResultData


class PlanMode(_Event, tag="plan/mode", kw_only=True):
    data: PlanModeData


class PlanForget(_Event, tag="plan/forget", kw_only=True):
    data: PlanForgetData


class GoalChange(_Event, tag="goal/change", kw_only=True):
    data: GoalChangeData


class ContextCompact(_Event, tag="context/compact", kw_only=True):
    data: ContextCompactData


class PermissionDecision(_Event, tag="permission/decision", kw_only=True):
    data: PermissionDecisionData


class McpServer(_Event, tag="mcp/server", kw_only=True):
    data: McpServerData


class CheckpointTaken(_Event, tag="checkpoint/taken", kw_only=True):
    data: CheckpointTakenData


class CheckpointRestored(_Event, tag="checkpoint/restored", kw_only=True):
    data: CheckpointRestoredData


Event = Union[
    SessionStart,
    TurnOpen,
    TurnClose,
    UserMessage,
    RequestHeader,
    AssistantMessage,
    ToolCall,
    ToolResult,
    PlanMode,
    PlanForget,
    GoalChange,
    ContextCompact,
    PermissionDecision,
    McpServer,
    CheckpointTaken,
    CheckpointRestored,
]

EVENT_CLASSES: dict[str, type] = {
    cls.__struct_config__.tag: cls  # type: ignore[attr-defined]
    for cls in (
        SessionStart,
        TurnOpen,
        TurnClose,
        UserMessage,
        RequestHeader,
        AssistantMessage,
        ToolCall,
        ToolResult,
        PlanMode,
        PlanForget,
        GoalChange,
        ContextCompact,
        PermissionDecision,
        McpServer,
        CheckpointTaken,
        CheckpointRestored,
    )
}

# Data classes by event type, for building an event from (type, data-dict).
DATA_CLASSES: dict[str, type] = {
    tag: next(f.type for f in msgspec.structs.fields(cls) if f.name == "data")
    for tag, cls in EVENT_CLASSES.items()
}

_decoder = msgspec.json.Decoder(Event)
_encoder = msgspec.json.Encoder()


def decode_line(line: bytes) -> Event:
    """Decode one log line (with or without its trailing newline).

    Raises ``msgspec.DecodeError`` (malformed JSON) or ``msgspec.ValidationError``
    (wrong envelope or payload shape); both messages are fit to show a person.
    """
    return _decoder.decode(line)


def encode_event(event: Event) -> bytes:
    """The event as one log line, newline included."""
    return _encoder.encode(event) + b"\n"


def to_builtins(event: Event) -> dict:
    """The event as plain JSON-ready values, as the wire's ``dsh/session/event`` sends it."""
    return msgspec.to_builtins(event)


# ---- a partial view of a line -----------------------------------------------------------
# For a fold that reads a few fields of every line of a long log (folds/rounds.py): the
# log's own names, only the fields it reads; the rest of the line is skipped unread (and
# unchecked: replay checked it).


class _ViewUsage(Struct, gc=False):
    inputTokens: int = 0
    outputTokens: int = 0
    cachedInputTokens: int | None = None
    estimated: bool = False


class _ViewGoalRound(Struct, gc=False):
    goalId: str
    round: int
    revision: int


class _ViewGoal(Struct, gc=False):
    id: str


class _ViewData(Struct, gc=False):
    turn: int | None = None
    stopReason: str | None = None
    goalRound: _ViewGoalRound | None = None
    usage: _ViewUsage | None = None
    callId: str | None = None
    name: str | None = None
    by: str | None = None
    op: str | None = None
    goal: _ViewGoal | None = None


class LineView(Struct, gc=False):
    """A line's type, time, turn, and the payload fields above (same names as the events')."""

    type: str
    at: str
    data: _ViewData
    turn: int | None = None


decode_line_view = msgspec.json.Decoder(LineView).decode
