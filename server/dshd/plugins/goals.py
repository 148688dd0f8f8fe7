"""The goals plugin: section ``goal:status``, tools ``goal_complete`` / ``goal_block``,
and the continuation driver (G-8, G-9, G-12, SPEC 6 last paragraph).

The goal tools write through :class:`GoalService` with the ref of the goal *as rendered
in the request the model is answering* (the last ``goal:status`` render). If the goal
changed since that request (a person edited, paused or cleared it), the write is
``stale-revision`` (or ``no-goal``) and the model gets a failed result saying so; it
sees the fresh values in its next request.

The continuation driver is one asyncio task per agent, started only by a person's
``create`` or ``resume`` (an "arm"): never by a load. While the goal is active and armed
and no turn runs it starts a turn with cause "continuation" whose ``user/message``
(source "plugin", plugin "goals") carries ``goalRound``; it stops when the goal is
disarmed, paused, blocked, complete or cleared, or when a budget is spent (then
``next_round`` blocks the goal with ``round-budget-exhausted`` or
``token-budget-exhausted``; it asks after every round, so a round that ends over the
token budget is the last).

Pausing (:func:`pause_goal`, what both doors call) stops the work first: the driver is
held so it starts no round, the running round is cancelled as ``dsh/agent/cancel`` would
(its ``turn/close`` says "cancelled", an open question is withdrawn), and only then is the
pause written. So "paused" is never shown while a round still streams, and no model
request starts while the goal is paused.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import attrs

from dshd.agent.config import Config
from dshd.agent.prompt import PromptContext, Section
from dshd.agent.tools import Tool, ToolContext, ToolDescription, ToolOutcome, argument_text
from dshd.errors import DshError
from dshd.folds.events import GoalRef
from dshd.services.goals import GoalNotice, GoalService, GoalView, goal_view

if TYPE_CHECKING:
    from dshd.agent.loop import Agent

log = logging.getLogger(__name__)

SECTION_ID = "goal:status"
SECTION_ORDER = 60

COMPLETE_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}
BLOCK_PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "lowercase-kebab-case reason code, e.g. dependency-conflict"},
        "message": {"type": "string", "description": "what stops the work, for the person"},
    },
    "required": ["code", "message"],
    "additionalProperties": False,
}


async def pause_goal(agent: "Agent", ref: Any) -> GoalView:
    """Pause the goal ``ref`` names, after its running round (if one runs) is cancelled."""
    plugin = agent.plugins.get("goals")
    if not isinstance(plugin, GoalsPlugin):
        raise DshError("plugin-not-loaded", 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml')
    return await plugin.pause(ref)


def describe_goal_complete(arguments: dict[str, Any]) -> ToolDescription:
    return ToolDescription("Report the goal complete")


def describe_goal_block(arguments: dict[str, Any]) -> ToolDescription:
    code = argument_text(arguments, "code")
    return ToolDescription(f"Report the goal blocked ({code})" if code else "Report the goal blocked")


async def _not_attached(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome.failure("goals are not attached to this agent")


def tools(config: Config | None) -> list[Tool]:
    """The goal tools as a catalogue lists them (the plugin binds their runs when it attaches)."""
    return [
        Tool(
            "goal_complete",
            "Report that the current goal is achieved.",
            COMPLETE_PARAMETERS,
            _not_attached,
            describe=describe_goal_complete,
        ),
        Tool(
            "goal_block",
            "Report that a problem stops work on the current goal (code and message).",
            BLOCK_PARAMETERS,
            _not_attached,
            describe=describe_goal_block,
        ),
    ]


def attach(agent: "Agent", config: Config) -> "GoalsPlugin":
    return GoalsPlugin(agent, config.goals.maxRounds, config.goals.maxTokens)


class GoalsPlugin:
    def __init__(self, agent: "Agent", max_rounds_default: int, max_tokens_default: int | None = None) -> None:
        self.agent = agent
        self.service = GoalService(agent.store, max_rounds_default, max_tokens_default)
        self.rendered_ref: GoalRef | None = None
        self.driver = ContinuationDriver(agent, self.service)
        agent.features.add(self.service)
        agent.on_cancel(self.service.disarm)  # a person's cancel ends the goal's run of rounds
        # G-24: its round and token counts change every round, so it goes after the history.
        agent.sections.add(Section(SECTION_ID, SECTION_ORDER, self.render_status, volatile=True))
        runs = {"goal_complete": self.goal_complete, "goal_block": self.goal_block}
        for tool in tools(None):
            agent.tools.add(attrs.evolve(tool, run=runs[tool.name]))
        # G-20: the goal's view says what the agent waits for (a plan review, an approval).
        agent.add_activity_listener(lambda state: self.service.set_waiting(state.question if state.activity == "waiting" else None))
        agent.on_close(self.service.add_listener(self.driver.on_notice))
        agent.on_close(self.driver.stop)
        agent.on_close(self.service.detach)

    async def pause(self, ref: Any) -> GoalView:
        service = self.service
        service.check_can("pause", ref)  # a stale ref or a goal that is not active cancels nothing
        self.driver.hold()
        try:
            turn = self.agent.store.state.turn
            if self.agent.turn_running and turn.open and turn.cause == "continuation":
                await self.agent.cancel_turn()
            return service.pause(ref)
        except BaseException:
            # Not paused (the round changed the goal, say): nothing runs now, so the goal
            # waits for a person's resume rather than claiming to be armed.
            if service.armed:
                service.disarm()
            raise
        finally:
            self.driver.release()

    # ---- section -------------------------------------------------------------------

    def render_status(self, ctx: PromptContext) -> str | None:
        view = goal_view(ctx.state.goal, self.service.armed)
        self.rendered_ref = None if view is None else view.ref
        if view is None:
            return None
        lines = [
            f"Current goal {view.id} (revision {view.revision}): {view.objective}",
            f"Phase: {view.phase}. Rounds: {view.rounds_started} of {view.max_rounds} started, {view.rounds_left} left.",
        ]
        if view.max_tokens is not None:
            lines.append(f"Tokens: {view.tokens_used} of {view.max_tokens} used by the rounds.")
        if view.blocked_reason is not None:
            lines.append(f"Blocked: {view.blocked_reason.code}: {view.blocked_reason.message}")
        if view.phase in ("active", "paused", "blocked"):
            lines.append(
                "When the goal is achieved call goal_complete; if a problem stops you, "
                "call goal_block with a kebab-case code and a message."
            )
        return "\n".join(lines)

    # ---- tools ---------------------------------------------------------------------

    async def goal_complete(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        if arguments:
            return ToolOutcome.failure(f"goal_complete takes no arguments; got {', '.join(sorted(arguments))}")
        return self._write(lambda ref: self.service.complete(ref), "complete")

    async def goal_block(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        unknown = sorted(set(arguments) - {"code", "message"})
        if unknown:
            return ToolOutcome.failure(f"goal_block takes code and message; unexpected: {', '.join(unknown)}")
        return self._write(
            lambda ref: self.service.block(ref, arguments.get("code"), arguments.get("message")), "blocked"
        )

    def _write(self, operation, done: str) -> ToolOutcome:
        ref = self.rendered_ref
        if ref is None:
            return ToolOutcome.failure("There was no goal in this request, so there is nothing to report on.")
        try:
            view = operation(ref)
        except DshError as exc:
            if exc.kind == "stale-revision":
                return ToolOutcome.failure(
                    f"The goal changed since this request ({exc.message}); "
                    "the next request shows it as it is now."
                )
            return ToolOutcome.failure(f"{exc.kind}: {exc.message}")
        return ToolOutcome.success(f"Goal {view.id} is now {view.phase} (revision {view.revision}).")


class ContinuationDriver:
    def __init__(self, agent: "Agent", service: GoalService) -> None:
        self.agent = agent
        self.service = service
        self.task: asyncio.Task | None = None
        self.stopped = False
        self.held = False  # a pause is under way: start no round

    def on_notice(self, notice: GoalNotice) -> None:
        # Only a person's arming starts the driver: create, resume, re-arm.
        if notice.op in ("create", "resume", "arm"):
            self.kick()

    def kick(self) -> None:
        if self.stopped or (self.task is not None and not self.task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            log.warning("goal armed outside an event loop: no continuation driver")
            return
        self.task = loop.create_task(self._run(), name=f"goal-driver-{self.agent.agent_id}")

    def hold(self) -> None:
        self.held = True

    def release(self) -> None:
        self.held = False

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def _run(self) -> None:
        while not self.stopped and not self.agent.closed:
            await self.agent.wait_idle()
            if self.stopped or self.held or self.agent.closed or not self.service.armed:
                return
            if self.agent.store.state.turn.open:
                await asyncio.sleep(0)
                continue
            goal_round = self.service.next_round()  # None: disarmed, or the budget is spent
            if goal_round is None:
                return
            view = self.service.get()
            objective = view.objective if view is not None else ""
            text = (
                f"Continue working on the goal: {objective}\n"
                f"(round {goal_round.round} of {view.max_rounds if view else '?'})"
            )
            try:
                task = self.agent.start_turn(
                    text, cause="continuation", source="plugin", plugin="goals", goal_round=goal_round
                )
            except DshError as exc:
                if exc.kind == "turn-open":
                    continue
                log.warning("continuation round not started: %s", exc)
                return
            except Exception:
                log.exception("continuation round not started")
                return
            await asyncio.wait({task})
