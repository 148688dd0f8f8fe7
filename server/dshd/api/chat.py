"""Chat items: the one conversation model every client renders.

A pure projection of a session's committed events (as the log writes them: plain dicts
``{seq, type, at, turn?, data}``) and the live deltas of its model calls into a flat,
ordered list of items, each with a stable ``id`` and the words a renderer shows, so no
client re-derives text from raw events (the way Cline's webview renders one flat
message list, streaming being ``partial`` on the same item).

Ids come from the log alone (seq, turn, step, callId), so projecting the same log again,
in another process or after a reload, gives the same ids; a streaming item gets the id
its durable event will have, and the durable one replaces it (``partial: false``).

Kinds: ``session``, ``user-message``, ``assistant-message``, ``tool-call``,
``plan-review``, ``permission``, ``goal``, ``plan-mode``, ``turn-end``, ``compaction``,
``retry``, ``notice``. Event types this module does not know project to nothing; a malformed known
event projects with what it has, never an exception.

Items are plain core values: frozen msgspec structs with snake_case names and no wire
name. A front door converts them (the LSP door's ``dshd.daemon.to_wire.chat_item`` gives
the JSON the ``dsh/chat/*`` methods send). This module knows no wire package (layer 5,
shared by both doors).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from typing import Any, Literal, Union

import msgspec
from msgspec import Struct

from dshd.agent.deltas import AgentDelta
from dshd.agent.tools import ToolCatalogue
from dshd.api import words
from dshd.api.escape import shown, shown_lines
from dshd.api.written_calls import notice_text, written_tool_call
from dshd.plugins import known_tools
from dshd.plugins import plan as plan_plugin


class _Value(Struct, omit_defaults=True, frozen=True, kw_only=True, gc=False):
    # gc=False: items are immutable trees (no cycles), so the collector need not walk the
    # hundreds of thousands a long session holds (its pauses would stall the event loop).
    pass


class _Item(_Value, tag_field="kind", kw_only=True):
    id: str

    @property
    def kind(self) -> str:
        return self.__struct_config__.tag  # type: ignore[return-value]


class ForkedFrom(_Value, kw_only=True):
    session_id: str
    seq: int


class GoalRoundInfo(_Value, kw_only=True):
    goal_id: str
    round: int
    max_rounds: int | None = None


class Usage(_Value, kw_only=True):
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None  # the part of input_tokens read from a prompt cache
    estimated: bool = False  # characters/4: the provider reported no usage


class Reason(_Value, kw_only=True):
    code: str
    message: str


class TurnError(_Value, kw_only=True):
    kind: str
    message: str


class _Committed(_Item, kw_only=True):
    """An item made from one committed event: its seq, time and turn come first."""

    seq: int
    at: str
    turn: int | None = None


class SessionItem(_Item, tag="session", kw_only=True):
    seq: int
    at: str
    session_id: str
    title: str | None = None
    forked_from: ForkedFrom | None = None
    text: str


class UserMessageItem(_Committed, tag="user-message", kw_only=True):
    text: str
    sender: Literal["person", "plugin", "goal"]
    label: str
    plugin: str | None = None
    goal_round: GoalRoundInfo | None = None
    checkpoint: int | None = None  # the first checkpoint taken after it in its turn (rewind to here)
    from_client: str | None = None  # another client did it (its name); absent: this client, or nobody


class _Streamed(_Item, kw_only=True):
    """An item that may stream before its event commits: no seq or time until then."""

    turn: int | None = None
    step: int | None = None
    seq: int | None = None
    at: str | None = None


class AssistantMessageItem(_Streamed, tag="assistant-message", kw_only=True):
    text: str
    partial: bool
    discarded: bool = False
    usage: Usage | None = None


ToolStatus = Literal["running", "waiting", "ok", "failed"]  # waiting: for the person's approval


class ToolCallItem(_Streamed, tag="tool-call", kw_only=True):
    call_id: str
    name: str
    title: str
    arguments: dict[str, Any] | None = None
    arguments_text: str | None = None
    status: ToolStatus
    result: str | None = None
    partial: bool
    discarded: bool = False
    checkpoint: int | None = None  # the checkpoint taken before its step ran (rewind to here)


PlanOutcome = Literal["pending", "approved", "sent-back", "not-reviewed"]


class PlanReviewItem(_Streamed, tag="plan-review", kw_only=True):
    call_id: str
    question_id: str
    title: str
    plan: str
    outcome: PlanOutcome
    outcome_text: str
    feedback: str | None = None
    detail: str | None = None
    previous_id: str | None = None
    partial: bool
    discarded: bool = False
    from_client: str | None = None  # another client did it (its name); absent: this client, or nobody


class PermissionItem(_Committed, tag="permission", kw_only=True):
    call_id: str
    tool: str
    outcome: str
    by: str | None = None
    feedback: str | None = None
    tool_item_id: str | None = None
    text: str
    from_client: str | None = None  # another client did it (its name); absent: this client, or nobody


class GoalItem(_Committed, tag="goal", kw_only=True):
    op: str
    goal_id: str
    revision: int
    objective: str | None = None
    phase: str | None = None
    rounds_used: int | None = None
    max_rounds: int | None = None
    tokens_used: int | None = None
    max_tokens: int | None = None
    blocked_reason: Reason | None = None
    text: str
    from_client: str | None = None  # another client did it (its name); absent: this client, or nobody


class PlanModeItem(_Committed, tag="plan-mode", kw_only=True):
    active: bool
    text: str


class TurnEndItem(_Item, tag="turn-end", kw_only=True):
    seq: int
    at: str
    turn: int
    stop_reason: str
    error: TurnError | None = None
    text: str
    from_client: str | None = None  # another client did it (its name); absent: this client, or nobody


class CompactionItem(_Committed, tag="compaction", kw_only=True):
    summary: str
    through_seq: int
    tokens_before: int
    tokens_after: int
    text: str


class RetryItem(_Item, tag="retry", kw_only=True):
    turn: int
    step: int
    attempt: int | None = None
    delay_ms: int | None = None
    text: str


class NoticeItem(_Item, tag="notice", kw_only=True):
    """dshd's word to the person, derived from the log (so the same after a reload):
    ``code`` "written-tool-call", a reply that looks like a call of ``tool`` written as
    text (dshd.api.written_calls): about the item before it, no seq, it goes with that
    item; ``code`` "mcp-server-failed", the MCP ``server`` failed to start, died or hung
    (an ``mcp/server`` event: its seq, about no item)."""

    turn: int | None = None
    seq: int | None = None
    at: str | None = None
    about: str | None = None  # the id of the item it is about
    code: Literal["written-tool-call", "mcp-server-failed"]
    tool: str | None = None
    server: str | None = None
    text: str


ChatItem = Union[
    SessionItem,
    UserMessageItem,
    AssistantMessageItem,
    ToolCallItem,
    PlanReviewItem,
    PermissionItem,
    GoalItem,
    PlanModeItem,
    TurnEndItem,
    CompactionItem,
    RetryItem,
    NoticeItem,
]

KINDS: tuple[str, ...] = tuple(cls.__struct_config__.tag for cls in ChatItem.__args__)  # type: ignore[attr-defined]

# Permission decisions no one was asked for: the approve list did not name the tool's
# class ("policy"), or the person had allowed it for the session ("session").
AUTOMATIC_DECISIONS = ("policy", "session")
# Who wrote a note dshd itself added to the conversation (source "plugin"), as people read it.
PLUGIN_LABELS = {"plan": "Plan mode"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def partial_json_string(text: str, key: str) -> str | None:
    """The value of string ``key`` in the JSON object ``text`` that is still arriving
    (``{"plan": "# Pl`` -> ``# Pl``), or None when it has not started yet."""
    marker = f'"{key}"'
    start = text.find(marker)
    if start < 0:
        return None
    i = start + len(marker)
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i >= len(text) or text[i] != ":":
        return None
    i += 1
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i >= len(text) or text[i] != '"':
        return None
    i += 1
    end = i
    while end < len(text) and text[end] != '"':
        end += 2 if text[end] == "\\" else 1
    body = text[i:min(end, len(text))]
    # Decode what is complete; an escape cut in half waits for the next piece.
    for cut in range(len(body), max(len(body) - 6, -1), -1):
        try:
            return json.loads('"' + body[:cut] + '"')
        except ValueError:
            continue
    return ""


def _partial_arguments(text: str) -> dict[str, Any]:
    """What can be read of tool arguments still arriving: the whole object once it parses,
    else the string fields a title needs."""
    try:
        value = json.loads(text)
    except ValueError:
        pass
    else:
        return value if isinstance(value, dict) else {}
    found = {key: partial_json_string(text, key) for key in ("path", "command", "pattern", "code")}
    return {key: value for key, value in found.items() if value}


_REVIEW_OUTCOMES = {"approved": "approved", "revise": "sent-back", "failed": "not-reviewed"}


def _review_outcome(ok: bool, content: str, review: Any, plan: str) -> tuple[str, str | None, str | None]:
    """(outcome, feedback, detail) of an ``exit_plan_mode`` result: from its ``review``
    data (P-20), the feedback shown as the model was given it (each line comment beside
    its plan line); ``content`` is the already escaped result text."""
    if isinstance(review, dict) and review.get("outcome") in _REVIEW_OUTCOMES:
        outcome = _REVIEW_OUTCOMES[review["outcome"]]
        if outcome == "approved":
            return outcome, None, None
        if outcome == "not-reviewed":
            return outcome, None, content
        comments = [
            c
            for c in review.get("comments") or []
            if isinstance(c, dict) and type(c.get("line")) is int and isinstance(c.get("text"), str)
        ]
        text = plan_plugin.feedback_text(plan, _str(review.get("feedback")), comments)
        return outcome, shown_lines(text or plan_plugin.NO_DETAILS).strip(), None
    return _outcome_from_text(ok, content)


def _outcome_from_text(ok: bool, content: str) -> tuple[str, str | None, str | None]:
    """The outcome of a result written before results carried ``review``: read from the
    openings of the text the plan plugin wrote for the model (the only place that does)."""
    if ok:
        return "approved", None, None
    for opening in (plan_plugin.SENT_BACK, plan_plugin.APPROVED_WITH_FEEDBACK):
        if content.startswith(opening):
            body = content[len(opening):]
            body = body.removesuffix(plan_plugin.STILL_PLANNING).strip()
            return "sent-back", body or None, None
    return "not-reviewed", None, content


GOALS_CARRIED = 8  # the goals whose round budget a resumed projection keeps (rounds run for the current one)


class ChatCarry(Struct, frozen=True, gc=False, omit_defaults=True):
    """What a projection takes from the log before a turn boundary into the items after it
    (all the rest it knows there belongs to turns that are over): the plan review a later
    one names as its previous, and the round budgets of the goals last changed. With it, a
    projection resumed at that boundary gives every later item exactly as one fed the
    whole log (``ChatProjection.resumed``)."""

    reviewed_plan_id: str | None = None
    goal_rounds: dict[str, int] = {}


class ChatProjection:
    """Events and deltas in, upserted items out. Feed it a log from its first event
    (``apply_event`` in seq order) and the deltas as they come; each call returns the
    items it created or changed, in list order."""

    @classmethod
    def replayed(
        cls, events: Iterable[dict[str, Any]], deltas: Iterable[AgentDelta] = (), tools: ToolCatalogue | None = None,
        me: str | None = None,
    ) -> ChatProjection:
        """A projection fed a whole log (then the deltas of a turn still streaming)."""
        projection = cls(tools, me=me)
        for event in events:
            projection.apply_event(event)
        for delta in deltas:
            projection.apply_delta(delta)
        return projection

    @classmethod
    def resumed(cls, carry: ChatCarry, after_seq: int, tools: ToolCatalogue | None = None, me: str | None = None) -> ChatProjection:
        """A projection to be fed the log from seq ``after_seq + 1`` on, where no turn was
        open (a boundary at which ``resumable()`` held) and ``carry`` was the carry."""
        projection = cls(tools, me=me)
        projection._reviewed_plan_id = carry.reviewed_plan_id
        projection._goal_rounds = dict(carry.goal_rounds)
        projection.last_seq = after_seq
        return projection

    def __init__(self, tools: ToolCatalogue | None = None, *, me: str | None = None) -> None:
        # ``me``: the name of the client that reads these items. Its own acts say "You";
        # another client's name its (``from_client``); None: a reader that is no client.
        self.me = me
        # Tool items are titled by the tools themselves (Tool.describe): the agent's
        # catalogue, or every known plugin's tools for a log read without its agent.
        self._tools = tools if tools is not None else known_tools()
        self._items: dict[str, ChatItem] = {}
        self._order: list[str] = []
        self._durable: set[str] = set()
        self._step: dict[int, int] = {}  # turn -> its last request/header step
        self._open_turns: set[int] = set()
        self._calls: dict[tuple[int | None, str], str] = {}  # (turn, callId) -> item id, until its result
        self._args_text: dict[str, str] = {}  # streaming tool call -> its arguments so far
        self._streaming: dict[str, None] = {}  # ids of partial items, in order (an ordered set)
        self._goal_rounds: dict[str, int] = {}  # goal id -> maxRounds, the goal changed last at the end
        self._goal_round_turn: int | None = None  # the turn last started as a goal round
        # The goal item of a change that ended the goal during its round (complete, block,
        # pause), with its event's data: the round's later replies still count their tokens
        # (the fold does), so the item's figure follows them to the goal's final total.
        self._goal_ended: tuple[str, dict[str, Any]] | None = None
        self._reviewed_plan_id: str | None = None  # the last plan a person approved or sent back
        self._review_plans: dict[str, str] = {}  # item id -> the plan as written, until its result
        self._offered: tuple[int, frozenset[str]] | None = None  # (turn, tool names) of the last request
        # turn -> its user messages no checkpoint was taken after yet (the next one is theirs)
        self._before_checkpoint: dict[int, list[str]] = {}
        self.last_seq = 0
        # For paging without a scan: per list position, the seq of the last item with one
        # at or before it. Valid while those seqs never go down along the list (always, for
        # a log replayed alone); rebuilt when an item gains a seq in place (None: stale).
        self._positions: list[int] | None = []
        self._ascending = True

    # ---- reading ------------------------------------------------------------------------

    def items(self) -> list[ChatItem]:
        return [self._items[i] for i in self._order]

    def get(self, item_id: str) -> ChatItem | None:
        return self._items.get(item_id)

    def page(self, after_seq: int = 0, limit: int | None = None) -> tuple[list[ChatItem], int]:
        """Items whose ``seq`` is above ``after_seq``, in list order, at most ``limit`` of
        them; and the seq to pass as ``after_seq`` to read on (the last seq returned, or
        ``after_seq``). An item without a seq (streaming, a retry notice) goes with the
        item before it and does not count toward ``limit``."""
        start = self._page_start(after_seq)
        position = self._positions[start - 1] if start and self._positions is not None else 0  # the seq of the last item with one, so far
        items, order = self._items, self._order
        return _page_after((items[order[index]] for index in range(start, len(order))), after_seq, limit, position)

    def page_before(self, before_seq: int, limit: int | None = None) -> tuple[list[ChatItem], int, bool]:
        """The last ``limit`` items whose ``seq`` is below ``before_seq`` (all when None), in
        list order, each item without a seq with the item before it; the seq of the last
        item returned (0: none); and whether the page reaches the first item of the list
        (nothing older is left here). A ``before_seq`` above the last seq gives the newest page."""
        order, items = self._order, self._items
        if self._positions is None:
            self._page_start(0)  # rebuilds the positions (and whether they ascend)
        get = lambda index: items[order[index]]  # noqa: E731
        if self._ascending:
            end = bisect.bisect_left(self._positions, before_seq)  # type: ignore[arg-type]
            return _page_before(get, range(end - 1, -1, -1), before_seq, limit)
        kept = [i for i, p in enumerate(self._positions) if p < before_seq]  # type: ignore[union-attr]
        return _page_before(get, reversed(kept), before_seq, limit)

    def resumable(self) -> bool:
        """Whether the projection may be resumed from here (``carry``, ``resumed``): no turn
        is open and nothing outside a turn waits for a later event."""
        return not self._open_turns and not self._streaming and all(turn is not None for turn, _ in self._calls)

    def carry(self) -> ChatCarry:
        rounds = self._goal_rounds
        kept = dict(list(rounds.items())[-GOALS_CARRIED:]) if len(rounds) > GOALS_CARRIED else dict(rounds)
        return ChatCarry(reviewed_plan_id=self._reviewed_plan_id, goal_rounds=kept)

    def absorb_earlier(self, earlier: list[ChatItem]) -> None:
        """Put the items of the log just before this projection's first event (projected
        from a boundary, all of closed turns: final) in front of its list."""
        if not earlier:
            return
        ids = [item.id for item in earlier]
        for item in earlier:
            self._items[item.id] = item
        self._durable.update(ids)
        self._order = ids + self._order
        self._positions = None

    # ---- writing ------------------------------------------------------------------------

    def first_items_settled(self, limit: int) -> bool:
        """For a projection fed committed events only: whether ``page(0, limit)`` is what the
        whole log would give. True once an item follows the first ``limit`` and none of
        those can still change, i.e. no tool call among them waits for its result in a turn
        that is still open (a valid log puts events only in the open turn)."""
        if len(self._order) <= limit:
            return False
        if not self._calls:
            return True
        first = set(self._order[:limit])
        return not any(
            item_id in first and (turn is None or turn in self._open_turns) for (turn, _call), item_id in self._calls.items()
        )

    def _page_start(self, after_seq: int) -> int:
        """The first list position a page after ``after_seq`` can hold: every item before it
        is one ``page`` would skip (its seq, or the seq before it, is below ``after_seq``)."""
        if self._positions is None:
            self._positions = []
            self._ascending = True
            position = 0
            for item_id in self._order:
                seq = getattr(self._items[item_id], "seq", None)
                if seq is not None:
                    self._ascending = self._ascending and seq >= position
                    position = seq
                self._positions.append(position)
        if not self._ascending:
            return 0
        return bisect.bisect_left(self._positions, after_seq)

    def _put(self, item: ChatItem, changed: list[ChatItem], *, durable: bool = True) -> None:
        old = self._items.get(item.id)
        seq = getattr(item, "seq", None)
        if old is None:
            self._order.append(item.id)
            if self._positions is not None:
                last = self._positions[-1] if self._positions else 0
                if seq is not None:
                    self._ascending = self._ascending and seq >= last
                self._positions.append(last if seq is None else seq)
        elif getattr(old, "seq", None) != seq:
            self._positions = None  # an item took its seq in place: rebuilt at the next page
        self._items[item.id] = item
        if durable:
            self._durable.add(item.id)
        if isinstance(item, _Streamed) and item.partial:
            self._streaming[item.id] = None
        else:
            self._streaming.pop(item.id, None)
        changed.append(item)

    def _fresh_id(self, wanted: str, seq: int) -> str:
        """``wanted``, unless a durable item holds it already (a log the loop did not write)."""
        return wanted if wanted not in self._durable else f"{wanted}@{seq}"

    def apply_event(self, event: dict[str, Any]) -> list[ChatItem]:
        """The items one committed event creates or changes."""
        seq = _int(event.get("seq")) or 0
        self.last_seq = max(self.last_seq, seq)
        handler = self._HANDLERS.get(event.get("type"))  # type: ignore[arg-type]
        if handler is None:
            return []
        changed: list[ChatItem] = []
        handler(self, seq, _str(event.get("at")), _int(event.get("turn")), _dict(event.get("data")), changed)
        return changed

    # session/start
    def _session(self, seq, at, turn, data, changed) -> None:
        title = shown(data["title"]) if isinstance(data.get("title"), str) else None
        forked = _dict(data.get("forkedFrom"))
        forked_from = None
        text = f'Session "{title}"' if title else "Session started"
        if forked:
            forked_from = ForkedFrom(session_id=_str(forked.get("sessionId")), seq=_int(forked.get("seq")) or 0)
            text += f" (forked from {forked_from.session_id} at event {forked_from.seq})"
        self._put(
            SessionItem(id=f"session-{seq}", seq=seq, at=at, session_id=_str(data.get("sessionId")), title=title, forked_from=forked_from, text=text),
            changed,
        )

    # turn/open
    def _turn_open(self, seq, at, turn, data, changed) -> None:
        number = _int(data.get("turn")) or turn
        if number is not None:
            self._open_turns.add(number)
            self._step[number] = 0

    # request/header
    def _header(self, seq, at, turn, data, changed) -> None:
        step = _int(data.get("step"))
        if turn is None or step is None:
            return
        self._step[turn] = step
        tools = data.get("tools")
        if isinstance(tools, list):  # what this request offered the model (a written call names one)
            self._offered = (turn, frozenset(t for t in tools if isinstance(t, str)))
        self._discard(lambda item: item.turn == turn and (item.step or 0) < step, changed)

    # user/message
    def _user(self, seq, at, turn, data, changed) -> None:
        other = None
        text = _str(data.get("text"))
        plugin = data.get("plugin") if isinstance(data.get("plugin"), str) else None
        round_data = _dict(data.get("goalRound"))
        goal_round = None
        if round_data:
            goal_id = _str(round_data.get("goalId"))
            number = _int(round_data.get("round")) or 0
            goal_round = GoalRoundInfo(goal_id=goal_id, round=number, max_rounds=self._goal_rounds.get(goal_id))
            self._goal_round_turn, self._goal_ended = turn, None
            sender, label = "goal", f"Goal round {number}" + (f" of {goal_round.max_rounds}" if goal_round.max_rounds else "")
        elif data.get("source") == "plugin":
            # dshd's own note to the model, named for the person (no internal words).
            sender, label = "plugin", PLUGIN_LABELS.get(plugin or "", "Note from dshd")
        else:
            other = words.other_client(data.get("client"), self.me)
            sender, label = "person", words.user_label(other)
        item = UserMessageItem(
            id=f"user-{seq}", seq=seq, at=at, turn=turn, text=text, sender=sender, label=label, plugin=plugin, goal_round=goal_round,
            from_client=other if sender == "person" else None,
        )
        self._put(item, changed)
        if turn is not None:
            self._before_checkpoint.setdefault(turn, []).append(item.id)

    # assistant/message
    def _assistant(self, seq, at, turn, data, changed) -> None:
        step = self._step.get(turn) if turn is not None else None
        wanted = f"assistant-{turn}.{step}" if turn is not None and step else f"assistant-{seq}"
        item_id = self._fresh_id(wanted, seq)
        usage_data = _dict(data.get("usage"))
        usage = None
        if _int(usage_data.get("inputTokens")) is not None and _int(usage_data.get("outputTokens")) is not None:
            usage = Usage(
                input_tokens=usage_data["inputTokens"], output_tokens=usage_data["outputTokens"],
                cached_input_tokens=_int(usage_data.get("cachedInputTokens")), estimated=usage_data.get("estimated") is True,
            )  # fmt: skip
            if turn is not None and turn == self._goal_round_turn:
                self._count_after_goal_ended(usage.input_tokens + usage.output_tokens, changed)
        if not _str(data.get("text")) and item_id not in self._items:
            return  # a reply of tool calls only, logged for its usage: nothing to show
        item = AssistantMessageItem(
            id=item_id, turn=turn, step=step or None, seq=seq, at=at, text=_str(data.get("text")), partial=False, usage=usage
        )
        self._put(item, changed)
        offered = self._offered[1] if self._offered is not None and self._offered[0] == turn else self._tools.names()
        tool = written_tool_call(item.text, offered)
        if tool is not None:
            notice = NoticeItem(id=f"notice-{item_id}", turn=turn, at=at, about=item_id, code="written-tool-call", tool=tool, text=notice_text(tool))
            self._put(notice, changed)

    # tool/call
    def _tool_call(self, seq, at, turn, data, changed) -> None:
        call_id = _str(data.get("callId"))
        name = _str(data.get("name"), "?")
        arguments = _dict(data.get("arguments"))
        step = self._step.get(turn) if turn is not None else None
        wanted = f"tool-{turn}.{step}.{call_id}" if turn is not None and step else f"tool-{seq}"
        item_id = self._fresh_id(wanted, seq)
        self._args_text.pop(item_id, None)
        self._calls[(turn, call_id)] = item_id
        common = dict(id=item_id, turn=turn, step=step or None, seq=seq, at=at, call_id=call_id, partial=False)
        if name == plan_plugin.TOOL_NAME:
            self._review_plans[item_id] = _str(arguments.get("plan"))
            item: ChatItem = self._pending_review(_str(arguments.get("plan")), **common)
        else:
            item = ToolCallItem(**common, name=name, title=self._tools.describe(name, arguments).title, arguments=arguments, status="running")
        self._put(item, changed)

    def _pending_review(self, plan: str, **common: Any) -> PlanReviewItem:
        """An ``exit_plan_mode`` call (committed or streaming) waiting for the person's verdict."""
        return PlanReviewItem(
            **common,
            question_id=plan_plugin.question_id(common["call_id"]),
            title=shown(plan_plugin.first_heading(plan) or "Plan"),
            plan=shown_lines(plan),
            outcome="pending",
            outcome_text=words.PLAN_OUTCOMES["pending"],
            previous_id=self._reviewed_plan_id,
        )

    # tool/result
    def _tool_result(self, seq, at, turn, data, changed) -> None:
        call_id = _str(data.get("callId"))
        item_id = self._calls.pop((turn, call_id), None)
        item = self._items.get(item_id) if item_id else None
        if item is None:
            return
        ok = data.get("ok") is True
        content = shown_lines(_str(data.get("content")))  # a listing's names, a command's output
        if isinstance(item, PlanReviewItem):
            plan = self._review_plans.pop(item.id, "")
            outcome, feedback, detail = _review_outcome(ok, content, data.get("review"), plan)
            if outcome != "not-reviewed":
                self._reviewed_plan_id = item.id
            other = words.other_client(_dict(data.get("review")).get("client"), self.me) if outcome != "not-reviewed" else None
            item = msgspec.structs.replace(
                item, outcome=outcome, outcome_text=words.plan_outcome_text(outcome, other), feedback=feedback, detail=detail,
                from_client=other,
            )
        elif isinstance(item, ToolCallItem):
            item = msgspec.structs.replace(item, status="ok" if ok else "failed", result=content)
        self._put(item, changed)

    # permission/decision
    def _permission(self, seq, at, turn, data, changed) -> None:
        by = data.get("by") if isinstance(data.get("by"), str) else None
        if by in AUTOMATIC_DECISIONS:
            return  # no one was asked: the tool call's own item says what happened
        call_id = _str(data.get("callId"))
        tool = _str(data.get("tool"), "a tool")
        outcome = _str(data.get("outcome"), "?")
        feedback = data.get("feedback") if isinstance(data.get("feedback"), str) and data["feedback"].strip() else None
        other = words.other_client(data.get("client"), self.me) if by in (None, "person") else None
        item = PermissionItem(
            id=f"permission-{seq}", seq=seq, at=at, turn=turn, call_id=call_id, tool=tool, outcome=outcome, by=by,
            feedback=feedback, tool_item_id=self._calls.get((turn, call_id)),
            text=words.permission_text(tool, outcome, by, feedback, other), from_client=other,
        )  # fmt: skip
        self._put(item, changed)
        if outcome.startswith("allow"):
            changed += self.call_started(call_id)

    # plan/mode
    def _plan_mode(self, seq, at, turn, data, changed) -> None:
        active = data.get("active") is True
        self._put(PlanModeItem(id=f"plan-mode-{seq}", seq=seq, at=at, turn=turn, active=active, text=words.plan_mode_text(active)), changed)

    # goal/change
    def _goal(self, seq, at, turn, data, changed) -> None:
        op = _str(data.get("op"), "?")
        other = words.other_client(data.get("client"), self.me)
        text = words.by_other(words.goal_change_text(op, data), other)
        if op == "clear":
            cleared = _dict(data.get("cleared"))
            item = GoalItem(
                id=f"goal-{seq}", seq=seq, at=at, turn=turn, op=op, goal_id=_str(cleared.get("id")),
                revision=_int(cleared.get("revision")) or 0, text=text, from_client=other,
            )  # fmt: skip
        else:
            goal = _dict(data.get("goal"))
            goal_id = _str(goal.get("id"))
            max_rounds = _int(goal.get("maxRounds"))
            # The last changed goal goes to the end (the carry keeps the last few).
            kept = self._goal_rounds.pop(goal_id, None)
            if max_rounds is not None or kept is not None:
                self._goal_rounds[goal_id] = max_rounds if max_rounds is not None else kept
            reason = _dict(goal.get("blockedReason"))
            item = GoalItem(
                id=f"goal-{seq}", seq=seq, at=at, turn=turn, op=op, goal_id=goal_id, revision=_int(goal.get("revision")) or 0,
                objective=_str(goal.get("objective")), phase=_str(goal.get("phase")), rounds_used=_int(data.get("roundsStarted")),
                max_rounds=max_rounds, tokens_used=_int(data.get("tokensUsed")), max_tokens=_int(goal.get("maxTokens")),
                blocked_reason=Reason(code=_str(reason.get("code")), message=_str(reason.get("message"))) if reason else None,
                text=text, from_client=other,
            )  # fmt: skip
        ended_in_round = op != "clear" and item.phase != "active" and turn is not None and turn == self._goal_round_turn
        self._goal_ended = (item.id, data) if ended_in_round else None
        self._put(item, changed)

    def _count_after_goal_ended(self, tokens: int, changed: list[ChatItem]) -> None:
        """A reply of the round that ended the goal: its tokens join the goal item's figure,
        so the chat says the total ``dsh/goal/get`` and the goal notices say once the round is over."""
        if self._goal_ended is None:
            return
        item_id, data = self._goal_ended
        item = self._items.get(item_id)
        if not isinstance(item, GoalItem):
            return
        data = {**data, "tokensUsed": (_int(data.get("tokensUsed")) or 0) + tokens}
        self._goal_ended = (item_id, data)
        text = words.by_other(words.goal_change_text(item.op, data), item.from_client)
        self._put(msgspec.structs.replace(item, tokens_used=data["tokensUsed"], text=text), changed)

    # turn/close
    def _turn_close(self, seq, at, turn, data, changed) -> None:
        number = _int(data.get("turn")) or turn or 0
        self._discard(lambda item: item.turn == number, changed)
        self._open_turns.discard(number)
        self._before_checkpoint.pop(number, None)
        stop = _str(data.get("stopReason"), "?")
        error_data = _dict(data.get("error"))
        error = TurnError(kind=_str(error_data.get("kind")), message=_str(error_data.get("message"))) if error_data else None
        other = words.other_client(data.get("client"), self.me) if stop == "cancelled" else None
        text = words.turn_end_text(number, stop, error_data or None, other)
        failure = _str(data.get("failure")) if stop == "error" else ""
        if failure:  # a disk error stopped it: the path and the OS error, as the person reads them
            text = f"Turn {number} stopped: {shown(failure)}"
        item = TurnEndItem(id=f"turn-end-{number}", seq=seq, at=at, turn=number, stop_reason=stop, error=error, text=text, from_client=other)
        self._put(item, changed)

    # context/compact
    def _compact(self, seq, at, turn, data, changed) -> None:
        before, after = _int(data.get("tokensBefore")) or 0, _int(data.get("tokensAfter")) or 0
        item = CompactionItem(
            id=f"compaction-{seq}", seq=seq, at=at, turn=turn, summary=_str(data.get("summary")),
            through_seq=_int(data.get("throughSeq")) or 0, tokens_before=before, tokens_after=after,
            text=words.compaction_text(before, after),
        )  # fmt: skip
        self._put(item, changed)

    # mcp/server (written once per server and session, when it failed to start, died or hung)
    def _mcp_server(self, seq, at, turn, data, changed) -> None:
        if data.get("state") != "failed":
            return
        name = _str(data.get("name"), "?")
        reason = data.get("reason") if isinstance(data.get("reason"), str) else None
        item = NoticeItem(
            id=f"notice-{seq}", turn=turn, seq=seq, at=at, code="mcp-server-failed", server=shown(name),
            text=words.mcp_server_failed_text(name, reason),
        )  # fmt: skip
        self._put(item, changed)

    # checkpoint/taken
    def _checkpoint(self, seq, at, turn, data, changed) -> None:
        """A "before" checkpoint names what "Rewind to here" restores: on the step's tool
        calls (committed just before it, still waiting for their results) and on the
        turn's messages that came before it and have none yet."""
        step = _int(data.get("step"))
        if data.get("phase") != "before" or turn is None or step is None:
            return
        for item_id in self._before_checkpoint.pop(turn, ()):
            item = self._items.get(item_id)
            if isinstance(item, UserMessageItem) and item.checkpoint is None:
                self._put(msgspec.structs.replace(item, checkpoint=seq), changed)
        for (call_turn, _call_id), item_id in list(self._calls.items()):
            item = self._items.get(item_id)
            if call_turn == turn and isinstance(item, ToolCallItem) and item.step == step and item.checkpoint is None:
                self._put(msgspec.structs.replace(item, checkpoint=seq), changed)

    _HANDLERS = {
        "session/start": _session,
        "turn/open": _turn_open,
        "request/header": _header,
        "user/message": _user,
        "assistant/message": _assistant,
        "tool/call": _tool_call,
        "tool/result": _tool_result,
        "permission/decision": _permission,
        "plan/mode": _plan_mode,
        "goal/change": _goal,
        "turn/close": _turn_close,
        "context/compact": _compact,
        "mcp/server": _mcp_server,
        "checkpoint/taken": _checkpoint,
    }

    def _discard(self, which, changed: list[ChatItem]) -> None:
        """Streaming items that no durable event will replace (the step or turn ended
        first) stay, marked ``discarded``: they were shown, but the log does not hold them."""
        for item_id in list(self._streaming):
            item = self._items[item_id]
            if which(item):
                self._args_text.pop(item_id, None)
                if isinstance(item, ToolCallItem):
                    item = msgspec.structs.replace(item, partial=False, discarded=True, status="failed")
                elif isinstance(item, PlanReviewItem):
                    item = msgspec.structs.replace(
                        item, partial=False, discarded=True, outcome="not-reviewed", outcome_text=words.PLAN_OUTCOMES["not-reviewed"]
                    )
                else:
                    item = msgspec.structs.replace(item, partial=False, discarded=True)
                self._put(item, changed, durable=False)

    # ---- approvals (live: the log holds only their decisions) ------------------------------

    def _waiting_item(self, call_id: str) -> ToolCallItem | None:
        for (_turn, open_call), item_id in self._calls.items():
            item = self._items.get(item_id)
            if open_call == call_id and isinstance(item, ToolCallItem):
                return item
        return None

    def call_waiting(self, call_id: str) -> list[ChatItem]:
        """A tool call's approval opened: its item waits for the person, it is not running."""
        item = self._waiting_item(call_id)
        if item is None or item.status != "running":
            return []
        changed: list[ChatItem] = []
        self._put(msgspec.structs.replace(item, status="waiting"), changed)
        return changed

    def call_started(self, call_id: str) -> list[ChatItem]:
        """The call was allowed and runs now (a refused one stays waiting until its result)."""
        item = self._waiting_item(call_id)
        if item is None or item.status != "waiting":
            return []
        changed: list[ChatItem] = []
        self._put(msgspec.structs.replace(item, status="running"), changed)
        return changed

    # ---- deltas -------------------------------------------------------------------------

    def apply_delta(self, delta: AgentDelta) -> list[ChatItem]:
        """The items a live delta creates or changes. A delta of a turn that is not open
        (it closed, or the projection never saw it open) or for an item the log already
        holds changes nothing."""
        changed: list[ChatItem] = []
        if delta.turn not in self._open_turns:
            return changed
        if delta.kind == "text":
            if not delta.text:
                return changed
            item_id = f"assistant-{delta.turn}.{delta.step}"
            if item_id in self._durable:
                return changed
            old = self._items.get(item_id)
            text = (old.text if isinstance(old, AssistantMessageItem) else "") + delta.text
            self._put(AssistantMessageItem(id=item_id, turn=delta.turn, step=delta.step, text=text, partial=True), changed, durable=False)
        elif delta.kind == "tool-arguments":
            if delta.call_id is None:
                return changed
            item_id = f"tool-{delta.turn}.{delta.step}.{delta.call_id}"
            if item_id in self._durable:
                return changed
            old = self._items.get(item_id)
            name = delta.name or (old.name if isinstance(old, ToolCallItem) else None) or (
                plan_plugin.TOOL_NAME if isinstance(old, PlanReviewItem) else "?"
            )
            text = self._args_text.get(item_id, "") + (delta.text or "")
            self._args_text[item_id] = text
            common = dict(id=item_id, turn=delta.turn, step=delta.step, call_id=delta.call_id, partial=True)
            if name == plan_plugin.TOOL_NAME:
                item: ChatItem = self._pending_review(partial_json_string(text, "plan") or "", **common)
            else:
                title = self._tools.describe(name, _partial_arguments(text)).title
                item = ToolCallItem(**common, name=name, title=title, arguments_text=text, status="running")
            self._put(item, changed, durable=False)
        elif delta.kind == "retry":
            item_id = f"retry-{delta.turn}.{delta.step}.{delta.attempt if delta.attempt is not None else 0}"
            item = RetryItem(
                id=item_id, turn=delta.turn, step=delta.step, attempt=delta.attempt, delay_ms=delta.delay_ms,
                text=words.retry_text(delta.attempt, delta.delay_ms),
            )  # fmt: skip
            self._put(item, changed, durable=False)
        return changed


def _page_before(get, indexes, before_seq: int, limit: int | None) -> tuple[list[ChatItem], int, bool]:
    """page_before over the list positions ``indexes`` (newest first; ``get(index)`` the item)."""
    picked: list[ChatItem] = []  # newest first
    pending: list[ChatItem] = []  # items without a seq, until the item they follow decides for them
    counted = 0
    start_reached = True
    for index in indexes:
        item = get(index)
        seq = getattr(item, "seq", None)
        if seq is None:
            pending.append(item)
            continue
        if seq >= before_seq:
            pending.clear()  # they follow an item of a later page
            continue
        if limit is not None and counted >= limit:
            start_reached = False
            break
        picked.extend(pending)
        pending.clear()
        picked.append(item)
        counted += 1
    if start_reached:
        picked.extend(pending)  # before the first item with a seq: they open the list
    picked.reverse()
    next_seq = next((item.seq for item in reversed(picked) if getattr(item, "seq", None) is not None), 0)
    return picked, next_seq, start_reached


def page_before_list(items: list[ChatItem], before_seq: int, limit: int | None = None) -> tuple[list[ChatItem], int, bool]:
    """``ChatProjection.page_before`` of a plain list of items (a scan from its end)."""
    return _page_before(items.__getitem__, range(len(items) - 1, -1, -1), before_seq, limit)


def page_after_list(items: Iterable[ChatItem], after_seq: int = 0, limit: int | None = None) -> tuple[list[ChatItem], int]:
    """``ChatProjection.page`` of a plain list of items (a scan from its start)."""
    return _page_after(items, after_seq, limit, 0)


def _page_after(
    items: Iterable[ChatItem], after_seq: int, limit: int | None, position: int
) -> tuple[list[ChatItem], int]:
    """The items of a page after ``after_seq`` read from ``items`` (in list order);
    ``position`` is the seq of the last item with one before the first of ``items``."""
    out: list[ChatItem] = []
    next_seq, counted = after_seq, 0
    for item in items:
        seq = getattr(item, "seq", None)
        if seq is None:
            # After the item it follows: in this page if that one is, or was the last of an earlier page.
            if position >= after_seq:
                out.append(item)
            continue
        position = seq
        if seq <= after_seq:
            continue
        if limit is not None and counted >= limit:
            break
        out.append(item)
        counted += 1
        next_seq = seq
    return out, next_seq


def counted_items(items: Iterable[ChatItem]) -> int:
    """How many of ``items`` count toward a page's limit (those with a seq)."""
    return sum(1 for item in items if getattr(item, "seq", None) is not None)


def project(events: Iterable[dict[str, Any]], deltas: Iterable[AgentDelta] = (), me: str | None = None) -> list[ChatItem]:
    """The items of a whole log (then the deltas, for a turn still streaming), as the
    client named ``me`` reads them."""
    return ChatProjection.replayed(events, deltas, me=me).items()
