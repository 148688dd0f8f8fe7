"""Wire types of the dshd protocol, version 1 (SPEC section 6).

Convention (one for every class here):

* Python fields are snake_case; on the wire every field is camelCase
  (``agent_id`` <-> ``agentId``). :mod:`dshd_protocol.codec` does the mapping, the
  same one lsprotocol's hooks (which pygls installs) apply to attrs classes.
* A field with a default (always ``None``, except the booleans ``reload``,
  ``files``, ``conversation`` and ``force``) is
  *optional*: it may be absent, and :func:`~dshd_protocol.codec.to_wire` leaves it
  out when it equals the default. An optional field never accepts an explicit
  ``null`` (null is not a string, nor a number).
* A field without a default whose type includes ``None`` is *nullable*: it is always
  present, and ``null`` is a meaningful value (``goal`` in ``dsh/session/open``).
* Value rules (minimums, patterns, non-blank text) ride on the type as
  ``Annotated[base, Rule(...)]``; the codec enforces them and the JSON Schema
  generator writes them out, so both read one definition.

The table :data:`METHODS` maps every method name to its kind and its params and result
types; the daemon, the tests, the schema and the docs check all read it.
"""

# No `from __future__ import annotations`: the codec and the schema read the
# Annotated rules from real type objects.
from typing import Annotated, Any, Literal, Union

import attrs

from .ids import KEBAB_CASE, SESSION_ID_PATTERN

PROTOCOL_VERSION = 1


@attrs.frozen(kw_only=True)
class Rule:
    """A value rule on top of a JSON type; written into the schema as the same keywords.

    ``pattern`` is searched (not anchored), as JSON Schema's ``pattern`` is.
    """

    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    unique_items: bool = False  # a list holds no value twice
    description: str | None = None  # what the rule means, for error messages


@attrs.frozen(kw_only=True)
class Tagged:
    """Marks ``Annotated[Union[A, B, ...], Tagged(name=..., tag="kind")]``: a union of
    attrs classes told apart by the string literal field ``tag`` (each class has
    ``kind: Literal["its-kind"]``). The codec reads ``tag`` first and then the one class
    it names; the schema writes a named ``oneOf``; TypeScript gets a discriminated union."""

    name: str
    tag: str
    description: str | None = None


NON_BLANK = r"\S"

# Integers stop at 2^53 - 1: above it JavaScript (VS Code) can no longer hold them exactly.
MAX_SAFE_INTEGER = 2**53 - 1

PositiveInt = Annotated[int, Rule(minimum=1, maximum=MAX_SAFE_INTEGER, description="an integer from 1 to 2^53-1")]
NonNegativeInt = Annotated[int, Rule(minimum=0, maximum=MAX_SAFE_INTEGER, description="an integer from 0 to 2^53-1")]
Revision = Annotated[int, Rule(minimum=1, maximum=MAX_SAFE_INTEGER, description="a revision from 1 to 2^53-1")]
Seq = Annotated[int, Rule(minimum=0, maximum=MAX_SAFE_INTEGER, description="a log sequence number from 0 to 2^53-1")]
NonBlankText = Annotated[str, Rule(pattern=NON_BLANK, description="a non-blank string")]
SessionId = Annotated[
    str, Rule(pattern=SESSION_ID_PATTERN, description="a session id issued by the daemon (s-<26 base32>)")
]
AgentId = Annotated[str, Rule(pattern=NON_BLANK, description="a non-blank agent id")]
KebabCode = Annotated[str, Rule(pattern=KEBAB_CASE, description="a lowercase-kebab-case code")]
RFC3339_UTC = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"
Timestamp = Annotated[str, Rule(pattern=RFC3339_UTC, description="an RFC 3339 UTC timestamp")]

GoalPhase = Literal["active", "paused", "blocked", "complete"]
Activation = Literal["armed", "disarmed"]
GoalTone = Literal["none", "hint", "warning"]
# "raise" is no method: the client asks for the new budget(s), then sends dsh/goal/edit and
# dsh/goal/resume with the edit's ref (offered on a goal blocked for its spent budget).
GoalActionId = Literal["create", "edit", "raise", "pause", "resume", "complete", "block", "clear"]
PlanOutcome = Literal["committed", "queued", "cancelled", "noop"]
GoalChangeOp = Literal[
    "create", "edit", "pause", "resume", "complete", "block", "clear", "round", "usage", "arm", "disarm", "waiting"
]
QuestionKind = Literal["plan-review"]
SandboxMode = Literal["read-only", "workspace-write", "full-access"]
Mutability = Literal["read", "write", "exec"]
PermissionOutcome = Literal["allow-once", "allow-session", "reject"]
MutabilityList = Annotated[list[Mutability], Rule(unique_items=True, description="mutability classes, each at most once")]
DeltaKind = Literal["text", "tool-arguments", "retry"]
# What an agent does now, as a person reads it: "working" only while a turn runs and
# nothing waits for the person; "waiting" while a plan review or an approval is open.
ActivityKind = Literal["idle", "working", "waiting"]
OpenQuestionKind = Literal["plan-review", "approval"]
BusyActivityKind = Literal["working", "waiting"]  # an activity other than idle (a session list row's)

# ---- shared values --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class GoalRef:
    """The goal and revision a write read (G-3); a stale one is `stale-revision`."""

    id: NonBlankText
    revision: Revision


@attrs.frozen(kw_only=True)
class BlockedReason:
    """Why a goal is blocked (G-4)."""

    code: KebabCode
    message: NonBlankText


@attrs.frozen(kw_only=True)
class GoalStatus:
    """What a person reads about a goal, in the daemon's words; editors show it as it is."""

    text: NonBlankText  # the status line, no icon: "6/40 · 25.9k/100k tok · active"
    short: NonBlankText  # its last part: the phase, "waiting for you to resume", "blocked: <code>"
    tone: GoalTone  # hint: it waits for the person; warning: blocked
    usage: NonBlankText  # the budget in a sentence, for notices: "6 of 40 rounds used, 25.9k of 100k tokens"
    detail: list[str]  # the lines of a tooltip or a detail view (objective, state, rounds, tokens)


@attrs.frozen(kw_only=True)
class GoalAction:
    """One goal action the daemon accepts now (anything else is invalid-transition)."""

    id: GoalActionId  # the method is dsh/goal/<id> ("raise": edit, then resume)
    label: NonBlankText  # "Pause", "Edit the goal…" (an ellipsis: it asks for more)


@attrs.frozen(kw_only=True)
class GoalView:
    """The derived state of the session's goal, as editors show it: the state, and what
    people read about it (``status``, ``actions``), which editors render and never recompute."""

    id: NonBlankText
    revision: Revision
    objective: NonBlankText
    phase: GoalPhase
    max_rounds: PositiveInt
    rounds_started: NonNegativeInt
    rounds_left: NonNegativeInt
    # input + output tokens the model reported for the turns started as rounds of this goal
    tokens_used: NonNegativeInt
    created_at: Timestamp
    updated_at: Timestamp
    activation: Activation
    status: GoalStatus
    actions: list[GoalAction]  # in a fixed order: create edit raise pause resume complete block clear
    blocked_reason: BlockedReason | None = None  # present only while phase == "blocked"
    max_tokens: PositiveInt | None = None  # the token budget; absent: none
    # in process: a plan review or an approval of this agent is open (active goals only);
    # dsh/goal/changed op "waiting" whenever it appears or goes
    waiting_for: OpenQuestionKind | None = None
    # some of tokensUsed is an estimate (characters/4): the provider reported no usage;
    # status.text then writes the figure as ~12k
    tokens_estimated: bool | None = None  # only ever true when present


@attrs.frozen(kw_only=True)
class PlanState:
    """Plan mode as recorded (`active`) and the choice not yet appended (`pending`, PM-9)."""

    active: bool
    pending: bool | None = None


@attrs.frozen(kw_only=True)
class SessionEvent:
    """One committed log event, exactly as its line in `log.jsonl` (SPEC section 3)."""

    seq: PositiveInt
    type: NonBlankText
    at: Timestamp
    data: dict[str, Any]
    turn: PositiveInt | None = None


@attrs.frozen(kw_only=True)
class SessionRefusal:
    """Why a listed session cannot be opened: a link, or something other than a regular
    file or folder, where a session file or folder belongs (kind ``unsafe-path``)."""

    kind: Literal["unsafe-path"]
    path: NonBlankText  # the refused entry
    reason: NonBlankText  # e.g. "is a symbolic link"


@attrs.frozen(kw_only=True)
class SessionSummary:
    session_id: SessionId
    title: str | None  # nullable: null when the session was created without a title (at most 200 characters)
    updated_at: Timestamp
    goal: GoalView | None = None  # absent when the session has no goal
    refused: SessionRefusal | None = None  # present only when the session cannot be opened
    # what the session's live agent does, when one is loaded in this daemon (by any client)
    # and not idle; absent: idle, or not loaded here
    activity: BusyActivityKind | None = None
    question: OpenQuestionKind | None = None  # present only while activity is "waiting"


@attrs.frozen(kw_only=True)
class SessionHandle:
    """A session and the live agent that now holds it."""

    session_id: SessionId
    agent_id: AgentId


# ---- dsh/session/* ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionCreateParams:
    title: NonBlankText | None = None


@attrs.frozen(kw_only=True)
class SessionListParams:
    pass


@attrs.frozen(kw_only=True)
class SessionListResult:
    sessions: list[SessionSummary]


@attrs.frozen(kw_only=True)
class SessionOpenParams:
    session_id: SessionId
    reload: bool = False


@attrs.frozen(kw_only=True)
class SessionOpenResult:
    session_id: SessionId
    agent_id: AgentId
    plan: PlanState
    goal: GoalView | None  # nullable: null when the session has no goal
    activity: ActivityKind | None = None  # what the agent does now (dsh/agent/activity)
    question: OpenQuestionKind | None = None  # present only while activity is "waiting"


@attrs.frozen(kw_only=True)
class SessionForkParams:
    agent_id: AgentId
    at_seq: PositiveInt | None = None  # 1..last seq (seq 1 is session/start); absent: the last


@attrs.frozen(kw_only=True)
class AgentParams:
    """Params of every method that names only the agent."""

    agent_id: AgentId


@attrs.frozen(kw_only=True)
class SessionEventsParams:
    agent_id: AgentId
    after_seq: Seq | None = None  # absent: from the first event
    limit: PositiveInt | None = None  # absent: no limit


@attrs.frozen(kw_only=True)
class SessionEventsResult:
    events: list[SessionEvent]
    next_seq: NonNegativeInt  # pass as afterSeq to read on


# ---- dsh/agent/* --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AgentTextParams:
    agent_id: AgentId
    text: NonBlankText


@attrs.frozen(kw_only=True)
class PromptResult:
    """How the prompt ended: the turn's `turn/close` stopReason; or, for a command that
    opened no turn, turn null and stopReason "command"."""

    turn: PositiveInt | None  # nullable: null when no turn was opened
    stop_reason: NonBlankText


@attrs.frozen(kw_only=True)
class SteerResult:
    queued: bool


# ---- dsh/plan/* ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PlanSetParams:
    agent_id: AgentId
    active: bool


@attrs.frozen(kw_only=True)
class PlanSetResult:
    outcome: PlanOutcome
    state: PlanState


@attrs.frozen(kw_only=True)
class LineComment:
    line: PositiveInt  # 1-based line of the plan
    text: str


PlanRecordOutcome = Literal["approved", "revise", "failed", "pending"]


@attrs.frozen(kw_only=True)
class PlanRecord:
    """One plan presented in the session (P-21): the ``exit_plan_mode`` call's plan and the
    review it got. ``seq``/``at`` are the call's; ``title`` is the plan's first heading
    ("Plan" without one); ``outcome`` "pending": under review now, "failed": nothing was
    approved (the review could not happen)."""

    call_id: NonBlankText
    seq: PositiveInt
    title: NonBlankText
    markdown: NonBlankText
    outcome: PlanRecordOutcome
    feedback: str | None = None  # the person's words, as given
    comments: list[LineComment] | None = None  # line comments on this plan, as given
    at: Timestamp


@attrs.frozen(kw_only=True)
class PlanHistoryResult:
    plans: list[PlanRecord]  # oldest first


@attrs.frozen(kw_only=True)
class PlanReviewPrevious:
    """The plan presented before the one under review, when the person sent it back
    (P-23): what they asked for last time, to set beside the revised plan."""

    call_id: NonBlankText
    title: NonBlankText
    markdown: NonBlankText
    feedback: str | None = None
    comments: list[LineComment] | None = None


# ---- dsh/goal/* ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class GoalCreateParams:
    agent_id: AgentId
    objective: NonBlankText
    max_rounds: PositiveInt | None = None  # absent: the service default (256)
    max_tokens: PositiveInt | None = None  # absent: [goals] maxTokens (default: no budget)


@attrs.frozen(kw_only=True)
class GoalEditParams:
    """At least one of objective, maxRounds and maxTokens (G-6)."""

    __dsh_any_of__ = ("objective", "max_rounds", "max_tokens")

    agent_id: AgentId
    ref: GoalRef
    objective: NonBlankText | None = None
    max_rounds: PositiveInt | None = None
    max_tokens: PositiveInt | None = None


@attrs.frozen(kw_only=True)
class GoalRefParams:
    """Params of pause, resume, complete and clear."""

    agent_id: AgentId
    ref: GoalRef


@attrs.frozen(kw_only=True)
class GoalBlockParams:
    agent_id: AgentId
    ref: GoalRef
    reason: BlockedReason


@attrs.frozen(kw_only=True)
class GoalClearResult:
    ref: GoalRef  # revision: the cleared revision + 1


@attrs.frozen(kw_only=True)
class GoalRoundTokens:
    """Tokens a round's model replies reported; ``cached_input`` is the part of ``input``
    the provider read from its prompt cache (0 when it said nothing of a cache)."""

    input: NonNegativeInt
    cached_input: NonNegativeInt
    output: NonNegativeInt


@attrs.frozen(kw_only=True)
class GoalRoundRecord:
    """One round of the current goal, folded from the log (G-22)."""

    round: PositiveInt
    revision: Revision  # the goal's revision the round started under
    turn: PositiveInt  # the turn the round ran in
    started_at: Timestamp
    tokens: GoalRoundTokens
    tool_calls: NonNegativeInt
    waited_ms: NonNegativeInt  # time the round waited for a person (plan reviews, approvals)
    outcome: NonBlankText  # the turn's stopReason ("end-turn", "cancelled", "model-error", ...) or "running"
    ended_at: Timestamp | None = None  # absent while the round runs
    estimated: bool | None = None  # true when some of the tokens are estimates (characters/4); else absent


@attrs.frozen(kw_only=True)
class GoalRoundsResult:
    goal_id: NonBlankText | None  # null: no current goal (none yet, or cleared)
    rounds: list[GoalRoundRecord]  # oldest first


# ---- dsh/permission/* ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PermissionPolicy:
    """An agent's live policy: how commands are sandboxed and which classes need a yes."""

    sandbox: SandboxMode
    network: bool
    approve: MutabilityList


@attrs.frozen(kw_only=True)
class PermissionSetParams:
    agent_id: AgentId
    sandbox: SandboxMode | None = None
    approve: MutabilityList | None = None


# ---- dsh/chat/* -----------------------------------------------------------------------
# Chat items: the conversation as every client renders it (docs/protocol.md "Chat").
# Mirrors dshd.api.chat (the projection that makes them); tests check every fixture item
# against these types.


@attrs.frozen(kw_only=True)
class ChatForkedFrom:
    session_id: str
    seq: NonNegativeInt


@attrs.frozen(kw_only=True)
class ChatGoalRound:
    goal_id: str
    round: NonNegativeInt
    max_rounds: PositiveInt | None = None  # absent when the log held no snapshot of that goal


@attrs.frozen(kw_only=True)
class ChatUsage:
    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cached_input_tokens: NonNegativeInt | None = None  # the part of inputTokens read from a prompt cache
    estimated: bool | None = None  # only ever true when present: characters/4, the provider reported none


@attrs.frozen(kw_only=True)
class ChatTurnError:
    kind: str  # auth, rate-limit, connection, timeout, bad-request, context-overflow, server, bad-response, output-limit
    message: str


@attrs.frozen(kw_only=True)
class ChatBlockedReason:
    code: str
    message: str


@attrs.frozen(kw_only=True)
class SessionChatItem:
    """The session's first event: its title, and where it was forked from."""

    id: NonBlankText
    kind: Literal["session"]
    seq: PositiveInt
    at: Timestamp
    session_id: str
    title: str | None = None
    forked_from: ChatForkedFrom | None = None
    text: str


@attrs.frozen(kw_only=True)
class UserMessageChatItem:
    """What the model was told by a person (sender "person"), a plugin ("plugin"), or a
    goal round ("goal"); ``label`` names the sender in words ("You", "Goal round 3 of 40")."""

    id: NonBlankText
    kind: Literal["user-message"]
    seq: PositiveInt
    at: Timestamp
    turn: PositiveInt | None = None
    text: str
    sender: Literal["person", "plugin", "goal"]
    label: str
    plugin: str | None = None
    goal_round: ChatGoalRound | None = None
    # the checkpoint "Rewind to here" restores: the first one taken after this message in
    # its turn (absent until then, and when no step of it could change files)
    checkpoint: PositiveInt | None = None
    from_client: str | None = None  # another client did this: its name (absent: the receiving client, or nobody)


@attrs.frozen(kw_only=True)
class AssistantMessageChatItem:
    """The model's text. ``partial``: still streaming (no seq yet); the committed one
    replaces it under the same id. ``discarded``: it streamed, but the turn ended before
    it was committed, so the log does not hold it."""

    id: NonBlankText
    kind: Literal["assistant-message"]
    turn: PositiveInt | None = None
    step: PositiveInt | None = None
    seq: PositiveInt | None = None
    at: Timestamp | None = None
    text: str
    partial: bool
    discarded: bool | None = None  # only ever true
    usage: ChatUsage | None = None


@attrs.frozen(kw_only=True)
class ToolCallChatItem:
    """A tool call, its arguments and, once it ran, its result. ``title`` says what it
    does in words ("Read src/a.py"). While ``partial``, ``argumentsText`` holds the JSON
    arguments received so far and ``arguments`` is absent. ``status`` ``waiting``: its
    approval is open, nothing runs until the person decides (then ``running``, or
    ``failed`` when refused)."""

    id: NonBlankText
    kind: Literal["tool-call"]
    turn: PositiveInt | None = None
    step: PositiveInt | None = None
    seq: PositiveInt | None = None
    at: Timestamp | None = None
    call_id: str
    name: str
    title: str
    arguments: dict[str, Any] | None = None
    arguments_text: str | None = None
    status: Literal["running", "waiting", "ok", "failed"]
    result: str | None = None
    partial: bool
    discarded: bool | None = None  # only ever true
    checkpoint: PositiveInt | None = None  # the checkpoint taken before its step ran ("Rewind to here")


@attrs.frozen(kw_only=True)
class PlanReviewChatItem:
    """An ``exit_plan_mode`` call: the plan and the person's verdict. ``questionId`` is
    the id of the ``dsh/questions/ask`` question that reviews it (answer there);
    ``previousId`` is the item of the plan before it, to compare."""

    id: NonBlankText
    kind: Literal["plan-review"]
    turn: PositiveInt | None = None
    step: PositiveInt | None = None
    seq: PositiveInt | None = None
    at: Timestamp | None = None
    call_id: str
    question_id: str
    title: str
    plan: str
    outcome: Literal["pending", "approved", "sent-back", "not-reviewed"]
    outcome_text: str
    feedback: str | None = None  # sent-back: the person's feedback and line comments
    detail: str | None = None  # not-reviewed: why
    previous_id: str | None = None
    partial: bool
    discarded: bool | None = None  # only ever true
    from_client: str | None = None  # another client did this: its name (absent: the receiving client, or nobody)


@attrs.frozen(kw_only=True)
class PermissionChatItem:
    """A person's (or a policy's) answer to a tool call that needed permission."""

    id: NonBlankText
    kind: Literal["permission"]
    seq: PositiveInt
    at: Timestamp
    turn: PositiveInt | None = None
    call_id: str
    tool: str
    outcome: str  # allow-once, allow-session, reject
    by: str | None = None
    feedback: str | None = None
    tool_item_id: str | None = None  # the tool-call item it answers
    text: str
    from_client: str | None = None  # another client did this: its name (absent: the receiving client, or nobody)


@attrs.frozen(kw_only=True)
class GoalChatItem:
    """A durable goal change; after ``clear`` only ``goalId`` and ``revision`` (the
    cleared one) are left. ``text`` has no revision; ``revision`` is for detail views."""

    id: NonBlankText
    kind: Literal["goal"]
    seq: PositiveInt
    at: Timestamp
    turn: PositiveInt | None = None
    op: Literal["create", "edit", "pause", "resume", "complete", "block", "clear"]
    goal_id: str
    revision: NonNegativeInt
    objective: str | None = None
    phase: GoalPhase | None = None
    rounds_used: NonNegativeInt | None = None
    max_rounds: PositiveInt | None = None
    tokens_used: NonNegativeInt | None = None
    max_tokens: PositiveInt | None = None
    blocked_reason: ChatBlockedReason | None = None
    text: str
    from_client: str | None = None  # another client did this: its name (absent: the receiving client, or nobody)


@attrs.frozen(kw_only=True)
class PlanModeChatItem:
    id: NonBlankText
    kind: Literal["plan-mode"]
    seq: PositiveInt
    at: Timestamp
    turn: PositiveInt | None = None
    active: bool
    text: str


@attrs.frozen(kw_only=True)
class TurnEndChatItem:
    """The end of a turn, its stop reason in words; a model error with its kind."""

    id: NonBlankText
    kind: Literal["turn-end"]
    seq: PositiveInt
    at: Timestamp
    turn: NonNegativeInt
    stop_reason: str
    error: ChatTurnError | None = None
    text: str
    from_client: str | None = None  # another client did this: its name (absent: the receiving client, or nobody)


@attrs.frozen(kw_only=True)
class CompactionChatItem:
    """The context was compacted: the model now sees ``summary`` instead of the events up
    to ``throughSeq``."""

    id: NonBlankText
    kind: Literal["compaction"]
    seq: PositiveInt
    at: Timestamp
    turn: PositiveInt | None = None
    summary: str
    through_seq: NonNegativeInt
    tokens_before: NonNegativeInt
    tokens_after: NonNegativeInt
    text: str


@attrs.frozen(kw_only=True)
class RetryChatItem:
    """A model call failed and is tried again (live only: never in the log)."""

    id: NonBlankText
    kind: Literal["retry"]
    turn: PositiveInt
    step: PositiveInt
    attempt: PositiveInt | None = None
    delay_ms: NonNegativeInt | None = None
    text: str


@attrs.frozen(kw_only=True)
class NoticeChatItem:
    """dshd's word to the person, derived from the log. ``code`` "written-tool-call" is a
    reply that looks like a call of ``tool`` written as text (a JSON object naming one of
    the offered tools): the model made no call and nothing ran; it is about the item before
    it (``about``) and has no seq: it goes with that item. ``code`` "mcp-server-failed":
    the MCP server ``server`` failed to start, died or stopped answering, and its tools are
    gone for this session; it has the seq of its ``mcp/server`` event and no ``about``."""

    id: NonBlankText
    kind: Literal["notice"]
    turn: PositiveInt | None = None
    seq: PositiveInt | None = None
    at: Timestamp | None = None
    about: NonBlankText | None = None
    code: Literal["written-tool-call", "mcp-server-failed"]
    tool: str | None = None
    server: str | None = None
    text: str


ChatItem = Annotated[
    Union[
        SessionChatItem,
        UserMessageChatItem,
        AssistantMessageChatItem,
        ToolCallChatItem,
        PlanReviewChatItem,
        PermissionChatItem,
        GoalChatItem,
        PlanModeChatItem,
        TurnEndChatItem,
        CompactionChatItem,
        RetryChatItem,
        NoticeChatItem,
    ],
    Tagged(name="ChatItem", tag="kind", description="One item of the conversation; `kind` says which."),
]


@attrs.frozen(kw_only=True)
class ChatGetParams:
    agent_id: AgentId
    after_seq: Seq | None = None  # absent: from the first item
    # The last `limit` items whose seq is below it instead (not with afterSeq): above the
    # last seq (2^53-1), the newest page; the first item's seq of a page, the page before it.
    before_seq: Seq | None = None
    limit: PositiveInt | None = None  # absent: no limit


@attrs.frozen(kw_only=True)
class ChatGetResult:
    items: list[ChatItem]
    next_seq: NonNegativeInt  # pass as afterSeq to read on


@attrs.frozen(kw_only=True)
class ChatItemParams:
    agent_id: AgentId
    session_id: SessionId
    item: ChatItem


# ---- dsh/checkpoint/* -----------------------------------------------------------------

CheckpointFileStatus = Literal["added", "modified", "deleted"]


@attrs.frozen(kw_only=True)
class CheckpointInfo:
    """A snapshot of the workspace's files taken before a step whose tool calls could change
    them. ``seq`` is its ``checkpoint/taken`` event's; ``files`` the paths that step
    changed (at most 200)."""

    seq: PositiveInt
    turn: PositiveInt
    step: PositiveInt
    at: Timestamp
    files: list[str]


@attrs.frozen(kw_only=True)
class CheckpointListResult:
    checkpoints: list[CheckpointInfo]  # oldest first


@attrs.frozen(kw_only=True)
class CheckpointDiffParams:
    agent_id: AgentId
    seq: PositiveInt  # a checkpoint's seq (dsh/checkpoint/list, a chat item's checkpoint)


@attrs.frozen(kw_only=True)
class CheckpointFileRestore:
    """One file a rewind would change, now -> as it was at the checkpoint. ``diff``: a
    unified diff (absent for a binary file or one too large to show);
    ``changedByPerson``: the file changed outside the agent's steps since, so rewinding it
    needs ``force``."""

    path: NonBlankText
    status: CheckpointFileStatus  # what the rewind does to the file
    diff: str | None = None
    binary: bool
    changed_by_person: bool


@attrs.frozen(kw_only=True)
class CheckpointDiffResult:
    files: list[CheckpointFileRestore]


@attrs.frozen(kw_only=True)
class CheckpointRestoreParams:
    """At least one of files and conversation is true."""

    agent_id: AgentId
    seq: PositiveInt
    files: bool = True  # put the files back as they were at the checkpoint
    conversation: bool = False  # also fork the conversation before that step's reply
    force: bool = False  # also overwrite files the person changed since


@attrs.frozen(kw_only=True)
class CheckpointRestoreResult:
    restored: list[str]
    forced: list[str]  # the restored files the person had changed (force)
    agent: SessionHandle | None = None  # the fork, with conversation: true (as dsh/session/fork answers)


# ---- dsh/config/* -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConfigGetParams:
    pass


@attrs.frozen(kw_only=True)
class IgnoredConfigKey:
    """A key a config file set that is not in force, and why."""

    file: NonBlankText  # the file's path, or "initializationOptions.config"
    key: NonBlankText  # dotted: "model.baseUrl"
    why: NonBlankText


@attrs.frozen(kw_only=True)
class ConfigGetResult:
    """The configuration in force (the files' shape: tables of camelCase keys), the keys
    that were left out, and whether the workspace is trusted. Never a secret: config
    names the environment variable that holds an API key, never the key."""

    effective: dict[str, Any]
    ignored: list[IgnoredConfigKey]
    trusted: bool


# ---- server -> client ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PermissionAskParams:
    """A tool call waits for the person's yes (its class is in the approve list)."""

    agent_id: AgentId
    session_id: SessionId
    call_id: NonBlankText
    tool: NonBlankText
    mutability: Mutability
    title: NonBlankText
    diff: str | None = None  # unified diff of an edit or a write
    command: str | None = None  # the command line of a run
    cwd: str | None = None  # the folder a command runs in (absolute)


@attrs.frozen(kw_only=True)
class PermissionAskResult:
    outcome: PermissionOutcome
    feedback: str | None = None  # what the person wants instead (passed to the model)


@attrs.frozen(kw_only=True)
class PlanReviewQuestion:
    id: NonBlankText
    kind: QuestionKind
    title: NonBlankText
    plan: NonBlankText  # the markdown plan
    choices: Annotated[list[NonBlankText], Rule(min_items=1, description="at least one choice")]
    previous: PlanReviewPrevious | None = None  # absent: the plan before was not sent back


@attrs.frozen(kw_only=True)
class QuestionsAskParams:
    agent_id: AgentId
    session_id: SessionId
    questions: Annotated[list[PlanReviewQuestion], Rule(min_items=1, description="at least one question")]


@attrs.frozen(kw_only=True)
class Answer:
    id: NonBlankText
    # A string, not an enum: an unknown choice is a reply the agent answers with
    # corrective feedback (PM-19), not a malformed message.
    choice: str
    feedback: str | None = None
    comments: list[LineComment] | None = None


@attrs.frozen(kw_only=True)
class QuestionsAskResult:
    answers: list[Answer]


@attrs.frozen(kw_only=True)
class GoalChangedParams:
    agent_id: AgentId
    session_id: SessionId
    op: GoalChangeOp
    revision: Revision
    goal: GoalView | None = None  # absent after "clear"


@attrs.frozen(kw_only=True)
class PlanChangedParams:
    agent_id: AgentId
    session_id: SessionId
    active: bool
    pending: bool | None = None


@attrs.frozen(kw_only=True)
class SessionEventParams:
    agent_id: AgentId
    session_id: SessionId
    event: SessionEvent


@attrs.frozen(kw_only=True)
class AgentDeltaParams:
    """A live piece of a model call, never durable: ``text`` (a piece of the reply),
    ``tool-arguments`` (a piece of a tool call's JSON arguments; callId and name say which
    call), ``retry`` (the call failed before any output and is tried again: attempt is the
    attempt about to start, delayMs the wait before it). The turn's ``assistant/message``
    and ``tool/call`` events, which follow, are the truth."""

    agent_id: AgentId
    session_id: SessionId
    turn: PositiveInt
    step: PositiveInt
    kind: DeltaKind
    text: str | None = None
    call_id: NonBlankText | None = None
    name: NonBlankText | None = None
    attempt: PositiveInt | None = None
    delay_ms: NonNegativeInt | None = None


@attrs.frozen(kw_only=True)
class AgentActivityParams:
    """The agent's activity changed: ``idle`` (no turn runs), ``working`` (a turn runs: a
    model request, a command, a tool; nothing waits for the person), ``waiting`` (a turn
    waits for the person: ``question`` says whether a plan review or an approval)."""

    agent_id: AgentId
    session_id: SessionId
    activity: ActivityKind
    question: OpenQuestionKind | None = None


# ---- several clients on one session ----------------------------------------------------

ResolvedQuestionKind = Literal["plan-review", "permission"]
# The winning answer's choice: a plan review's, or a permission's outcome.
QuestionOutcome = Literal["approve", "revise", "allow-once", "allow-session", "reject"]


@attrs.frozen(kw_only=True)
class AttachedClient:
    client_id: NonBlankText  # the daemon's id of the connection, e.g. "c-3"
    client_name: NonBlankText  # initialize's clientInfo.name, else "client <n>"
    you: bool  # true in the list sent to that connection itself


@attrs.frozen(kw_only=True)
class SessionClientsParams:
    """The connections attached to this live session changed (one attached or left): the
    whole list, sent to every attached connection."""

    agent_id: AgentId
    session_id: SessionId
    clients: Annotated[list[AttachedClient], Rule(min_items=1, description="at least the receiver")]


@attrs.frozen(kw_only=True)
class QuestionAnswerer:
    client_name: NonBlankText


@attrs.frozen(kw_only=True)
class QuestionResolvedParams:
    """A plan review or an approval was answered (by any attached client): every attached
    client closes its window for it. ``questionId`` is the plan question's ``id``, or the
    permission's ``callId``; an answer sent after this changes nothing."""

    agent_id: AgentId
    session_id: SessionId
    question_id: NonBlankText
    kind: ResolvedQuestionKind
    outcome: QuestionOutcome
    by: QuestionAnswerer


# ---- initialize -----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DshInitializationOptions:
    """`initialize` params `initializationOptions`. Strict, like params: an unknown option
    is invalid-params naming it."""

    config: dict[str, Any] | None = None  # the editor's settings, shape of config.toml
    question_timeout_ms: PositiveInt | None = None  # how long a person may take to answer
    trusted: bool = False  # the editor trusts the workspace: its config may set guarded keys


# ---- capabilities -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DshClientCapabilities:
    """`initialize` params `capabilities.experimental.dsh`. Open: unknown keys are ignored,
    as LSP capabilities are (a newer client must still start an older daemon)."""

    __dsh_open__ = True

    questions: bool = False  # true: the client answers dsh/questions/ask
    permissions: bool = False  # true: the client answers dsh/permission/ask
    # true: a headless run (dshd run): nobody is at it, so alone on a session its questions
    # are refused in words saying so and a plan review disarms the goal (not its name)
    headless: bool = False


@attrs.frozen(kw_only=True)
class DshServerCapabilities:
    """`initialize` result `capabilities.experimental.dsh`. Open, like the client's."""

    __dsh_open__ = True

    version: PositiveInt  # the protocol version, PROTOCOL_VERSION
    questions: bool = False  # true: the daemon may send dsh/questions/ask
    permissions: bool = False  # true: the daemon may send dsh/permission/ask


# ---- the method table -----------------------------------------------------------------

MethodKind = Literal["request", "notification", "server-request"]


@attrs.frozen(kw_only=True)
class MethodSpec:
    """One method: who sends it, and the types of its params and result.

    ``result`` is a type expression (a class, ``X | None``) for requests; ``None``
    means the result is JSON ``null`` for a request, and no response for a
    notification.
    """

    kind: MethodKind
    params: type
    result: Any = None


SESSION_CREATE = "dsh/session/create"
SESSION_LIST = "dsh/session/list"
SESSION_OPEN = "dsh/session/open"
SESSION_FORK = "dsh/session/fork"
SESSION_CLOSE = "dsh/session/close"
SESSION_EVENTS = "dsh/session/events"
AGENT_PROMPT = "dsh/agent/prompt"
AGENT_STEER = "dsh/agent/steer"
AGENT_CANCEL = "dsh/agent/cancel"
PLAN_SET = "dsh/plan/set"
PLAN_GET = "dsh/plan/get"
PLAN_HISTORY = "dsh/plan/history"
GOAL_GET = "dsh/goal/get"
GOAL_CREATE = "dsh/goal/create"
GOAL_EDIT = "dsh/goal/edit"
GOAL_PAUSE = "dsh/goal/pause"
GOAL_RESUME = "dsh/goal/resume"
GOAL_COMPLETE = "dsh/goal/complete"
GOAL_BLOCK = "dsh/goal/block"
GOAL_CLEAR = "dsh/goal/clear"
GOAL_DISARM = "dsh/goal/disarm"
GOAL_ROUNDS = "dsh/goal/rounds"
QUESTIONS_ASK = "dsh/questions/ask"
PERMISSION_GET = "dsh/permission/get"
PERMISSION_SET = "dsh/permission/set"
PERMISSION_ASK = "dsh/permission/ask"
CONFIG_GET = "dsh/config/get"
GOAL_CHANGED = "dsh/goal/changed"
PLAN_CHANGED = "dsh/plan/changed"
SESSION_EVENT = "dsh/session/event"
CHAT_GET = "dsh/chat/get"
CHAT_ITEM = "dsh/chat/item"
AGENT_DELTA = "dsh/agent/delta"
AGENT_ACTIVITY = "dsh/agent/activity"
SESSION_CLIENTS = "dsh/session/clients"
QUESTION_RESOLVED = "dsh/question/resolved"
CHECKPOINT_LIST = "dsh/checkpoint/list"
CHECKPOINT_DIFF = "dsh/checkpoint/diff"
CHECKPOINT_RESTORE = "dsh/checkpoint/restore"

OptionalGoalView = Union[GoalView, None]

METHODS: dict[str, MethodSpec] = {
    SESSION_CREATE: MethodSpec(kind="request", params=SessionCreateParams, result=SessionHandle),
    SESSION_LIST: MethodSpec(kind="request", params=SessionListParams, result=SessionListResult),
    SESSION_OPEN: MethodSpec(kind="request", params=SessionOpenParams, result=SessionOpenResult),
    SESSION_FORK: MethodSpec(kind="request", params=SessionForkParams, result=SessionHandle),
    SESSION_CLOSE: MethodSpec(kind="request", params=AgentParams, result=None),
    SESSION_EVENTS: MethodSpec(kind="request", params=SessionEventsParams, result=SessionEventsResult),
    AGENT_PROMPT: MethodSpec(kind="request", params=AgentTextParams, result=PromptResult),
    AGENT_STEER: MethodSpec(kind="request", params=AgentTextParams, result=SteerResult),
    AGENT_CANCEL: MethodSpec(kind="request", params=AgentParams, result=None),
    PLAN_SET: MethodSpec(kind="request", params=PlanSetParams, result=PlanSetResult),
    PLAN_GET: MethodSpec(kind="request", params=AgentParams, result=PlanState),
    PLAN_HISTORY: MethodSpec(kind="request", params=AgentParams, result=PlanHistoryResult),
    GOAL_GET: MethodSpec(kind="request", params=AgentParams, result=OptionalGoalView),
    GOAL_CREATE: MethodSpec(kind="request", params=GoalCreateParams, result=GoalView),
    GOAL_EDIT: MethodSpec(kind="request", params=GoalEditParams, result=GoalView),
    GOAL_PAUSE: MethodSpec(kind="request", params=GoalRefParams, result=GoalView),
    GOAL_RESUME: MethodSpec(kind="request", params=GoalRefParams, result=GoalView),
    GOAL_COMPLETE: MethodSpec(kind="request", params=GoalRefParams, result=GoalView),
    GOAL_BLOCK: MethodSpec(kind="request", params=GoalBlockParams, result=GoalView),
    GOAL_CLEAR: MethodSpec(kind="request", params=GoalRefParams, result=GoalClearResult),
    GOAL_DISARM: MethodSpec(kind="request", params=AgentParams, result=OptionalGoalView),
    GOAL_ROUNDS: MethodSpec(kind="request", params=AgentParams, result=GoalRoundsResult),
    PERMISSION_GET: MethodSpec(kind="request", params=AgentParams, result=PermissionPolicy),
    PERMISSION_SET: MethodSpec(kind="request", params=PermissionSetParams, result=PermissionPolicy),
    CONFIG_GET: MethodSpec(kind="request", params=ConfigGetParams, result=ConfigGetResult),
    QUESTIONS_ASK: MethodSpec(kind="server-request", params=QuestionsAskParams, result=QuestionsAskResult),
    PERMISSION_ASK: MethodSpec(kind="server-request", params=PermissionAskParams, result=PermissionAskResult),
    GOAL_CHANGED: MethodSpec(kind="notification", params=GoalChangedParams),
    PLAN_CHANGED: MethodSpec(kind="notification", params=PlanChangedParams),
    SESSION_EVENT: MethodSpec(kind="notification", params=SessionEventParams),
    CHAT_GET: MethodSpec(kind="request", params=ChatGetParams, result=ChatGetResult),
    CHAT_ITEM: MethodSpec(kind="notification", params=ChatItemParams),
    AGENT_DELTA: MethodSpec(kind="notification", params=AgentDeltaParams),
    AGENT_ACTIVITY: MethodSpec(kind="notification", params=AgentActivityParams),
    SESSION_CLIENTS: MethodSpec(kind="notification", params=SessionClientsParams),
    QUESTION_RESOLVED: MethodSpec(kind="notification", params=QuestionResolvedParams),
    CHECKPOINT_LIST: MethodSpec(kind="request", params=AgentParams, result=CheckpointListResult),
    CHECKPOINT_DIFF: MethodSpec(kind="request", params=CheckpointDiffParams, result=CheckpointDiffResult),
    CHECKPOINT_RESTORE: MethodSpec(kind="request", params=CheckpointRestoreParams, result=CheckpointRestoreResult),
}

# Named types with no method of their own that the schema still describes.
EXTRA_SCHEMA_TYPES: tuple[type, ...] = (DshClientCapabilities, DshServerCapabilities, DshInitializationOptions)
