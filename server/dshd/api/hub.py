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
import os
import time
from collections.abc import Generator, Iterator
from typing import Any, Protocol

import msgspec

from dshd.agent.deltas import AgentDelta
from dshd.errors import DshError
from dshd.log import find_line_start
from dshd.services.goals import GoalService
from dshd.services.plan_mode import PlanModeController
from dshd.api.chat import (
    AssistantMessageItem,
    ChatItem,
    ChatProjection,
    PlanReviewItem,
    ToolCallItem,
    counted_items,
    page_after_list,
    page_before_list,
)
from dshd.api.chat_marks import START, ChatMark, ChatMarks, marks_of, read_log_lines

WINDOW_S = 0.05  # the shortest wait between two partial upserts of one item
BYTES_PER_S = 200_000  # the most a streaming item sends a second, once its text is long

SLICE_S = 0.005  # the longest a chat build holds the event loop at a time
PAUSE_TURNS = 4  # then the loop turns this often without it: a request read meanwhile is answered
CLOCK_EVERY = 64  # events projected between two looks at the clock
SEGMENTS_KEPT = 8  # the segments between chat marks a connection keeps (pages read on around them)

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
        self.chat_from = 0  # the chat holds the items after this seq (a chat mark's; 0: the whole log)
        self.marks: ChatMarks | None = None  # the session's chat marks, once the chat is read
        self.segments: dict[int, list[ChatItem]] = {}  # mark index -> the items up to the next mark
        self.last_build: asyncio.Future | None = None  # the last read of the live chat (done: its outcome)
        self.removers: list = []  # the agent's listeners this feed added (detach takes them back)


def _streamed_size(item: ChatItem) -> int:
    if isinstance(item, AssistantMessageItem):
        return len(item.text)
    if isinstance(item, ToolCallItem):
        return len(item.arguments_text or "")
    if isinstance(item, PlanReviewItem):
        return len(item.plan)
    return 0


def read_log_events(path) -> Iterator[dict[str, Any]]:
    """The log's events as plain dicts, streamed (the projection takes any shape)."""
    for _line_no, _offset, _line, event in read_log_lines(path):
        yield event


class _MarksChanged(Exception):
    """A chat mark a read needed no longer matches the log (it and the later ones are gone)."""


def _report_failed_build(task: asyncio.Future) -> None:
    # A first page may have been answered before the log's end failed to read: say so here.
    if not task.cancelled() and task.exception() is not None:
        log.warning("the chat could not be built from the log: %s", task.exception())


class Hub:
    def __init__(self, door: Door) -> None:
        self.door = door
        self._feeds: dict[str, _Feed] = {}

    def attach(self, agent: Any, running: list[AgentDelta] | None = None) -> None:
        """Follow this agent (once; later calls do nothing). Its listeners go when it closes.
        ``running``: the deltas of the turn running now, streamed before this connection
        came (the host keeps them), so its chat shows the reply from its start."""
        if agent.agent_id in self._feeds:
            return
        feed = self._feeds[agent.agent_id] = _Feed(agent)
        if running:
            feed.running = list(running)
        marks_of(agent.store).follow(agent)  # the chat's marks stay current, chat open or not
        removers = feed.removers  # what detach() takes back (closing the agent drops them all)
        removers.append(agent.add_event_listener(lambda event: self._on_event(feed, event)))
        removers.append(agent.add_delta_listener(lambda delta: self._on_delta(feed, delta)))
        add_activity_listener = getattr(agent, "add_activity_listener", None)
        if add_activity_listener is not None:
            removers.append(add_activity_listener(lambda state: self._call("activity_changed", agent, state)))
        add_tool_start_listener = getattr(agent, "add_tool_start_listener", None)
        if add_tool_start_listener is not None:
            removers.append(add_tool_start_listener(lambda call_id: self._on_tool_started(feed, call_id)))
        activity = getattr(agent, "activity", None)
        if hasattr(activity, "add_call_listener"):
            removers.append(activity.add_call_listener(lambda call_id, waiting: self._on_call_waiting(feed, call_id, waiting)))
            agent.on_close(removers[-1])
        plan = agent.features.get(PlanModeController)
        if plan is not None:
            removers.append(plan.add_listener(lambda view: self._call("plan_changed", agent, view)))
            agent.on_close(removers[-1])
        goals = agent.features.get(GoalService)
        if goals is not None:
            removers.append(goals.add_listener(lambda notice: self._call("goal_changed", agent, notice)))
            agent.on_close(removers[-1])
        agent.on_close(lambda: self._forget(agent.agent_id))

    def detach(self, agent_id: str) -> None:
        """Stop following this agent (another connection may go on following it)."""
        feed = self._feeds.get(agent_id)
        if feed is None:
            return
        for remove in feed.removers:
            if callable(remove):
                try:
                    remove()
                except Exception:
                    log.exception("could not remove a listener of %s", agent_id)
        feed.removers.clear()
        self._forget(agent_id)

    def reader_name(self) -> str | None:
        """The name of the client this hub's door serves: its own acts say "You" in the chat
        items it gets, another client's name theirs (set at initialize, before any chat)."""
        name = getattr(self.door, "client_name", None)
        return name if isinstance(name, str) else None

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
            for _ in self._build_steps(feed, START):
                pass
        for _ in self._extend_back_steps(feed, 0):
            pass
        return feed.chat.page(after_seq, limit)

    async def chat_page(
        self, agent: Any, after_seq: int = 0, limit: int | None = None, before_seq: int | None = None
    ) -> tuple[list[ChatItem], int]:
        """``chat``, without holding the event loop while the log is read (the reads run in
        slices), and reading only what the page needs where the session's chat marks allow:
        the live chat is projected from the last mark, a page before it from the marks'
        segments (``before_seq``: the last ``limit`` items below it, the newest page when it
        is above the last seq). Without marks a first page from the start (``after_seq`` 0
        with a ``limit``) is answered once its items are settled."""
        self.attach(agent)
        feed = self._feeds[agent.agent_id]
        if feed.chat is None:
            if feed.building is None:
                feed.marks = marks_of(agent.store)
                start = feed.marks.last
                feed.chat_from = start.seq
                feed.building = feed.last_build = asyncio.ensure_future(self._build(feed, start))
                feed.building.add_done_callback(_report_failed_build)
            if after_seq == 0 and limit is not None and before_seq is None and feed.chat_from == 0:
                answer = asyncio.get_running_loop().create_future()
                feed.first_pages.append((limit, answer))
                return await answer
            # A page wholly before the last mark is read from the segments at once; the live
            # chat's read (for the upserts and later pages) goes on beside it.
            wholly_before = before_seq is not None and before_seq <= feed.chat_from
            if not wholly_before and not (before_seq is None and limit is not None and after_seq < feed.chat_from):
                await asyncio.shield(feed.building)
        try:
            if before_seq is not None:
                return await self._page_before(feed, before_seq, limit)
            if limit is None:
                await self._sliced(feed, self._extend_back_steps(feed, after_seq))
            elif after_seq < feed.chat_from:
                return await self._page_from_marks(feed, after_seq, limit)
            return feed.chat.page(after_seq, limit)
        except _MarksChanged:
            # The log before the live chat is not what the marks were made of: read the chat
            # again from the last mark that still matches (at worst the log's start).
            log.warning("chat marks of %s no longer match the log: the chat is read again", agent.session_id)
            if feed.building is not None:
                await asyncio.wait({feed.building})  # (its chat is dropped: it starts at a mark that may be gone)
            feed.chat, feed.chat_from, feed.segments = None, 0, {}
            return await self.chat_page(agent, after_seq, limit, before_seq)

    # ---- reading the log for the chat ------------------------------------------------------

    def _project_steps(self, feed: _Feed, mark: ChatMark, until: ChatMark | None, record: bool) -> Generator[None, None, ChatProjection]:
        """Project the log from ``mark`` to mark ``until`` (None: the end) and return the
        projection, yielding when a slice is used up; with ``record``, a mark is
        recorded at each boundary that is due. Answers the first pages waiting as they settle."""
        agent = feed.agent
        me = self.reader_name()
        projection = ChatProjection.resumed(mark.carry, mark.seq, agent.tools, me=me) if mark.seq else ChatProjection(agent.tools, me=me)
        marks = feed.marks if record else None
        previous = None  # the line before the one read (a mark's fingerprint)
        slice_end = time.perf_counter() + SLICE_S
        end = None if until is None else until.offset
        for count, (line_no, offset, line, event) in enumerate(read_log_lines(agent.store.log_fd, mark.offset, mark.seq + 1, end), 1):
            if (
                marks is not None
                and previous is not None
                and event.get("type") == "turn/open"
                and marks.due(line_no - 1)
                and projection.resumable()
            ):
                marks.add(line_no - 1, offset, previous, projection.carry())
            projection.apply_event(event)
            previous = line
            if record and feed.first_pages:
                self._answer_first_pages(feed, projection)
            if count % CLOCK_EVERY == 0 and time.perf_counter() > slice_end:
                yield
                slice_end = time.perf_counter() + SLICE_S
        return projection

    def _build_steps(self, feed: _Feed, mark: ChatMark) -> Iterator[None]:
        """Project the log from ``mark``, then the held deltas and news; yields when a slice
        is used up. Sets ``feed.chat`` at the end; answers the first pages waiting as they settle."""
        feed.held = []
        if feed.marks is None:
            feed.marks = marks_of(feed.agent.store)
        feed.chat_from = mark.seq
        try:
            projection = yield from self._project_steps(feed, mark, None, True)
            for delta in feed.running:
                projection.apply_delta(delta)
        except BaseException as exc:
            feed.held = None
            feed.chat_from = 0
            for _limit, answer in feed.first_pages:
                if not answer.done():
                    answer.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            feed.first_pages = []
            raise
        feed.running = []
        held, feed.held = feed.held, None
        feed.chat = projection
        marks = feed.marks
        feed.agent.on_close(lambda: marks.save(force=True, wait=True))
        marks.save(force=True)  # what this read found is kept for the next look (a cache)
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

    async def _build(self, feed: _Feed, mark: ChatMark) -> None:
        try:
            await self._sliced(feed, self._build_steps(feed, mark))
        finally:
            feed.building = None

    async def _sliced(self, feed: _Feed, steps: Iterator[None]) -> None:
        """Run a read of the log, letting the loop turn between its slices."""
        for _ in steps:
            for _turn in range(PAUSE_TURNS):
                await asyncio.sleep(0)
            if self._feeds.get(feed.agent.agent_id) is not feed:
                raise DshError("stale-agent", f"agent {feed.agent.agent_id} was closed while its chat was read; open the session again")

    def _segment_steps(self, feed: _Feed, index: int) -> Iterator[None]:
        """The items between mark ``index`` and the next (all of closed turns: final), into
        ``feed.segments`` (the last few are kept)."""
        if index in feed.segments:
            feed.segments[index] = feed.segments.pop(index)  # newest at the end
            return
        if not (feed.marks.check(index) and feed.marks.check(index + 1)):
            raise _MarksChanged()
        marks = feed.marks.marks
        projection = yield from self._project_steps(feed, marks[index], marks[index + 1], False)
        feed.segments[index] = projection.items()
        while len(feed.segments) > SEGMENTS_KEPT:
            feed.segments.pop(next(iter(feed.segments)))

    def _extend_back_steps(self, feed: _Feed, to_seq: int) -> Iterator[None]:
        """Put the segments before the live chat in front of it until it holds every item
        after ``to_seq`` (a whole list asked for: it then stays whole)."""
        marks = feed.marks
        while feed.chat_from > to_seq:
            index = marks.index_at_or_before(feed.chat_from) - 1
            yield from self._segment_steps(feed, index)
            feed.chat.absorb_earlier(feed.segments.pop(index))
            feed.chat_from = marks.marks[index].seq

    async def _page_before(self, feed: _Feed, before_seq: int, limit: int | None) -> tuple[list[ChatItem], int]:
        """The last ``limit`` items below ``before_seq``: from the live chat, then from the
        segments before it, newest first, until the page is full or the log's start."""
        parts: list[list[ChatItem]] = []  # newest first
        counted = 0
        marks = feed.marks
        if before_seq > feed.chat_from:
            items, _next, reached = feed.chat.page_before(before_seq, limit)
            parts.append(items)
            counted = counted_items(items)
            index = marks.index_at_or_before(feed.chat_from) - 1 if reached else -1
            bound = feed.chat_from + 1
        else:
            index = marks.index_at_or_before(max(before_seq - 2, 0))  # the segment holding seq before_seq - 1
            bound = before_seq
        while index >= 0 and (limit is None or counted < limit):
            await self._sliced(feed, self._segment_steps(feed, index))
            items, _next, reached = page_before_list(feed.segments[index], bound, None if limit is None else limit - counted)
            parts.append(items)
            counted += counted_items(items)
            if not reached:
                break
            index -= 1
        page = [item for part in reversed(parts) for item in part]
        next_seq = next((item.seq for item in reversed(page) if getattr(item, "seq", None) is not None), 0)
        return page, next_seq

    async def _page_from_marks(self, feed: _Feed, after_seq: int, limit: int) -> tuple[list[ChatItem], int]:
        """A page after ``after_seq`` that starts before the live chat: from the segments
        from the mark at or before it on, then the live chat."""
        marks = feed.marks
        index = marks.index_at_or_before(after_seq)
        older: list[ChatItem] = []
        while marks.marks[index].seq < feed.chat_from:
            await self._sliced(feed, self._segment_steps(feed, index))
            older.extend(feed.segments[index])
            items, next_seq = page_after_list(older, after_seq, limit)
            if counted_items(items) >= limit:
                return items, next_seq
            index += 1
        items, next_seq = page_after_list(older, after_seq, limit)
        if feed.chat is None:  # the page goes on into the live chat (a failed read: its error)
            await asyncio.shield(feed.building or feed.last_build)
        rest, rest_next = feed.chat.page(feed.chat_from, limit - counted_items(items))
        return items + rest, rest_next if rest_next > feed.chat_from else next_seq

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
        seq = data.get("seq")
        if data.get("type") == "turn/open" and type(seq) is int and feed.marks is not None and feed.marks.due(seq - 1):
            if feed.chat.resumable():
                self._live_mark(feed, seq)
        for item in feed.chat.apply_event(data):
            self._upsert(feed, item)

    def _live_mark(self, feed: _Feed, seq: int) -> None:
        """Mark the boundary before the turn/open ``seq`` the live chat just got: its line
        and the one before are found reading back from the log's end (a few lines)."""
        store = feed.agent.store
        try:
            end_seq, end = store.state.seq + 1, store.log_size
            start = find_line_start(store.log_fd, end, end_seq, seq)
            before = find_line_start(store.log_fd, start, seq, seq - 1)
            line = os.pread(store.log_fd, start - before, before)
        except (OSError, ValueError) as exc:
            log.warning("chat mark at seq %d not recorded: %s", seq, exc)
            return
        if feed.marks.add(seq - 1, start, line, feed.chat.carry()):
            feed.marks.save()

    def _chat_delta(self, feed: _Feed, delta: AgentDelta) -> None:
        for item in feed.chat.apply_delta(delta):
            self._upsert(feed, item)
