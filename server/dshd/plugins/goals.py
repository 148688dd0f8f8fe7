"""The goals plugin: sections ``goal:objective`` and ``goal:status`` (volatile: its counts
go after the history), tools ``goal_complete`` / ``goal_block``,
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
from dshd.agent.tools import Change, Tool, ToolContext, ToolDescription, ToolOutcome, argument_text
from dshd.errors import DshError
from dshd.folds.events import GoalCheck, GoalRef
from dshd.formats import clip
from dshd.tools.run import RunCommand
from dshd.services.acting import unattributed
from dshd.services.goals import GoalNotice, GoalService, GoalView, goal_view

if TYPE_CHECKING:
    from dshd.agent.loop import Agent

log = logging.getLogger(__name__)

SECTION_ID = "goal:status"
SECTION_ORDER = 60
# G-24: what stays the same from round to round (the goal, what to call when done) is a
# section of the system text; goal:status, the counts that move every round, is volatile:
# it goes after the history, so a prompt cache reuses everything before it.
OBJECTIVE_SECTION_ID = "goal:objective"

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
        raise DshError("plugin-not-loaded", 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml', plugin="goals")
    return await plugin.pause(ref)


def describe_goal_complete(arguments: dict[str, Any]) -> ToolDescription:
    return ToolDescription("Report the goal complete")


def describe_checked_goal_complete(arguments: dict[str, Any]) -> ToolDescription:
    return ToolDescription("Report the goal complete (runs its check)", "execute")


def describe_goal_block(arguments: dict[str, Any]) -> ToolDescription:
    code = argument_text(arguments, "code")
    return ToolDescription(f"Report the goal blocked ({code})" if code else "Report the goal blocked")


async def _not_attached(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome.failure("goals are not attached to this agent")


def tools(config: Config | None) -> list[Tool]:
    """The goal tools as a catalogue lists them (the plugin binds their runs when it attaches).
    With ``[goals] check``, goal_complete runs a command: it is an ``exec`` tool, so it
    needs the approvals any command needs (agent/approvals.py asks with the command)."""
    check = config.goals.check if config is not None else None
    complete = Tool(
        "goal_complete",
        "Report that the current goal is achieved.",
        COMPLETE_PARAMETERS,
        _not_attached,
        describe=describe_goal_complete,
    )
    if check is not None:
        complete = attrs.evolve(
            complete,
            description="Report that the current goal is achieved. This first runs the goal's check command; "
            "the goal is complete only if it passes (otherwise you get its output and the goal stays active).",
            mutability="exec",
            describe=describe_checked_goal_complete,
        )
    return [
        complete,
        Tool(
            "goal_block",
            "Report that a problem stops work on the current goal (code and message).",
            BLOCK_PARAMETERS,
            _not_attached,
            describe=describe_goal_block,
        ),
    ]


def attach(agent: "Agent", config: Config) -> "GoalsPlugin":
    return GoalsPlugin(agent, config.goals.maxRounds, config.goals.maxTokens, config=config)


class GoalsPlugin:
    def __init__(
        self, agent: "Agent", max_rounds_default: int, max_tokens_default: int | None = None, config: Config | None = None
    ) -> None:
        self.agent = agent
        self.check = config.goals.check if config is not None else None  # G-23: run before the model's complete
        # The run tool's own machinery: the live sandbox policy, the allowlisted environment.
        self.run_check = RunCommand(*((config.tools.env, config.tools.unixSockets) if config is not None else ()))
        self.service = GoalService(agent.store, max_rounds_default, max_tokens_default)
        self.rendered_ref: GoalRef | None = None
        self.driver = ContinuationDriver(agent, self.service)
        agent.features.add(self.service)
        agent.on_cancel(self.service.disarm)  # a person's cancel ends the goal's run of rounds
        agent.sections.add(Section(OBJECTIVE_SECTION_ID, SECTION_ORDER, self.render_objective))
        agent.sections.add(Section(SECTION_ID, SECTION_ORDER, self.render_status, volatile=True))
        runs = {"goal_complete": self.goal_complete, "goal_block": self.goal_block}
        for tool in tools(config):
            if tool.name == "goal_complete" and self.check is not None:
                tool = attrs.evolve(tool, preview=self.preview_check)
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

    def render_objective(self, ctx: PromptContext) -> str | None:
        view = goal_view(ctx.state.goal, self.service.armed)
        if view is None:
            return None
        # No id or revision here: the same objective is the same text (and cached prefix)
        # in any session; goal:status names the goal.
        lines = [f"Current goal: {view.objective}"]
        if view.phase in ("active", "paused", "blocked"):
            lines.append(
                "When the goal is achieved call goal_complete; if a problem stops you, "
                "call goal_block with a kebab-case code and a message."
            )
        return "\n".join(lines)

    def render_status(self, ctx: PromptContext) -> str | None:
        view = goal_view(ctx.state.goal, self.service.armed)
        self.rendered_ref = None if view is None else view.ref
        if view is None:
            return None
        lines = [
            f"Goal {view.id} (revision {view.revision}) is {view.phase}. "
            f"Rounds: {view.rounds_started} of {view.max_rounds} started, {view.rounds_left} left."
        ]
        if view.max_tokens is not None:
            about = " (an estimate from characters/4: the server reports no usage)" if view.tokens_estimated else ""
            lines.append(f"Tokens: {view.tokens_used} of {view.max_tokens} used by the rounds{about}.")
        if view.blocked_reason is not None:
            lines.append(f"Blocked: {view.blocked_reason.code}: {view.blocked_reason.message}")
        return "\n".join(lines)

    # ---- tools ---------------------------------------------------------------------

    async def goal_complete(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        if arguments:
            return ToolOutcome.failure(f"goal_complete takes no arguments; got {', '.join(sorted(arguments))}")
        if self.check is None:
            return self._write(lambda ref: self.service.complete(ref), "complete")
        refused = self._refused_complete()
        if refused is not None:
            return refused
        # G-23: the check runs as run_command runs a command (approved already by the
        # runner, as an exec call): exit 0 completes, anything else leaves the goal active.
        ran = await self.run_check(ctx, {"command": self.check})
        tail = check_output_tail(ran.content)
        if not ran.ok:
            return ToolOutcome.failure(
                f"Not complete: the goal's check `{self.check}` did not pass, so the goal stays active.\n{tail}\n"
                "Fix what it reports, then call goal_complete again."
            )
        check = GoalCheck(command=self.check, callId=ctx.call_id)
        written = self._write(lambda ref: self.service.complete(ref, check=check), "complete")
        if not written.ok:
            return written
        return ToolOutcome.success(f"The goal's check `{self.check}` passed.\n{tail}\n{written.content}")

    async def preview_check(self, ctx: ToolContext, arguments: dict[str, Any]) -> Change | ToolOutcome:
        """What the person approves before the check runs (the command and its folder); a
        call that could not complete the goal anyway is refused before anyone is asked."""
        if arguments:
            return ToolOutcome.failure(f"goal_complete takes no arguments; got {', '.join(sorted(arguments))}")
        refused = self._refused_complete()
        if refused is not None:
            return refused
        return Change(title=f"Run the goal's check `{clip(self.check or '', 80)}`", command=self.check, cwd=str(ctx.root))

    def _refused_complete(self) -> ToolOutcome | None:
        ref = self.rendered_ref
        if ref is None:
            return ToolOutcome.failure("There was no goal in this request, so there is nothing to report on.")
        try:
            self.service.check_can("complete", ref)
        except DshError as exc:
            return self._refusal(exc)
        return None

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
            return self._refusal(exc)
        return ToolOutcome.success(f"Goal {view.id} is now {view.phase} (revision {view.revision}).")


    @staticmethod
    def _refusal(exc: DshError) -> ToolOutcome:
        if exc.kind == "stale-revision":
            return ToolOutcome.failure(
                f"The goal changed since this request ({exc.message}); the next request shows it as it is now."
            )
        return ToolOutcome.failure(f"{exc.kind}: {exc.message}")


CHECK_TAIL_LINES = 40
CHECK_TAIL_CHARS = 4000


def check_output_tail(content: str) -> str:
    """A check's result as the model reads it: the run's first line (exit code, sandbox),
    then the last lines of its output (where test runners print their summary)."""
    head, _, output = content.partition("\n")
    lines = output.splitlines()
    kept = lines[-CHECK_TAIL_LINES:]
    text = "\n".join(kept)
    if len(text) > CHECK_TAIL_CHARS:
        text = text[-CHECK_TAIL_CHARS:]
    cut = f"[the first {len(lines) - len(kept)} lines of its output are left out]\n" if len(kept) < len(lines) else ""
    return f"{head}\n{cut}{text}" if text else head


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
        # Its rounds and what they end in are nobody's act (the person's arming is logged on its own).
        self.task = loop.create_task(self._run(), name=f"goal-driver-{self.agent.agent_id}", context=unattributed())

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
                    # A person's turn won the race (wait_idle waits for it), or turns are
                    # held (a checkpoint restore runs): yield, never spin.
                    await asyncio.sleep(0.05)
                    continue
                log.warning("continuation round not started: %s", exc)
                return
            except Exception:
                log.exception("continuation round not started")
                return
            await asyncio.wait({task})
