"""The user-questions seam on the ACP door: a plan review is a
``session/request_permission`` on the ``exit_plan_mode`` tool call (kind
``switch_mode``, the plan markdown as its content), with two options:

    Approve        (optionId "approve", kind allow_once)  -> {"choice": "approve"}
    Keep planning  (optionId "keep-planning", kind reject_once) -> {"choice": "revise"}

ACP has no feedback field: "Keep planning" tells the model (through the plan tool's
failed result) that the person kept planning and that their next message says what to
change. An option dshd did not offer keeps planning too; every other way the request can
end fails closed (asking.py), and plan mode stays on.
"""

from __future__ import annotations

from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate

from dshd.acp.asking import PermissionAsk
from dshd.acp.updates import text
from dshd.agent.questions import AgentRef, QuestionsUnavailable
from dshd.api.escape import shown, shown_lines
from dshd.plugins.plan import describe_exit_plan_mode

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


class AcpQuestions(PermissionAsk):
    unavailable = QuestionsUnavailable

    async def ask(self, agent: AgentRef, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(questions) != 1 or questions[0].get("kind") != "plan-review":
            raise QuestionsUnavailable("an ACP client can answer one plan review at a time")
        question = questions[0]
        plan = question.get("plan") or ""
        described = describe_exit_plan_mode({"plan": plan})  # as its tool_call was titled
        tool_call = ToolCallUpdate(
            tool_call_id=str(question["id"]).removeprefix("plan-review-"),
            kind=described.kind,
            title=shown(described.title),
            status="pending",
            content=[text(shown_lines(plan))],  # escaped for reading; raw_input keeps it as written
            raw_input={"plan": plan},
        )
        option = await self.choose(agent.session_id, tool_call, PLAN_OPTIONS, what="plan review")
        if option == APPROVE:
            return [{"id": question["id"], "choice": "approve"}]
        if option == KEEP_PLANNING:
            return [{"id": question["id"], "choice": "revise", "feedback": KEEP_PLANNING_FEEDBACK}]
        # An option we never offered: the plan tool reports an unknown choice and keeps planning.
        return [{"id": question["id"], "choice": option}]
