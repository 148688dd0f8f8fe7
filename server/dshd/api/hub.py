"""The fan-out both front doors use: one ``Hub`` per connection follows the live agents
that connection holds and hands their news to the door, as core values.

For each attached agent the door gets every committed event, live delta, plan change
and goal notice (``Door``); it converts them to its own wire (``dsh/*`` notifications,
ACP ``session/update``). A door that shows a conversation subscribes to an agent's chat
items with :meth:`Hub.chat`: that returns the items so far and, from then on, the door
gets an upsert (``Door.chat_item``) for every item an event or a delta creates or
changes.

The projection is built at the first subscription, from the log (a cold open reads only
the checkpoint's tail; the chat costs a full read only when someone looks at it). The
deltas of the turn still running are kept until then, so a subscriber that arrives in
the middle of a reply sees the text streamed so far. :meth:`Hub.chat_page` builds it on
the event loop in slices of a few milliseconds, so the connection's other requests are
answered while a long log is read; news that comes meanwhile is held and applied after
the log. A first page (``afterSeq`` 0 with a ``limit``) is answered as soon as the items
it holds are settled, long before the whole log is read: it costs the page, not the log.

Streaming items are throttled: each upsert carries the item whole, so a reply streamed in
thousands of pieces would send its growing text thousands of times. The first upsert of
an item goes at once; later partial ones wait out a window (50 ms, longer as the text
grows: about 200 kB/s an item at most) and only the newest is sent. The committed item is
sent at once and drops any partial one still waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any, Protocol

import msgspec

from dshd.agent.deltas import AgentDelta
from dshd.errors import DshError
from dshd.folds import ReplayError
from dshd.log import iter_records
from dshd.services.goals import GoalService
from dshd.services.plan_mode import PlanModeController
from dshd.api.chat import AssistantMessageItem, ChatItem, ChatProjection, PlanReviewItem, ToolCallItem

WINDOW_S = 0.05  # the shortest wait between two partial upserts of one item
BYTES_PER_S = 200_000  # the most a streaming item sends a second, once its text is long

SLICE_S = 0.005  # the longest a chat build holds the event loop at a time
PAUSE_TURNS = 4  # then the loop turns this often without it: a request read meanwhile is answered

log = logging.getLogger(__name__)


class Door(Protocol):
    """What a front door does with an agent's news (each called after the change is
    durable; a door that raises is logged and never undoes anything)."""

    def agent_event(self, agent: Any, event: dict[str, Any]) -> None: ...
    def agent_delta(self, agent: Any, delta: AgentDelta) -> None: ...
    def plan_changed(self, agent: Any, view: Any) -> None: ...
    def goal_changed(self, agent: Any, notice: Any) -> None: ...
    def chat_item(self, agent: Any, item: ChatItem) -> None: ...
    def activity_changed(self, agent: Any, state: Any) -> None: ...
    def tool_started(self, agent: Any, call_id: str) -> None: ...


class _Feed:
    """One attached agent: the deltas of its running turn, and its chat once subscribed."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.chat: ChatProjection | None = None
        self.running: list[AgentDelta] = []  # deltas of open turns, until a subscriber needs them
        self.waiting: dict[str, ChatItem] = {}  # the newest partial upsert of an item in its window
        self.windows: dict[str, asyncio.TimerHandle] = {}  # items whose window is open
        self.building: asyncio.Future | None = None  # the chat's build from the log, while it runs
        self.held: list[tuple[bool, Any]] | None = None  # (is_event, event|delta) that came during it
        self.first_pages: list[tuple[int, asyncio.Future]] = []  # (limit, answer) of first pages waiting


def _streamed_size(item: ChatItem) -> int:
    if isinstance(item, AssistantMessageItem):
        return len(item.text)
    if isinstance(item, ToolCallItem):
        return len(item.arguments_text or "")
    if isinstance(item, PlanReviewItem):
        return len(item.plan)
    return 0


def read_log_events(path) -> Iterator[dict[str, Any]]:
    """The log's events as plain dicts, streamed (the projection takes any shape; a line
    that is not JSON, or out of place, is reported as a replay would)."""
    decode = msgspec.json.Decoder().decode
    for line_no, _offset, line in iter_records(path):
        try:
            event = decode(line)
        except msgspec.DecodeError as exc:
            raise ReplayError(None, line_no, f"malformed JSON: {exc}") from None
        if not isinstance(event, dict) or event.get("seq") != line_no:
            raise ReplayError(None, line_no, f"expected the event with seq {line_no}")
        yield event


def _report_failed_build(task: asyncio.Future) -> None:
    # A first page may have been answered before the log's end failed to read: say so here.
    if not task.cancelled() and task.exception() is not None:
        log.warning("the chat could not be built from the log: %s", task.exception())


class Hub:
    def __init__(self, door: Door) -> None:
        self.door = door
        self._feeds: dict[str, _Feed] = {}

    def attach(self, agent: Any) -> None:
        """Follow this agent (once; later calls do nothing). Its listeners go when it closes."""
        if agent.agent_id in self._feeds:
            return
        feed = self._feeds[agent.agent_id] = _Feed(agent)
        agent.add_event_listener(lambda event: self._on_event(feed, event))
        agent.add_delta_listener(lambda delta: self._on_delta(feed, delta))
        add_activity_listener = getattr(agent, "add_activity_listener", None)
        if add_activity_listener is not None:
            add_activity_listener(lambda state: self._call("activity_changed", agent, state))
        add_tool_start_listener = getattr(agent, "add_tool_start_listener", None)
        if add_tool_start_listener is not None:
            add_tool_start_listener(lambda call_id: self._on_tool_started(feed, call_id))
        activity = getattr(agent, "activity", None)
        if hasattr(activity, "add_call_listener"):
            agent.on_close(activity.add_call_listener(lambda call_id, waiting: self._on_call_waiting(feed, call_id, waiting)))
        plan = agent.features.get(PlanModeController)
        if plan is not None:
            agent.on_close(plan.add_listener(lambda view: self._call("plan_changed", agent, view)))
        goals = agent.features.get(GoalService)
        if goals is not None:
            agent.on_close(goals.add_listener(lambda notice: self._call("goal_changed", agent, notice)))
        agent.on_close(lambda: self._forget(agent.agent_id))

    def attached(self, agent_id: str) -> bool:
        return agent_id in self._feeds

    def chat(self, agent: Any, after_seq: int = 0, limit: int | None = None) -> tuple[list[ChatItem], int]:
        """The agent's chat items (``ChatProjection.page``); subscribes the door to their
        upserts. Synchronous: a first call reads the whole log at once (see chat_page)."""
        self.attach(agent)
        feed = self._feeds[agent.agent_id]
        if feed.chat is None:
            if feed.building is not None:
                raise RuntimeError("the chat is being built: use chat_page")
            for _ in self._build_steps(feed):
                pass
        return feed.chat.page(after_seq, limit)

    async def chat_page(self, agent: Any, after_seq: int = 0, limit: int | None = None) -> tuple[list[ChatItem], int]:
        """``chat``, without holding the event loop while the log is read: the build runs in
        slices, and a first page (``after_seq`` 0 with a ``limit``) is answered once its
        items are settled, from the start of the log only."""
        self.attach(agent)
        feed = self._feeds[agent.agent_id]
        if feed.chat is None:
            if feed.building is None:
                feed.building = asyncio.ensure_future(self._build(feed))
                feed.building.add_done_callback(_report_failed_build)
            if after_seq == 0 and limit is not None:
                answer = asyncio.get_running_loop().create_future()
                feed.first_pages.append((limit, answer))
                return await answer
            await asyncio.shield(feed.building)
        return feed.chat.page(after_seq, limit)

    def _build_steps(self, feed: _Feed) -> Iterator[None]:
        """Project the log, then the held deltas and news; yields when a slice is used up.
        Sets ``feed.chat`` at the end; answers the first pages waiting as they settle."""
        feed.held = []
        projection = ChatProjection(feed.agent.tools)  # tool items titled by the agent's own tools
        try:
            slice_end = time.perf_counter() + SLICE_S
            for count, event in enumerate(read_log_events(feed.agent.store.log_fd), 1):
                projection.apply_event(event)
                if feed.first_pages:
                    self._answer_first_pages(feed, projection)
                if count % 64 == 0 and time.perf_counter() > slice_end:
                    yield
                    slice_end = time.perf_counter() + SLICE_S
            for delta in feed.running:
                projection.apply_delta(delta)
        except BaseException as exc:
            feed.held = None
            for _limit, answer in feed.first_pages:
                if not answer.done():
                    answer.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            feed.first_pages = []
            raise
        feed.running = []
        held, feed.held = feed.held, None
        feed.chat = projection
        for is_event, news in held:  # what came during the build, in order (events the log read already: skipped)
            if is_event:
                if news.get("seq", 0) > projection.last_seq:
                    self._chat_event(feed, news)
            else:
                self._chat_delta(feed, news)
        # The approvals open now (never logged): their calls' items wait for the person.
        for call_id in list(getattr(getattr(feed.agent, "activity", None), "waiting_calls", ())):
            for item in projection.call_waiting(call_id):
                self._upsert(feed, item)
        for limit, answer in feed.first_pages:
            if not answer.done():
                answer.set_result(projection.page(0, limit))
        feed.first_pages = []

    @staticmethod
    def _answer_first_pages(feed: _Feed, projection: ChatProjection) -> None:
        waiting = []
        for limit, answer in feed.first_pages:
            if answer.done():
                continue
            if projection.first_items_settled(limit):
                answer.set_result(projection.page(0, limit))
            else:
                waiting.append((limit, answer))
        feed.first_pages = waiting

    async def _build(self, feed: _Feed) -> None:
        try:
            for _ in self._build_steps(feed):
                for _turn in range(PAUSE_TURNS):
                    await asyncio.sleep(0)
                if self._feeds.get(feed.agent.agent_id) is not feed:
                    raise DshError("stale-agent", f"agent {feed.agent.agent_id} was closed while its chat was read; open the session again")
        finally:
            feed.building = None

    def _forget(self, agent_id: str) -> None:
        feed = self._feeds.pop(agent_id, None)
        if feed is not None:
            for timer in feed.windows.values():
                timer.cancel()
            feed.windows.clear()
            feed.waiting.clear()

    # ---- chat upserts ----------------------------------------------------------------------

    def _upsert(self, feed: _Feed, item: ChatItem) -> None:
        if not getattr(item, "partial", False):
            feed.waiting.pop(item.id, None)
            timer = feed.windows.pop(item.id, None)
            if timer is not None:
                timer.cancel()
            self._call("chat_item", feed.agent, item)
            return
        if item.id in feed.windows:
            feed.waiting[item.id] = item
            return
        self._call("chat_item", feed.agent, item)
        self._open_window(feed, item)

    def _open_window(self, feed: _Feed, item: ChatItem) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): every upsert goes at once
        wait = max(WINDOW_S, _streamed_size(item) / BYTES_PER_S)
        feed.windows[item.id] = loop.call_later(wait, self._close_window, feed, item.id)

    def _close_window(self, feed: _Feed, item_id: str) -> None:
        feed.windows.pop(item_id, None)
        item = feed.waiting.pop(item_id, None)
        if item is not None and self._feeds.get(feed.agent.agent_id) is feed:
            self._call("chat_item", feed.agent, item)
            self._open_window(feed, item)

    # ---- listeners -----------------------------------------------------------------------

    def _call(self, what: str, *args: Any) -> None:
        try:
            getattr(self.door, what)(*args)
        except Exception:
            log.exception("front door failed to take %s", what)

    def _on_event(self, feed: _Feed, event: Any) -> None:
        data = msgspec.to_builtins(event)
        self._call("agent_event", feed.agent, data)
        if feed.chat is not None:
            self._chat_event(feed, data)
        elif feed.held is not None:
            feed.held.append((True, data))
        elif data.get("type") == "turn/close":
            feed.running = []

    def _on_delta(self, feed: _Feed, delta: AgentDelta) -> None:
        self._call("agent_delta", feed.agent, delta)
        if feed.chat is not None:
            self._chat_delta(feed, delta)
        elif feed.held is not None:
            feed.held.append((False, delta))
        else:
            feed.running.append(delta)

    def _on_tool_started(self, feed: _Feed, call_id: str) -> None:
        self._call("tool_started", feed.agent, call_id)
        if feed.chat is not None:
            for item in feed.chat.call_started(call_id):
                self._upsert(feed, item)

    def _on_call_waiting(self, feed: _Feed, call_id: str, waiting: bool) -> None:
        # Only the opening changes an item: the call's start or result ends the wait.
        if waiting and feed.chat is not None:
            for item in feed.chat.call_waiting(call_id):
                self._upsert(feed, item)

    def _chat_event(self, feed: _Feed, data: dict[str, Any]) -> None:
        for item in feed.chat.apply_event(data):
            self._upsert(feed, item)

    def _chat_delta(self, feed: _Feed, delta: AgentDelta) -> None:
        for item in feed.chat.apply_delta(delta):
            self._upsert(feed, item)
