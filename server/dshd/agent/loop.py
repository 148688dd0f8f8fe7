"""The agent: one live instance of a loaded session, running its turns and steps.

A turn::

    turn/open {turn, cause}  user/message            (committed before prompt() yields)
    step*:  propose -> pre-step chain (plan listener first) -> accepted:
              steered user/messages -> request/header -> model call ->
              assistant/message, tool/call* -> tool-step "before" hooks ->
              run tools -> tool/result* -> tool-step "after" hooks
            or, when the request would be too big (or /compact asked for it), a
            compaction step: request/header (sections ["context:compact"], no tools) ->
              summary call -> context/compact; then the next step is proposed
    turn/close {turn, stopReason, error?}

Stop reasons: "end-turn" (a reply without tool calls and nothing steered in),
"cancelled" (:meth:`Agent.cancel`), "rejected" (a step was rejected
``maxStepRetries + 1`` times in a row), "max-steps" (``[agent] maxSteps`` steps ran and
the model still called tools), "model-error" (the call failed or its stream broke the
contract, or the context could not be made to fit; ``turn/close`` then carries
``error: {kind, message}``), "compacted" (a turn opened by ``/compact``), "interrupted"
(written on load for a turn the log left open: the process died mid-turn; nothing resumes it), "forked" (written in a fork whose cut fell inside a turn).
Every tool call gets a result: calls a turn cannot finish get a failed ``tool/result``
("cancelled", "interrupted", ...) before the ``turn/close``, so every transcript is well
formed for the model.

``steer(text)``: while a turn runs the text is queued and recorded as an ordinary
``user/message`` (source "user") at the next accepted step, before its request; a turn
whose reply has no tool calls takes one more step when steered text is waiting, and text
no step took is recorded just before the ``turn/close``. With no
turn running, ``steer`` starts a turn with cause "steer" in the background and returns
False (``prompt`` is the way to wait for a turn).

Compaction (docs/context.md): before a step whose request is estimated over
``[context] compactAt`` x ``[model] contextWindow`` the loop asks the model for a
summary and commits ``context/compact``; the transcript (agent/transcript.py) is from
then on that summary plus the events after ``throughSeq``. Compaction steps do not count
towards ``[agent] maxSteps``.

The loop imports no plugin. Plugins add sections, tools, commands, pre-step listeners and
tool-step hooks (agent/tool_steps.py) through the registries here, and may start turns with :meth:`Agent.start_turn`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from dshd.agent import compaction, transcript
from dshd.services.acting import acting, unattributed, with_client
from dshd.agent.call_ids import CallIds, ReplyCallIds
from dshd.agent.activity import Activity, ActivityListener, AskingApprovals, AskingQuestions
from dshd.agent.approvals import Approvals, NoApprovals, Permissions, run_tool
from dshd.agent.commands import Command, CommandRegistry
from dshd.agent.config import Config
from dshd.agent.deltas import AgentDelta, DeltaListener
from dshd.agent.features import Features
from dshd.agent.prompt import PromptContext, RenderedPrompt, SectionRegistry
from dshd.agent.questions import NoQuestions, UserQuestions
from dshd.agent.steps import PreStepChain, StepProposal
from dshd.agent.tool_steps import ToolSteps
from dshd.agent.tools import ToolCatalogue, ToolContext, ToolOutcome
from dshd.agent.turn_end import TurnEnd
from dshd.errors import DshError
from dshd.folds.events import GoalRound, ToolCall, ToolResult
from dshd.models import (
    Message,
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
    ReplyAssembler,
    Retrying,
    TextDelta,
    ToolCallDelta,
)
from dshd.models.collect import output_limit_error
from dshd.models.usage import usage_record

if TYPE_CHECKING:
    from dshd.services.store import SessionStore

log = logging.getLogger(__name__)


def tool_arguments_cap(max_write_bytes: int) -> int:
    """The most characters of JSON text one tool call's arguments may have: room for the
    largest write (``[tools] maxWriteBytes``) even when JSON escaping doubles it (newlines,
    quotes, non-ASCII sent as escapes), plus 1 MiB for the other arguments. Past it the
    call is not run and nothing more of it is kept or forwarded (models/collect.py)."""
    return 2 * max_write_bytes + 1024 * 1024


# The most characters of one call's arguments sent live (tool-arguments deltas): a
# preview for people; the recorded call follows with the whole of them.
LIVE_ARGUMENTS_CHARS = 256 * 1024


def _said(end: TurnEnd) -> TurnEnd:
    """A prompt's turn that stopped on a disk error answers with it (``io-error`` naming
    the path and the OS error), not with a bare stop reason; any other end as it is."""
    error = end.error or {}
    if end.stop_reason == "error" and error.get("kind") == "io-error":
        data = {k: v for k, v in error.items() if k not in ("kind", "message")}
        raise DshError("io-error", f"turn {end.turn} stopped: {error.get('message')}", **data)
    return end


def new_agent_id() -> str:
    return "a-" + secrets.token_hex(8)


class Agent:
    def __init__(
        self,
        store: "SessionStore",
        config: Config,
        model: ModelAdapter,
        *,
        questions: UserQuestions | None = None,
        approvals: Approvals | None = None,
        root: Path | None = None,
        left_open_reason: str = "interrupted",
    ) -> None:
        self.agent_id = new_agent_id()
        self.store = store
        self.config = config
        self.model = model
        # idle / working / waiting, as a person reads it (agent/activity.py): the seams
        # that wait for the person are counted while they wait.
        self.activity = Activity()
        self.questions: UserQuestions = AskingQuestions(questions or NoQuestions(), self.activity)
        self.approvals: Approvals = AskingApprovals(approvals or NoApprovals(), self.activity)
        # The workspace the tools work in (the log is <root>/.dsh/sessions/<id>/log.jsonl).
        self.root = (root if root is not None else store.path.parents[3]).resolve()
        # The live sandbox/approval policy: from config at every load, in process only.
        self.permissions = Permissions(config.tools)
        # What plugins offer the doors (the plan controller, the goal service), by type.
        self.features = Features()
        self.sections = SectionRegistry()
        self.tools = ToolCatalogue()
        self.commands = CommandRegistry()
        self.pre_step = PreStepChain()
        self.tool_steps = ToolSteps()  # hooks around a step's tools (agent/tool_steps.py)
        self._turn_holds: list[str] = []  # why no turn may open now (hold_turns), in process only
        self.plugins: dict[str, Any] = {}  # name -> the plugin's object, set by the Workspace
        self.closed = False
        self._turn_task: asyncio.Task | None = None
        self._steered: list[dict[str, Any]] = []  # user/message data queued for the running turn
        self._cancelled_by: str | None = None  # the client whose cancel ends the running turn
        self._open_calls: list[str] = []  # tool calls of the running step without a result
        self._call_ids = CallIds(store)  # each call's own id in the session (agent/call_ids.py)
        self._detachers: list[Callable[[], None]] = []
        self._async_closers: list[Callable[[], Awaitable[None]]] = []
        # Awaited before each turn's first step (an MCP plugin's servers starting).
        self._request_gates: list[Callable[[], Awaitable[None]]] = []
        self._cancel_hooks: list[Callable[[], None]] = []
        self._delta_listeners: list[DeltaListener] = []
        self._tool_start_listeners: list[Callable[[str], None]] = []
        # Built from the log on first use (a model request), not at load: opening a session
        # then costs only the checkpoint and the tail, however long the log is; building it
        # reads only from the last compaction on (agent/transcript.py).
        self._transcript: transcript.Transcript | None = None
        # /compact: the focus text of a compaction asked for and not yet done (in process only).
        self._compact_asked: str | None = None
        self._turn_error: dict[str, str] | None = None  # turn/close.error of the ending turn
        # The disk error (io-error) a turn stopped on, until a turn/close says it (failure).
        self._turn_failure: DshError | None = None
        self.commands.add(
            Command("compact", "/compact [focus]: replace the conversation so far with a summary", self._compact_command)
        )
        self._detachers.append(store.add_listener(self._follow))
        self._close_left_open_turn(left_open_reason)

    @property
    def session_id(self) -> str:
        return self.store.session_id

    # ---- plugin wiring -------------------------------------------------------------------

    def on_cancel(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when a person cancels (before the turn ends: the goals plugin
        disarms here, so its driver starts no next round)."""
        self._cancel_hooks.append(fn)

    def hold_turns(self, reason: str) -> Callable[[], None]:
        """Refuse to open turns (``turn-open`` saying ``reason``) until the returned release
        is called: a checkpoint restore changes the files and records itself between turns."""
        self._turn_holds.append(reason)

        def release() -> None:
            if reason in self._turn_holds:
                self._turn_holds.remove(reason)

        return release

    def on_close(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the agent closes (plugins detach here)."""
        self._detachers.append(fn)

    def on_aclose(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Await ``fn()`` when the agent is closed with :meth:`aclose`, after ``close()``
        ran every ``on_close`` hook (a plugin that stops processes waits for them here)."""
        self._async_closers.append(fn)

    def add_request_gate(self, fn: Callable[[], Awaitable[None]]) -> Callable[[], None]:
        """Await ``fn()`` at the start of every turn, before its first request is made
        (the mcp plugin: until its servers are up or failed, so their tools are offered).
        A gate that raises is logged and passed."""
        self._request_gates.append(fn)

        def remove() -> None:
            if fn in self._request_gates:
                self._request_gates.remove(fn)

        return remove

    def add_event_listener(self, fn: Callable[[Any], None]) -> Callable[[], None]:
        """``fn(event)`` for each event this agent's store commits; returns a remover."""
        remove = self.store.add_listener(fn)
        self._detachers.append(remove)
        return remove

    def add_delta_listener(self, fn: DeltaListener) -> Callable[[], None]:
        """``fn(delta)`` for each live delta of this agent's model calls; returns a remover."""
        self._delta_listeners.append(fn)

        def remove() -> None:
            if fn in self._delta_listeners:
                self._delta_listeners.remove(fn)

        self._detachers.append(remove)
        return remove

    def add_tool_start_listener(self, fn: Callable[[str], None]) -> Callable[[], None]:
        """``fn(call_id)`` when a tool call starts running (after its approval, if asked)."""
        self._tool_start_listeners.append(fn)

        def remove() -> None:
            if fn in self._tool_start_listeners:
                self._tool_start_listeners.remove(fn)

        self._detachers.append(remove)
        return remove

    def _tool_started(self, call_id: str) -> None:
        for fn in list(self._tool_start_listeners):
            try:
                fn(call_id)
            except Exception:
                log.exception("tool start listener failed")

    def add_activity_listener(self, fn: ActivityListener) -> Callable[[], None]:
        """``fn(state)`` each time the agent's activity (idle/working/waiting) changes."""
        remove = self.activity.add_listener(fn)
        self._detachers.append(remove)
        return remove

    def _emit_delta(self, delta: AgentDelta) -> None:
        # A failing listener never disturbs the model call (deltas are not the truth).
        for fn in list(self._delta_listeners):
            try:
                fn(delta)
            except Exception:
                log.exception("delta listener failed")

    # ---- state -----------------------------------------------------------------------

    @property
    def turn_running(self) -> bool:
        return self._turn_task is not None and not self._turn_task.done()

    def transcript(self) -> list[Message]:
        return list(self._messages())

    def _messages(self) -> list[Message]:
        return self._built_transcript().messages

    def _built_transcript(self) -> transcript.Transcript:
        if self._transcript is None:
            self._transcript = transcript.build(self.store)
        return self._transcript

    async def wait_idle(self) -> None:
        """Return once no turn is running (never cancels the running turn)."""
        while self.turn_running:
            assert self._turn_task is not None
            await asyncio.wait({self._turn_task})

    # ---- the public operations ----------------------------------------------------------

    async def prompt(self, text: str) -> TurnEnd:
        """Run a turn for ``text`` and return its :class:`TurnEnd` when it ends.

        Text starting with "/" runs a command; if the command started a turn this waits
        for it, otherwise it returns ``TurnEnd(None, "command")``.
        """
        self._require_live()
        if not isinstance(text, str) or not text.strip():
            raise DshError("invalid-params", "text must be non-empty", field="text")
        if text.startswith("/"):
            command, rest = self.commands.resolve(text)
            before = self._turn_task
            await command.run(self, rest)
            if self._turn_task is not None and self._turn_task is not before:
                return _said(await self._turn_task)
            return TurnEnd(None, "command")
        task = self.start_turn(text, cause="prompt")
        return _said(await task)

    def steer(self, text: str) -> bool:
        """Queue ``text`` for the running turn (True), or start a turn with cause
        "steer" in the background (False)."""
        self._require_live()
        if not isinstance(text, str) or not text.strip():
            raise DshError("invalid-params", "text must be non-empty", field="text")
        if self.turn_running:
            self._steered.append(with_client({"text": text, "source": "user"}, acting.get()))
            return True
        self.start_turn(text, cause="steer")
        return False

    async def cancel(self) -> None:
        """End the running turn with "cancelled" (an open question is withdrawn with
        it: the tool fails closed) and disarm the goal (no durable change)."""
        self._require_live()
        self._cancelled_by = acting.get()  # the turn/close names who stopped it
        # Hooks first (the goal disarms), so the continuation driver sees it when the turn ends.
        for hook in list(self._cancel_hooks):
            hook()
        try:
            await self.cancel_turn()
        finally:
            self._cancelled_by = None  # no turn ran, or its turn/close took it

    async def cancel_turn(self) -> None:
        """End the running turn with "cancelled" as :meth:`cancel` does, leaving the goal
        alone (pausing a goal cancels its round this way, then writes the pause)."""
        self._require_live()
        self._compact_asked = None
        task = self._turn_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    def start_turn(
        self,
        text: str,
        *,
        cause: str,
        source: str = "user",
        plugin: str | None = None,
        goal_round: GoalRound | None = None,
    ) -> asyncio.Task:
        """Open a turn now (turn/open and its user/message are durable when this returns)
        and run its steps in a task. ``turn-open`` if a turn is running."""
        turn = self._open_turn(cause)
        message: dict[str, Any] = {"text": text, "source": source}
        if plugin is not None:
            message["plugin"] = plugin
        if goal_round is not None:
            message["goalRound"] = msgspec.to_builtins(goal_round)
        elif source == "user":
            with_client(message, acting.get())
        try:
            self.store.commit("user/message", message, turn=turn)
        except Exception:
            # The turn cannot start (e.g. a stale goalRound): close it, report the cause.
            self.store.commit("turn/close", {"turn": turn, "stopReason": "rejected"}, turn=turn)
            raise
        return self._run_in_task(turn)

    def _open_turn(self, cause: str) -> int:
        self._require_live()
        if self.turn_running:
            raise DshError("turn-open", "a turn is running: use steer, or cancel it first")
        if self._turn_holds:
            raise DshError("turn-open", f"{self._turn_holds[0]}: try again when it is done")
        if self.store.state.turn.open:
            # Open with nothing running: its turn/close could not be written (disk full,
            # read-only; io-error was answered). Close it now, before the new turn.
            self._close_left_open_turn("error")
        turn = self.store.state.turn.last_turn + 1
        self.store.commit("turn/open", {"turn": turn, "cause": cause}, turn=turn)
        return turn

    def _run_in_task(self, turn: int) -> asyncio.Task:
        # What the turn does is nobody's act (the client whose prompt opened it is on its message).
        self._turn_task = asyncio.get_running_loop().create_task(self._run_turn(turn), name=f"turn-{turn}", context=unattributed())
        return self._turn_task

    async def _compact_command(self, agent: "Agent", rest: str) -> None:
        """``/compact [focus]``: with a turn running, the compaction comes before its next
        model request (or the next turn's first); otherwise a turn of its own (cause
        "compact", no user message) does it and ends "compacted"."""
        if self.turn_running or self.store.state.turn.open:
            self._compact_asked = rest
            return
        if not self._built_transcript().compactable:
            raise DshError(
                "invalid-params", "nothing to compact: the conversation is empty or was just compacted", field="text"
            )
        self._compact_asked = rest
        self._run_in_task(self._open_turn("compact"))

    def close(self) -> None:
        """Stop everything this agent runs and release the session. The running turn is
        cancelled without writing (the log keeps it open; the next load closes it as
        "interrupted")."""
        if self.closed:
            return
        self.closed = True
        if self._turn_task is not None and not self._turn_task.done():
            self._turn_task.cancel()
        for detach in reversed(self._detachers):
            try:
                detach()
            except Exception:
                log.exception("detaching from agent %s failed", self.agent_id)
        self._detachers.clear()
        self.store.close()

    async def aclose(self) -> None:
        task = self._turn_task
        closers, self._async_closers = self._async_closers, []
        self.close()
        if task is not None and not task.done():
            await asyncio.wait({task})
        for closer in closers:
            try:
                await closer()
            except Exception:
                log.exception("closing agent %s: a plugin's close failed", self.agent_id)

    # ---- turns and steps -------------------------------------------------------------

    async def _run_turn(self, turn: int) -> TurnEnd:
        self._turn_error = None
        self.activity.turn(True)
        try:
            return await self._run_turn_steps(turn)
        finally:
            self.activity.turn(False)

    async def _run_turn_steps(self, turn: int) -> TurnEnd:
        try:
            reason = await self._steps(turn)
        except asyncio.CancelledError:
            reason = "cancelled"
            if self.closed:
                return TurnEnd(turn, reason)
        except ModelError as exc:
            log.warning("turn %d of session %s: model error (%s): %s", turn, self.session_id, exc.kind, exc.message)
            reason, self._turn_error = "model-error", exc.to_dict()
        except DshError as exc:  # e.g. io-error (disk full): said to the client, no traceback here
            log.warning("turn %d of session %s stopped: %s", turn, self.session_id, exc.message)
            reason = "error"
            if exc.kind == "io-error":  # said where the person looks: the chat and the prompt's answer
                self._turn_failure = exc
        except Exception:
            log.exception("turn %d of session %s failed", turn, self.session_id)
            reason = "error"
        failure = self._turn_failure if reason == "error" else None
        if not self.closed and self.store.state.turn.open:
            try:
                self._close_turn(turn, reason)
            except DshError as exc:
                if failure is None:
                    raise
                # The disk still refuses: the turn stays open in the log, and the next turn's
                # open closes it, saying this failure (it is kept until written).
                log.warning("turn %d of session %s: its close could not be written either: %s", turn, self.session_id, exc.message)
        if failure is not None:
            return TurnEnd(turn, reason, {"kind": failure.kind, "message": failure.message, **failure.data})
        return TurnEnd(turn, reason)

    def _close_turn(self, turn: int, reason: str) -> None:
        for call_id in self._open_calls:
            self.store.commit("tool/result", {"callId": call_id, "ok": False, "content": f"not run: turn {reason}"}, turn=turn)
        self._open_calls = []
        # Steered text no step took (max-steps, rejected, cancelled) is still recorded:
        # nothing the person said is dropped, and the next turn's model sees it.
        while self._steered:
            self.store.commit("user/message", self._steered.pop(0), turn=turn)
        close: dict[str, Any] = {"turn": turn, "stopReason": reason}
        cancelled_by, self._cancelled_by = self._cancelled_by, None
        if reason == "cancelled":
            with_client(close, cancelled_by)
        error, self._turn_error = self._turn_error, None
        if error is not None:
            close["error"] = error
        if reason == "error" and self._turn_failure is not None:
            close["failure"] = self._turn_failure.message
        self.store.commit("turn/close", close, turn=turn)
        self._turn_failure = None

    def _close_left_open_turn(self, reason: str) -> None:
        state = self.store.state.turn
        if state.open:
            self._open_calls = self._calls_without_results()
            self._close_turn(state.last_turn, reason)

    def _calls_without_results(self) -> list[str]:
        """The open tool batch's calls that have no result, in call order. The fold knows
        the batch (its first call's seq): only the batch is read, never the transcript, so
        closing a turn a crash left open costs what a clean open costs."""
        context = self.store.state.context
        if not context.pending_calls:
            return []
        open_calls: list[str] = []

        def follow(event) -> None:
            if isinstance(event, ToolCall):
                open_calls.append(event.data.callId)
            elif isinstance(event, ToolResult) and event.data.callId in open_calls:
                open_calls.remove(event.data.callId)

        self.store.each_event(follow, after_seq=context.batch_from - 1)
        return open_calls

    async def _steps(self, turn: int) -> str:
        agent_config = self.config.agent
        compact_turn = self.store.state.turn.cause == "compact"
        step = 0  # request/header steps, compaction requests included
        model_steps = 0  # steps that asked for a reply (what [agent] maxSteps counts)
        just_compacted = False
        for gate in list(self._request_gates):
            try:
                await gate()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("a request gate failed in turn %d; the turn goes on", turn)
        while True:
            if model_steps >= agent_config.maxSteps:
                return "max-steps"
            attempt = 1
            while True:
                decision = self.pre_step.run(StepProposal(turn=turn, step=step + 1, attempt=attempt))
                if decision.accepted:
                    break
                log.info("step %d of turn %d rejected: %s", step + 1, turn, decision.reason)
                if attempt > agent_config.maxStepRetries:
                    return "rejected"
                attempt += 1
                await asyncio.sleep(0)
            step += 1
            while self._steered:
                self.store.commit("user/message", self._steered.pop(0), turn=turn)
            rendered = self._render(turn, step)
            fit = await self._fit_context(turn, step, rendered, first_of_compact_turn=compact_turn and step == 1,
                                          just_compacted=just_compacted)
            if fit == "overflow":
                return "model-error"
            just_compacted = fit == "compacted"
            if just_compacted:
                if compact_turn and not self._steered:
                    return "compacted"
                continue  # the next step is proposed (and checked) like any other
            request = self._derive_request(turn, step, rendered)
            model_steps += 1
            reply_ids = self._call_ids.for_reply(turn, step)
            reply = await self._call_model(turn, step, request, ids=reply_ids)
            usage = reply.usage
            # Both counts or none: a half-reported usage is not written as if it were whole.
            reported = usage.input_tokens is not None and usage.output_tokens is not None
            cut = reply.stop_reason == "max-tokens"
            # A reply of tool calls alone still gets its message when there is usage to record.
            if reply.text or reported or not (reply.tool_calls or cut):
                message: dict[str, Any] = {"text": reply.text}
                if reported:
                    message["usage"] = usage_record(usage)
                self.store.commit("assistant/message", message, turn=turn)
            if cut:  # its text and tokens are recorded; the turn ends saying why (G-25)
                raise output_limit_error(self.config.model.maxOutputTokens, reply.cut_calls)
            for call in reply.tool_calls:
                call_data: dict[str, Any] = {"callId": call.call_id, "name": call.name, "arguments": call.arguments}
                provider_id = reply_ids.provider_id(call.call_id)
                if provider_id is not None:
                    call_data["providerCallId"] = provider_id
                self.store.commit("tool/call", call_data, turn=turn)
                self._open_calls.append(call.call_id)
            step_calls = self._step_calls(reply.tool_calls)
            if step_calls:
                await self.tool_steps.before(turn, step, step_calls)
            for call in reply.tool_calls:
                ctx = ToolContext(call.call_id, turn, step, self.root, self.permissions.policy)
                if call.refused is not None:  # its arguments were over the cap: never run
                    outcome = ToolOutcome.failure(call.refused)
                else:
                    outcome = await self._run_tool(ctx, call.name, call.arguments)
                result: dict[str, Any] = {"callId": call.call_id, "ok": outcome.ok, "content": outcome.content}
                if outcome.review is not None:
                    result["review"] = outcome.review
                self.store.commit("tool/result", result, turn=turn)
                self._open_calls.remove(call.call_id)
            if step_calls:
                await self.tool_steps.after(turn, step, step_calls)
            if not reply.tool_calls and not self._steered:
                return "end-turn"

    def _step_calls(self, calls) -> list[tuple[str, str]]:
        """Each call's tool name and the catalogue's mutability (an unknown tool cannot run:
        "read")."""
        out = []
        for call in calls:
            tool = self.tools.get(call.name)
            out.append((call.name, tool.mutability if tool is not None else "read"))
        return out

    async def _fit_context(
        self, turn: int, step: int, rendered: RenderedPrompt, *, first_of_compact_turn: bool, just_compacted: bool
    ) -> str:
        """Before a step's request: "send" it, or this step "compacted" the context, or the
        context cannot be made to fit ("overflow": the turn ends, ``_turn_error`` says why).

        A compaction runs when ``/compact`` asked for one, or when the request is estimated
        over ``compactAt`` x ``contextWindow``, something can be compacted and the step
        before was not already a compaction."""
        # The history first: if the log under the checkpoint cannot be read, no header
        # claims a request that was never made.
        history = self._built_transcript()
        window = self.config.model.contextWindow
        forced = self._compact_asked
        if forced is None and first_of_compact_turn:
            forced = ""  # a /compact turn's first step compacts, whatever happened since
        estimate = 0
        if window is not None or forced is not None:
            estimate = compaction.estimate_request(rendered.all_text, self.tools.specs(), history)
        due = window is not None and estimate > self.config.context.compactAt * window
        if forced is not None or (due and not just_compacted and history.compactable):
            self._compact_asked = None
            failure = await self._compact(turn, step, rendered, estimate, forced or "")
            if failure is not None:
                self._turn_error = {"kind": "context-overflow", "message": failure}
                return "overflow"
            return "compacted"
        if window is not None and estimate > window:
            self._turn_error = {
                "kind": "context-overflow",
                "message": f"the request needs about {estimate} tokens, more than [model] contextWindow "
                f"({window}), and compacting cannot make it smaller",
            }
            return "overflow"
        return "send"

    async def _call_model(
        self, turn: int, step: int, request: ModelRequest, *, live: bool = True, ids: ReplyCallIds | None = None
    ) -> ModelReply:
        """One model call, consumed event by event: text and tool-argument pieces and
        retries go to the delta listeners as they arrive; the reply is returned only
        when complete (a broken stream raises ModelError and nothing is recorded).
        ``live=False`` (a compaction's summary, which is not the assistant's reply):
        only retries are announced. With ``ids``, the reply's calls (and their live
        pieces) carry the session's own call ids, not the provider's."""
        ids = ids or self._call_ids.for_reply(turn, step)
        assembler = ReplyAssembler(
            tool_arguments_cap(self.config.tools.maxWriteBytes), "twice [tools] maxWriteBytes plus 1 MiB"
        )
        live_sent: dict[int, int] = {}  # call index -> characters of arguments sent live
        stream = self.model.stream(request)
        try:
            async for event in stream:
                assembler.feed(event)
                if not live and not isinstance(event, Retrying):
                    continue
                if isinstance(event, TextDelta):
                    if event.text:
                        self._emit_delta(AgentDelta(turn, step, "text", text=event.text))
                elif isinstance(event, ToolCallDelta):
                    sent = live_sent.get(event.index, 0)
                    if sent < 0 or assembler.over_cap(event.index):
                        continue  # past the preview (or the cap) nothing more of the call goes live
                    if sent + len(event.arguments_delta) > LIVE_ARGUMENTS_CHARS:
                        live_sent[event.index] = -1
                        continue
                    live_sent[event.index] = sent + len(event.arguments_delta)
                    call_id, name = assembler.call(event.index)
                    call_id = ids.of(event.index, call_id)
                    self._emit_delta(
                        AgentDelta(turn, step, "tool-arguments", text=event.arguments_delta, call_id=call_id, name=name)
                    )
                elif isinstance(event, Retrying):
                    self._emit_delta(AgentDelta(turn, step, "retry", attempt=event.attempt, delay_ms=event.delay_ms))
            reply = assembler.reply()
            if not reply.tool_calls:
                return reply
            calls = tuple(
                attrs.evolve(call, call_id=ids.of(index, call.call_id))
                for index, call in zip(assembler.indices(), reply.tool_calls)
            )
            return attrs.evolve(reply, tool_calls=calls)
        except (ModelError, asyncio.CancelledError):
            raise
        except Exception as exc:
            # An adapter's own bug: the person sees its type, the daemon's log the rest.
            log.exception("the model adapter failed in turn %d", turn)
            raise ModelError("bad-response", f"the model adapter failed ({type(exc).__name__}); see the daemon's log") from exc
        finally:
            # Ends the call at once (a provider closes its HTTP stream) on every way out.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _render(self, turn: int, step: int) -> RenderedPrompt:
        return self.sections.render(PromptContext(state=self.store.state, turn=turn, step=step))

    def _derive_request(self, turn: int, step: int, rendered: RenderedPrompt) -> ModelRequest:
        state = self.store.state
        messages = self._built_transcript().for_model()
        # The header adds nothing to the transcript (PM-5).
        self.store.commit(
            "request/header",
            {
                "step": step,
                "planActive": state.plan.active,
                "sections": list(rendered.section_ids),
                "tools": self.tools.names(),
            },
            turn=turn,
        )
        return ModelRequest(rendered.system, messages, self.tools.specs(), volatile=rendered.volatile)

    async def _compact(
        self, turn: int, step: int, rendered: RenderedPrompt, tokens_before: int, focus: str
    ) -> str | None:
        """One compaction step: a recorded summary request, then ``context/compact``.
        Returns None when committed, else why it failed (the log then holds the request's
        header and nothing else: the transcript is as it was)."""
        history = self._built_transcript()
        window = self.config.model.contextWindow
        threshold = None if window is None else int(self.config.context.compactAt * window)
        # Everything is summarized but the user messages that end the transcript (the
        # prompt this turn opened with): those stay word for word after the summary.
        keep = compaction.kept_from(history, compaction.keep_chars(threshold))
        through_seq = history.seq_of(keep) - 1 if keep < len(history.messages) else self.store.state.seq
        request = compaction.summary_request(
            history.messages[:keep], focus=focus, budget_tokens=threshold, words=compaction.summary_words(window)
        )
        self.store.commit(
            "request/header",
            {
                "step": step,
                "planActive": self.store.state.plan.active,
                "sections": [compaction.COMPACT_SECTION_ID],
                "tools": [],
            },
            turn=turn,
        )
        try:
            reply = await self._call_model(turn, step, request, live=False)
        except ModelError as exc:
            log.warning("compaction in turn %d failed: %s: %s", turn, exc.kind, exc.message)
            return f"compacting the conversation failed: the summary request failed ({exc.kind}: {exc.message})"
        summary = reply.text.strip()
        if reply.stop_reason == "max-tokens":
            return f"compacting the conversation failed: {output_limit_error(self.config.model.maxOutputTokens).message}"
        if not summary:
            return "compacting the conversation failed: the model gave no summary"
        tools = self.tools.specs()
        kept = history.messages_after(through_seq)
        tokens_after = compaction.estimate_after(rendered.all_text, tools, summary, kept)
        if threshold is not None and tokens_after > threshold:
            return (
                f"compacting the conversation failed: the request would still need about {tokens_after} "
                f"tokens, over {threshold} ([context] compactAt of [model] contextWindow)"
            )
        self.store.commit(
            "context/compact",
            {
                "summary": summary,
                "throughSeq": through_seq,
                "tokensBefore": max(1, tokens_before),
                "tokensAfter": max(1, tokens_after),
            },
            turn=turn,
        )
        return None

    async def _run_tool(self, ctx: ToolContext, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools.names()) or "none"
            return ToolOutcome.failure(f"unknown tool {name!r} (tools: {known})")
        run = tool.run

        async def run_announced(tool_ctx: ToolContext, tool_arguments: dict[str, Any]) -> ToolOutcome:
            # Only a call that really runs is announced (not one refused or rejected first).
            self._tool_started(tool_ctx.call_id)
            return await run(tool_ctx, tool_arguments)

        try:
            outcome = await run_tool(
                attrs.evolve(tool, run=run_announced),
                ctx,
                arguments,
                permissions=self.permissions,
                approvals=self.approvals,
                agent_id=self.agent_id,
                session_id=self.session_id,
                record=lambda data: self.store.commit("permission/decision", data, turn=ctx.turn, writer="approvals"),
            )
        except asyncio.CancelledError:
            raise
        except DshError as exc:
            return ToolOutcome.failure(f"{exc.kind}: {exc.message}")
        except Exception as exc:
            log.exception("tool %s failed", name)
            return ToolOutcome.failure(f"tool {name} failed: {exc}")
        if not isinstance(outcome, ToolOutcome):
            return ToolOutcome.failure(f"tool {name} returned {type(outcome).__name__}, not a ToolOutcome")
        return outcome

    # ---- transcript ------------------------------------------------------------------

    def _follow(self, event: Any) -> None:
        """Keep a built transcript, and the session's call ids, in step with the log."""
        if self._transcript is not None:
            self._transcript.apply(event)
        if event.__class__ is ToolCall:
            self._call_ids.noted(event.data.callId)

    def _require_live(self) -> None:
        if self.closed:
            raise DshError("stale-agent", "this session was closed or opened again since: open it again and retry")
