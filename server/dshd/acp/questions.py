"""The user-questions seam on the ACP door: a plan review is a
``session/request_permission`` on the ``exit_plan_mode`` tool call (kind
``switch_mode``, the plan markdown as its content), with one option per kind:

    Approve        (optionId "approve", kind allow_once)        -> {"choice": "approve"}
    Keep planning  (optionId "keep-planning", kind reject_once) -> {"choice": "revise"}

Clients pick by kind, blindly (CodeCompanion's Accept takes the ``allow_once`` option,
acpx's ``y`` and ``--approve-all`` the first one), so a review offers nothing a blind pick
could take beyond approving the plan. Starting a goal that carries the plan out is the
person's own act: the ``/goal`` command (goal_command.py), which the chat names once the
plan is approved here (goals on, none standing).

The request's tool call says ``in_progress``: the plan tool is running (it waits for
this answer), and the client was told so; a status never goes back on the wire.

ACP has no feedback field: "Keep planning" tells the model (through the plan tool's
failed result) that the person kept planning and that their next message says what to
change. An option dshd did not offer keeps planning too; every other way the request can
end fails closed (asking.py), and plan mode stays on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate

from dshd.acp.asking import PermissionAsk
from dshd.acp.updates import text
from dshd.agent.questions import AgentRef, QuestionsUnavailable
from dshd.api.escape import shown, shown_lines
from dshd.plugins.plan import describe_exit_plan_mode, feedback_text

APPROVE = "approve"
KEEP_PLANNING = "keep-planning"
KEEP_PLANNING_FEEDBACK = (
    "The person chose Keep planning in their ACP client, which sends no feedback with "
    "that choice: their next message says what to change."
)
# One option per kind: a client that picks "the allow_once option" approves and no more.
PLAN_OPTIONS = [
    PermissionOption(option_id=APPROVE, name="Approve", kind="allow_once"),
    PermissionOption(option_id=KEEP_PLANNING, name="Keep planning", kind="reject_once"),
]


def plan_goal_objective(heading: str) -> str:
    """The objective of the goal ``/goal`` starts for the approved plan: it names the plan
    (the words the editors' "Approve and start a goal" use)."""
    return f'Carry out the approved plan "{heading.strip()}"'


class AcpQuestions(PermissionAsk):
    unavailable = QuestionsUnavailable

    def __init__(self, peer: Any, *, timeout_s: float, on_approved: Callable[[str, str], None] | None = None) -> None:
        super().__init__(peer, timeout_s=timeout_s)
        # (sessionId, callId) of a plan this client approves: the door names /goal after it.
        self._approved = on_approved or (lambda session_id, call_id: None)

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
            # Running: the plan tool waits for this answer (the client was told in_progress).
            status="in_progress",
            content=[text(shown_lines(plan)), *previous_review_content(question.get("previous"))],
            raw_input={"plan": plan},
        )
        option = await self.choose(agent.session_id, tool_call, PLAN_OPTIONS, what="plan review")
        if option == APPROVE:
            self._approved(agent.session_id, tool_call.tool_call_id)
            return [{"id": question["id"], "choice": "approve"}]
        if option == KEEP_PLANNING:
            return [{"id": question["id"], "choice": "revise", "feedback": KEEP_PLANNING_FEEDBACK}]
        # An option we never offered: the plan tool reports an unknown choice and keeps planning.
        return [{"id": question["id"], "choice": option}]


def previous_review_content(previous: Any) -> list:
    """P-23 on the ACP door: after a revised plan, what the person asked of the plan before
    it (its feedback, each comment beside its line of that plan), so they can see whether
    it was addressed. Escaped for reading, as the plan is."""
    if not isinstance(previous, dict):
        return []
    feedback = previous.get("feedback") or ""
    if feedback == KEEP_PLANNING_FEEDBACK:  # our own words for "Keep planning": nothing asked
        feedback = ""
    body = feedback_text(previous.get("markdown") or "", feedback, previous.get("comments") or [])
    if not body:
        return []
    title = previous.get("title") or "the plan before"
    return [text(shown_lines(f"Last time, on \"{title}\", you asked:\n{body}"))]
