"""The user-questions seam: how a tool asks the person something and waits.

The daemon's implementation sends ``dsh/questions/ask`` to the editor; tests use
:class:`InProcessAnswerer`. ``ask`` returns the raw answers list; callers validate it
(a malformed reply is the caller's "not a clean answer", never a crash). Raising
:class:`QuestionsUnavailable` means no channel (capability not declared, client gone,
timed out); a caller fails closed on that and on any other error. Cancelling the awaiting
task withdraws the question.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


class AgentRef(Protocol):
    """Who asks: the live agent's id and its session (all a channel needs to address it)."""

    agent_id: str
    session_id: str


# How long a door waits for the person's answer (plan reviews and approvals alike)
# before it fails closed, unless told otherwise.
ANSWER_TIMEOUT_S = 600.0


class QuestionsUnavailable(Exception):
    """No way to reach the person right now."""


class UserQuestions(Protocol):
    async def ask(self, agent: AgentRef, questions: list[dict[str, Any]]) -> list[Any]: ...


Answerer = Callable[[list[dict[str, Any]]], "list[Any] | Awaitable[list[Any]]"]


class InProcessAnswerer:
    """Answers from a function (sync or async) of the questions; records what was asked."""

    def __init__(self, answer: Answerer) -> None:
        self._answer = answer
        self.asked: list[list[dict[str, Any]]] = []

    async def ask(self, agent: AgentRef, questions: list[dict[str, Any]]) -> list[Any]:
        self.asked.append(questions)
        result = self._answer(questions)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        return result  # type: ignore[return-value]


class NoQuestions:
    """The seam when nobody can answer: every ask is QuestionsUnavailable."""

    async def ask(self, agent: AgentRef, questions: list[dict[str, Any]]) -> list[Any]:
        raise QuestionsUnavailable("no client can answer questions")
