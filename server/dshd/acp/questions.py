"""The user-questions seam on the ACP door: a plan review is a
``session/request_permission`` on the ``exit_plan_mode`` tool call (kind
``switch_mode``, the plan markdown as its content), with two options:

    Approve        (optionId "approve", kind allow_once)  -> {"choice": "approve"}
    Approve and start a goal  (optionId "approve-goal", kind allow_once) -> {"choice": "approve"},
                   then, once the approval is recorded, a goal whose objective names the plan
                   (offered only with the goals plugin on and no goal standing: none, or
                   the last one complete; the budgets are the configured defaults, since a
                   permission answer carries no numbers)
    Keep planning  (optionId "keep-planning", kind reject_once) -> {"choice": "revise"}

ACP has no feedback field: "Keep planning" tells the model (through the plan tool's
failed result) that the person kept planning and that their next message says what to
change. An option dshd did not offer keeps planning too; every other way the request can
end fails closed (asking.py), and plan mode stays on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from acp.schema import PermissionOption, ToolCallUpdate

from dshd.acp.asking import PermissionAsk
from dshd.acp.updates import agent_text, text
from dshd.agent.questions import AgentRef, QuestionsUnavailable
from dshd.api.escape import shown, shown_lines
from dshd.errors import DshError
from dshd.folds.events import ToolResult
from dshd.plugins.plan import describe_exit_plan_mode, feedback_text, first_heading
from dshd.services.goals import GoalService

log = logging.getLogger("dshd.acp")

APPROVE = "approve"
APPROVE_AND_GOAL = "approve-goal"
KEEP_PLANNING = "keep-planning"
KEEP_PLANNING_FEEDBACK = (
    "The person chose Keep planning in their ACP client, which sends no feedback with "
    "that choice: their next message says what to change."
)
PLAN_OPTIONS = [
    PermissionOption(option_id=APPROVE, name="Approve", kind="allow_once"),
    PermissionOption(option_id=KEEP_PLANNING, name="Keep planning", kind="reject_once"),
]
GOAL_OPTION = PermissionOption(option_id=APPROVE_AND_GOAL, name="Approve and start a goal", kind="allow_once")


def plan_goal_objective(heading: str) -> str:
    """The objective of the goal "Approve and start a goal" creates: it names the plan
    (the same words the editors use)."""
    return f'Carry out the approved plan "{heading.strip()}"'


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
            # Running: the plan tool waits for this answer, and the client was told
            # in_progress when it started; a status never goes back on the wire.
            status="in_progress",
            content=[text(shown_lines(plan)), *previous_review_content(question.get("previous"))],
            raw_input={"plan": plan},
        )
        goals = _goals_of(agent)
        options = [*PLAN_OPTIONS[:1], GOAL_OPTION, *PLAN_OPTIONS[1:]] if goals is not None else PLAN_OPTIONS
        option = await self.choose(agent.session_id, tool_call, options, what="plan review")
        if option == APPROVE:
            return [{"id": question["id"], "choice": "approve"}]
        if option == APPROVE_AND_GOAL and goals is not None:
            objective = plan_goal_objective(first_heading(plan) or described.title)
            start_goal_when_approved(agent, goals, tool_call.tool_call_id, objective, lambda note: self._tell(agent.session_id, note))
            return [{"id": question["id"], "choice": "approve"}]
        if option == KEEP_PLANNING:
            return [{"id": question["id"], "choice": "revise", "feedback": KEEP_PLANNING_FEEDBACK}]
        # An option we never offered: the plan tool reports an unknown choice and keeps planning.
        return [{"id": question["id"], "choice": option}]

    def _tell(self, session_id: str, note: str) -> None:
        self._peer.update(session_id, agent_text(f"\n\nNote: {note}\n"))


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


def _goals_of(agent: Any) -> GoalService | None:
    """The agent's goals when "Approve and start a goal" can make one: the plugin is on
    and no goal stands in the way (none yet, or the last one complete)."""
    features = getattr(agent, "features", None)
    goals = features.get(GoalService) if features is not None else None
    if goals is None:
        return None
    try:
        current = goals.get()
    except DshError:  # the session closed meanwhile
        return None
    return goals if current is None or current.phase == "complete" else None


def start_goal_when_approved(
    agent: Any, goals: GoalService, call_id: str, objective: str, tell: Callable[[str], None]
) -> None:
    """Compose the second call: once the plan's ``tool/result`` is committed with outcome
    "approved" (the person's choice won, and the plan tool accepted it), create the goal.
    Another outcome (answered otherwise in another client, the review failed) makes none."""
    removers: list[Callable[[], None]] = []

    def create() -> None:
        try:
            view = goals.create(objective)
        except DshError as exc:
            log.warning("approve and start a goal: the goal was not created: %s", exc.message)
            tell(f"the plan is approved, but the goal was not started: {exc.message}")
            return
        log.info("approve and start a goal: goal %s created", view.id)

    def on_event(event: Any) -> None:
        if not isinstance(event, ToolResult) or event.data.callId != call_id:
            return
        for remove in removers:
            remove()
        review = event.data.review
        if review is not None and review.outcome == "approved":
            # After this commit has reached every listener: the goal's own events follow it.
            asyncio.get_running_loop().call_soon(create)

    removers.append(agent.add_event_listener(on_event))
