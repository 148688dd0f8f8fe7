"""The plan plugin (PM-1): section ``plan:policy``, tool ``exit_plan_mode``, command ``/plan``;
and the plan of record (P-22): section ``plan:approved``, ``/plan forget``.

Nothing else: it never touches the sandbox, approvals or the tool catalogue (PM-4,
PM-23). The plan text lives only as the ``exit_plan_mode`` call's argument in the log
(PM-21): no plan file, no copy as an assistant message.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import attrs

from dshd.agent.commands import Command
from dshd.agent.config import Config
from dshd.agent.prompt import PromptContext, Section
from dshd.agent.questions import QuestionsUnavailable
from dshd.agent.tools import Tool, ToolContext, ToolDescription, ToolOutcome
from dshd.errors import DshError
from dshd.folds import plans
from dshd.folds.events import ToolCall
from dshd.folds.plans import APPROVED_WITH_FEEDBACK, SENT_BACK, first_heading
from dshd.services.acting import answered_by
from dshd.services.plan_mode import PlanModeController
from dshd.services.plan_records import PlanRecords

if TYPE_CHECKING:
    from dshd.agent.loop import Agent

log = logging.getLogger(__name__)

SECTION_ID = "plan:policy"
SECTION_ORDER = 50
# P-22: the approved plan, once a compaction has summarized its exit_plan_mode call away.
APPROVED_SECTION_ID = "plan:approved"
APPROVED_SECTION_ORDER = 55
APPROVED_INTRO = (
    "The plan the person approved earlier in this session (its review was summarized "
    "away with the conversation; it still stands unless the person says otherwise):"
)
NOTHING_TO_FORGET = "/plan forget: there is no approved plan to forget"
TOOL_NAME = plans.PLAN_TOOL

TOOL_PARAMETERS = {
    "type": "object",
    "properties": {
        "plan": {
            "type": "string",
            "description": "The whole plan in markdown; its first line is a # heading.",
        }
    },
    "required": ["plan"],
    "additionalProperties": False,
}

STILL_PLANNING = "Plan mode stays on: keep planning and call exit_plan_mode again with the revised plan."
NO_DETAILS = "(the person gave no details)"
# SENT_BACK, APPROVED_WITH_FEEDBACK: the openings of the two "keep planning" results
# (folds/plans.py, which reads them in logs written before results carried ``review``).
FAIL_CLOSED = (
    "The plan could not be reviewed ({why}), so plan mode stays on. Do not start the work. "
    "The person can leave plan mode with /plan off."
)


def attach(agent: "Agent", config: Config) -> "PlanPlugin":
    return PlanPlugin(agent, config.plan.section)


def question_id(call_id: str) -> str:
    """The id of the plan-review question asked for one ``exit_plan_mode`` call."""
    return f"plan-review-{call_id}"


def plan_title(plan: str) -> str:
    """A plan under review titled by its own heading, "Plan: <heading>" (a heading that
    already starts with "Plan" is not said twice), so a client that shows only a
    permission's title still tells the person what they approve."""
    heading = first_heading(plan)
    if not heading:
        return "Plan"
    if heading.lower() == "plan" or heading.lower().startswith(("plan:", "plan -", "plan —")):
        return heading
    return f"Plan: {heading}"


def describe_exit_plan_mode(arguments: dict[str, Any]) -> ToolDescription:
    plan = arguments.get("plan")
    return ToolDescription(plan_title(plan if isinstance(plan, str) else ""), "switch_mode")


async def _not_attached(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome.failure("plan mode is not attached to this agent")


def tools(config: Config | None) -> list[Tool]:
    """The plan tool as a catalogue lists it (the plugin binds its run when it attaches)."""
    return [
        Tool(
            TOOL_NAME,
            "Leave plan mode: present the full plan (markdown, starting with a # heading) "
            "for the person to review. Works only while plan mode is on.",
            TOOL_PARAMETERS,
            _not_attached,
            describe=describe_exit_plan_mode,
        )
    ]


class PlanPlugin:
    def __init__(self, agent: "Agent", section_text: str) -> None:
        self.agent = agent
        self.section_text = section_text
        self.controller = PlanModeController(agent.store)
        self.attached = True
        agent.features.add(self.controller)
        agent.sections.add(Section(SECTION_ID, SECTION_ORDER, self.render_policy))
        agent.sections.add(Section(APPROVED_SECTION_ID, APPROVED_SECTION_ORDER, self.render_approved))
        self._plans = PlanRecords(agent.store)
        self._approved_text: tuple[str, str] | None = None  # (callId, plan) of the plan of record
        agent.features.add(self._plans)  # dsh/plan/history reads the same fold
        for tool in tools(None):
            agent.tools.add(attrs.evolve(tool, run=self.exit_plan_mode))
        agent.commands.add(Command("plan", "/plan, /plan off, /plan forget, /plan <message>", self.command))
        # PM-10: first in the chain, so it sees every other listener's verdict.
        remove_listener = agent.pre_step.add(self.controller.pre_step, first=True)
        agent.on_close(remove_listener)
        agent.on_close(self.detach)

    def detach(self) -> None:
        self.attached = False
        self.controller.detach()

    def render_policy(self, ctx: PromptContext) -> str | None:
        # PM-2: verbatim, only while the recorded state that builds this step is on.
        return self.section_text if ctx.state.plan.active else None

    def render_approved(self, ctx: PromptContext) -> str | None:
        """P-22: the plan of record, once the compaction the step is built on has
        summarized away its ``exit_plan_mode`` call (before that, the call's argument is in
        the transcript: the plan is in the context exactly once, either way)."""
        plan = ctx.state.plan
        if plan.approved_call is None or ctx.state.context.through_seq < plan.approved_seq:
            return None  # none, or its call is still in the transcript
        markdown = self._approved_markdown(plan.approved_call, plan.approved_seq)
        return None if markdown is None else f"{APPROVED_INTRO}\n\n{markdown}"

    def _approved_markdown(self, call_id: str, seq: int) -> str | None:
        """The plan of ``call_id``, read from its call's line once (the folded state holds
        only where it is, so opening a long session reads nothing more)."""
        if self._approved_text is None or self._approved_text[0] != call_id:
            [call] = self.agent.store.events(after_seq=seq - 1, limit=1)
            plan = call.data.arguments.get("plan") if isinstance(call, ToolCall) and call.data.callId == call_id else None
            if not isinstance(plan, str):
                log.warning("the approved plan's call %s is not at seq %d", call_id, seq)
                return None
            self._approved_text = (call_id, plan)
        return self._approved_text[1]

    async def command(self, agent: "Agent", rest: str) -> None:
        """PM-22: ``/plan`` on; ``/plan off`` off (dropping a pending entry);
        ``/plan forget`` drops the plan of record (P-22);
        ``/plan <message>`` on, then ``<message>`` steered in as a user message."""
        if rest == "off":
            self.controller.set(False)
            return
        if rest == "forget":
            approved_call = self.agent.store.state.plan.approved_call
            if approved_call is None:
                raise DshError("invalid-params", NOTHING_TO_FORGET, field="text")
            self.controller.forget(approved_call)
            return
        self.controller.set(True)
        if rest:
            agent.steer(rest)

    async def exit_plan_mode(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        """P-20: every result carries its review outcome as data (``review``) beside the
        text for the model; a result without one is "failed" (nothing was approved)."""
        outcome = await self._review(ctx, arguments)
        if outcome.review is None:
            outcome = ToolOutcome(outcome.ok, outcome.content, {"outcome": "failed"})
        return outcome

    async def _review(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        if not self.agent.store.state.plan.active:
            return ToolOutcome.failure("Plan mode is off, so there is nothing to exit; go on with the work.")
        unknown = sorted(set(arguments) - {"plan"})
        if unknown:
            return ToolOutcome.failure(f"exit_plan_mode takes only `plan`; unexpected: {', '.join(unknown)}.")
        plan = arguments.get("plan")
        if not isinstance(plan, str) or not plan.strip():
            return ToolOutcome.failure("Give the whole plan as markdown text in `plan`. " + STILL_PLANNING)
        title = first_heading(plan)
        if title is None:
            return ToolOutcome.failure(
                "The plan must be full markdown whose first non-blank line is a # heading "
                "(for example `# Plan: ...`). " + STILL_PLANNING
            )
        if not self.attached:
            return ToolOutcome.failure(FAIL_CLOSED.format(why="the plan plugin was unloaded"))
        question = {
            "id": question_id(ctx.call_id),
            "kind": "plan-review",
            "title": title,
            "plan": plan,
            "choices": ["approve", "revise"],
        }
        previous = self.previous_review(ctx.call_id)
        if previous is not None:
            question["previous"] = previous
        try:
            answers = await self.agent.questions.ask(self.agent, [question])
        except QuestionsUnavailable as exc:
            return ToolOutcome.failure(FAIL_CLOSED.format(why=str(exc) or "no one can answer"))
        except TimeoutError:
            return ToolOutcome.failure(FAIL_CLOSED.format(why="the review timed out"))
        except Exception as exc:  # noqa: BLE001 - any failure of the channel fails closed
            return ToolOutcome.failure(FAIL_CLOSED.format(why=f"the review failed: {exc}"))
        if not self.attached:  # PM-20: unloaded while the person was reviewing
            return ToolOutcome.failure(FAIL_CLOSED.format(why="the plan plugin was unloaded during review"))
        outcome = self._judge(question["id"], plan, answers)
        by = answered_by.get()  # the client whose answer won (the host sets it)
        if by and outcome.review is not None and outcome.review.get("outcome") in ("approved", "revise"):
            outcome = ToolOutcome(outcome.ok, outcome.content, {**outcome.review, "client": by})
        return outcome

    def previous_review(self, call_id: str) -> dict[str, Any] | None:
        """P-23: what the person asked for last time, when they sent the plan before this
        one back (folded from the log, where this call is already recorded)."""
        record = plans.previous_for(self._plans.history(), call_id)
        if record is None:
            return None
        previous: dict[str, Any] = {"callId": record.call_id, "title": record.title, "markdown": record.markdown}
        if record.feedback is not None:
            previous["feedback"] = record.feedback
        if record.comments:
            previous["comments"] = [{"line": c.line, "text": c.text} for c in record.comments]
        return previous

    def _judge(self, asked_id: str, plan: str, answers: Any) -> ToolOutcome:
        """PM-18/PM-19: exactly one clean approval exits; a clean "revise" is feedback;
        anything else keeps plan mode with corrective feedback."""
        if not isinstance(answers, list) or len(answers) != 1 or not isinstance(answers[0], dict):
            return ToolOutcome.failure(f"The review gave no single clear answer. {STILL_PLANNING}")
        answer = answers[0]
        problem = _answer_problem(answer, asked_id)
        if problem is not None:
            return ToolOutcome.failure(f"The review answer was not usable ({problem}). {STILL_PLANNING}")
        feedback = answer.get("feedback") or ""
        comments = answer.get("comments") or []
        # An approval that came with feedback is a send-back: plan mode stays on (PM-19).
        revise: dict[str, Any] = {"outcome": "revise"}
        if feedback.strip():
            revise["feedback"] = feedback
        if comments:
            revise["comments"] = [{"line": c["line"], "text": c["text"]} for c in comments]
        if answer["choice"] == "approve":
            if feedback.strip() or comments:
                return ToolOutcome.failure(
                    APPROVED_WITH_FEEDBACK
                    + "\n"
                    + feedback_text(plan, feedback, comments)
                    + "\n"
                    + STILL_PLANNING,
                    review=revise,
                )
            self.controller.approve_exit()
            return ToolOutcome.success(json.dumps({"approved": True}), review={"outcome": "approved"})
        body = feedback_text(plan, feedback, comments) or NO_DETAILS
        return ToolOutcome.failure(f"{SENT_BACK}\n{body}\n{STILL_PLANNING}", review=revise)


def _answer_problem(answer: dict, asked_id: str) -> str | None:
    unknown = sorted(set(answer) - {"id", "choice", "feedback", "comments"})
    if unknown:
        return f"unexpected keys {', '.join(unknown)}"
    if answer.get("id") != asked_id:
        return "it answers another question"
    if answer.get("choice") not in ("approve", "revise"):
        return f"unknown choice {answer.get('choice')!r}"
    if "feedback" in answer and not isinstance(answer["feedback"], str):
        return "feedback is not text"
    comments = answer.get("comments", [])
    if not isinstance(comments, list):
        return "comments is not a list"
    for comment in comments:
        if (
            not isinstance(comment, dict)
            or set(comment) != {"line", "text"}
            or isinstance(comment["line"], bool)
            or not isinstance(comment["line"], int)
            or not isinstance(comment["text"], str)
        ):
            return "a comment is not {line: integer, text: string}"
    return None


def feedback_text(plan: str, feedback: str, comments: list[dict]) -> str:
    """The person's feedback, then each line comment with its line number and the text
    of that plan line, so the model can find the spot."""
    lines = plan.splitlines()
    parts = []
    if feedback.strip():
        parts.append(f"Feedback: {feedback.strip()}")
    for comment in comments:
        number = comment["line"]
        quoted = lines[number - 1] if 1 <= number <= len(lines) else "(no such line in the plan)"
        parts.append(f"Line {number}: {quoted}\n  Comment: {comment['text']}")
    return "\n".join(parts)
