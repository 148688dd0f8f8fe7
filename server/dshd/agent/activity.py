"""What an agent is doing right now, as a person reads it (in process only, never logged).

``idle``: no turn runs. ``working``: a turn runs and nothing waits for the person (a model
request, a command, a tool). ``waiting``: a turn waits for the person's answer (a plan
review or an approval), also during goal rounds; ``question`` says which
(``plan-review`` or ``approval``). Editors show "working" and "waiting for you" from this
alone, so neither is shown while the other is true. The tool calls whose approval is open
are counted by call id too (``waiting_calls``): a chat's tool-call item says "waiting for
you" for them, not "running".

The agent wraps its two seams that wait for a person (:class:`AskingQuestions`,
:class:`AskingApprovals`) so every ask, however it ends, is counted while it is open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

log = logging.getLogger(__name__)


@attrs.frozen
class ActivityState:
    activity: str  # "idle" | "working" | "waiting"
    question: str | None = None  # while waiting: "plan-review" | "approval"


ActivityListener = Callable[[ActivityState], None]


class Activity:
    def __init__(self) -> None:
        self._turn_running = False
        self._open: list[str] = []  # the kinds of the questions open now, oldest first
        self._listeners: list[ActivityListener] = []
        self._last = ActivityState("idle")
        self.waiting_calls: dict[str, None] = {}  # call ids whose approval is open (an ordered set)
        self._call_listeners: list[Callable[[str, bool], None]] = []

    @property
    def state(self) -> ActivityState:
        if self._open:
            return ActivityState("waiting", self._open[0])
        return ActivityState("working" if self._turn_running else "idle")

    def add_listener(self, fn: ActivityListener) -> Callable[[], None]:
        self._listeners.append(fn)

        def remove() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return remove

    def add_call_listener(self, fn: Callable[[str, bool], None]) -> Callable[[], None]:
        """``fn(call_id, waiting)`` when a tool call's approval opens (True) and closes (False)."""
        self._call_listeners.append(fn)

        def remove() -> None:
            if fn in self._call_listeners:
                self._call_listeners.remove(fn)

        return remove

    def _call_changed(self, call_id: str, waiting: bool) -> None:
        if waiting:
            self.waiting_calls[call_id] = None
        else:
            self.waiting_calls.pop(call_id, None)
        for fn in list(self._call_listeners):
            try:
                fn(call_id, waiting)
            except Exception:
                log.exception("waiting call listener failed")

    def turn(self, running: bool) -> None:
        self._turn_running = running
        self._changed()

    def asking(self, kind: str, call_id: str | None = None) -> "_Asking":
        return _Asking(self, kind, call_id)

    def _changed(self) -> None:
        state = self.state
        if state == self._last:
            return
        self._last = state
        for fn in list(self._listeners):
            try:
                fn(state)
            except Exception:
                log.exception("activity listener failed")


class _Asking:
    """``with activity.asking("approval"):`` counts one open question while inside."""

    def __init__(self, activity: Activity, kind: str, call_id: str | None = None) -> None:
        self._activity = activity
        self._kind = kind
        self._call_id = call_id

    def __enter__(self) -> None:
        self._activity._open.append(self._kind)
        self._activity._changed()
        if self._call_id is not None:
            self._activity._call_changed(self._call_id, True)

    def __exit__(self, *exc: Any) -> None:
        self._activity._open.remove(self._kind)
        self._activity._changed()
        if self._call_id is not None:
            self._activity._call_changed(self._call_id, False)


class AskingQuestions:
    """The user-questions seam, counted (plan reviews are its only questions today)."""

    def __init__(self, inner: Any, activity: Activity) -> None:
        self.inner = inner
        self._activity = activity

    async def ask(self, agent: Any, questions: list[dict[str, Any]]) -> list[Any]:
        with self._activity.asking("plan-review"):
            return await self.inner.ask(agent, questions)


class AskingApprovals:
    """The approvals seam, counted."""

    def __init__(self, inner: Any, activity: Activity) -> None:
        self.inner = inner
        self._activity = activity

    async def ask(self, request: Any) -> Any:
        with self._activity.asking("approval", getattr(request, "call_id", None)):
            return await self.inner.ask(request)
