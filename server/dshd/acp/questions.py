"""The user-questions seam on the ACP door: a plan review is a
``session/request_permission`` on the ``exit_plan_mode`` tool call (kind
``switch_mode``, the plan markdown as its content), with two options:

    Approve        (optionId "approve", kind allow_once)  -> {"choice": "approve"}
    Keep planning  (optionId "keep-planning", kind reject_once) -> {"choice": "revise"}

ACP has no feedback field: "Keep planning" tells the model (through the plan tool's
failed result) that the person kept planning and that their next message says what to
change. Fail closed on every other path: a ``cancelled`` outcome (the client cancels
open permission requests on ``session/cancel``), an option we did not offer, an error
reply, a malformed reply, a lost connection or a timeout all keep plan mode.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import PermissionOption, ToolCallUpdate
from pydantic import ValidationError

from dshd.acp.updates import text, tool_title
from dshd.agent.questions import QuestionsUnavailable
from dshd.plugins.plan import TOOL_NAME as EXIT_PLAN_MODE

if TYPE_CHECKING:
    from dshd.acp.door import Peer
    from dshd.agent.loop import Agent

log = logging.getLogger("dshd.acp")

DEFAULT_TIMEOUT_S = 600.0
APPROVE = "approve"
KEEP_PLANNING = "keep-planning"
KEEP_PLANNING_FEEDBACK = (
    "The person chose Keep planning in their ACP client, which sends no feedback with "
    "that choice: their next message says what to change."
)
PLAN_OPTIONS = [
    PermissionOption(option_id=APPROVE, name="Approve", kind="allow_once"),
    PermissionOption(option_id=KEEP_PLANNING, name="Keep planning", kind="reject_once"),
]


class AcpQuestions:
    def __init__(self, peer: "Peer", *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._peer = peer
        self.timeout_s = timeout_s

    async def ask(self, agent: "Agent", questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(questions) != 1 or questions[0].get("kind") != "plan-review":
            raise QuestionsUnavailable("an ACP client can answer one plan review at a time")
        question = questions[0]
        call_id = str(question["id"]).removeprefix("plan-review-")
        plan = question.get("plan") or ""
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            kind="switch_mode",
            title=tool_title(EXIT_PLAN_MODE, {"plan": plan}),
            status="pending",
            content=[text(plan)],
            raw_input={"plan": plan},
        )
        option = await self.request(agent, tool_call, PLAN_OPTIONS, what="plan review")
        if option == APPROVE:
            return [{"id": question["id"], "choice": "approve"}]
        if option == KEEP_PLANNING:
            return [{"id": question["id"], "choice": "revise", "feedback": KEEP_PLANNING_FEEDBACK}]
        # An option we never offered: the plan tool reports an unknown choice and keeps planning.
        return [{"id": question["id"], "choice": option}]

    async def request(self, agent: "Agent", tool_call: ToolCallUpdate, options: list[PermissionOption], *, what: str) -> str:
        """Ask and return the chosen optionId; every way of not choosing is
        ``QuestionsUnavailable`` (fail closed)."""
        try:
            response = await asyncio.wait_for(
                self._peer.request_permission(agent.session_id, tool_call, options), timeout=self.timeout_s
            )
        except TimeoutError:
            raise QuestionsUnavailable(f"no answer to the {what} within {self.timeout_s:g} s") from None
        except ConnectionError:
            raise QuestionsUnavailable("the client went away") from None
        except RequestError as exc:
            raise QuestionsUnavailable(f"the client answered the {what} with an error: {exc}") from None
        except ValidationError as exc:
            raise QuestionsUnavailable(f"the client's answer to the {what} was malformed: {exc.error_count()} problem(s)") from None
        outcome = response.outcome
        if outcome.outcome != "selected":
            raise QuestionsUnavailable(f"the {what} was cancelled")
        log.info("%s in session %s: %s", what, agent.session_id, outcome.option_id)
        return outcome.option_id
