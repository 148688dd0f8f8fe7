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
the middle of a reply sees the text streamed so far.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import msgspec

from dshd.agent.deltas import AgentDelta
from dshd.api.chat import ChatItem, ChatProjection

log = logging.getLogger(__name__)


class Door(Protocol):
    """What a front door does with an agent's news (each called after the change is
    durable; a door that raises is logged and never undoes anything)."""

    def agent_event(self, agent: Any, event: dict[str, Any]) -> None: ...
    def agent_delta(self, agent: Any, delta: AgentDelta) -> None: ...
    def plan_changed(self, agent: Any, view: Any) -> None: ...
    def goal_changed(self, agent: Any, notice: Any) -> None: ...
    def chat_item(self, agent: Any, item: ChatItem) -> None: ...


class _Feed:
    """One attached agent: the deltas of its running turn, and its chat once subscribed."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.chat: ChatProjection | None = None
        self.running: list[AgentDelta] = []  # deltas of open turns, until a subscriber needs them


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
        if agent.plan is not None:
            agent.on_close(agent.plan.add_listener(lambda view: self._call("plan_changed", agent, view)))
        if agent.goals is not None:
            agent.on_close(agent.goals.add_listener(lambda notice: self._call("goal_changed", agent, notice)))
        agent.on_close(lambda: self._feeds.pop(agent.agent_id, None))

    def attached(self, agent_id: str) -> bool:
        return agent_id in self._feeds

    def chat(self, agent: Any, after_seq: int = 0, limit: int | None = None) -> tuple[list[ChatItem], int]:
        """The agent's chat items (``ChatProjection.page``); subscribes the door to their upserts."""
        self.attach(agent)
        feed = self._feeds[agent.agent_id]
        if feed.chat is None:
            projection = ChatProjection()
            for event in agent.store.events():
                projection.apply_event(msgspec.to_builtins(event))
            for delta in feed.running:
                projection.apply_delta(delta)
            feed.running = []
            feed.chat = projection
        return feed.chat.page(after_seq, limit)

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
            for item in feed.chat.apply_event(data):
                self._call("chat_item", feed.agent, item)
        elif data.get("type") == "turn/close":
            feed.running = []

    def _on_delta(self, feed: _Feed, delta: AgentDelta) -> None:
        self._call("agent_delta", feed.agent, delta)
        if feed.chat is not None:
            for item in feed.chat.apply_delta(delta):
                self._call("chat_item", feed.agent, item)
        else:
            feed.running.append(delta)
