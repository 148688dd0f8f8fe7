"""Approvals: the person's yes before a tool changes something, enforced here alone.

A tool declares its mutability (``read`` / ``write`` / ``exec``); the live policy of the
agent (:class:`Permissions`: ``[tools] sandbox``, ``network`` and ``approve`` at load, then
``set`` in process only) says which classes need a person's yes. :func:`run_tool` is the
one place that decides, for every tool call:

1. a tool with a ``preview`` is checked first; a refused call (bad arguments, a path outside
   the workspace) fails without asking anybody and records nothing;
2. the class is not in ``approve``: it runs (write and exec calls record a decision
   ``by: "policy"``);
3. the person chose "allow for this session" for this tool earlier: it runs
   (``by: "session"``);
4. otherwise the person is asked through the :class:`Approvals` seam with what the preview
   shows (title, the diff of an edit, the command and folder of a run). ``allow-once`` and
   ``allow-session`` run it (``by: "person"``); ``reject`` fails the call with the person's
   feedback; no answer of any kind (no channel, a timeout, a malformed answer, the turn
   cancelled, the agent closed) fails it closed (``by: "fail-closed"``). A failed call
   changed nothing.

Each decision is recorded durably as a ``permission/decision`` event before the tool's
result. The seam knows no wire: the daemon's implementation sends ``dsh/permission/ask``;
another front door maps the same request onto its own permission request. Cancelling the
awaiting task withdraws the question. Plan mode is not consulted and not touched.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, get_args

import attrs

from dshd.tools.config import Mutability, Sandbox, ToolsConfig
from dshd.agent.tools import Change, Policy, Tool, ToolContext, ToolKind, ToolOutcome, describe_call
from dshd.errors import DshError
from dshd.services.acting import answered_by, with_client

log = logging.getLogger(__name__)

Outcome = Literal["allow-once", "allow-session", "reject"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
SANDBOXES: tuple[str, ...] = get_args(Sandbox)
MUTABILITIES: tuple[str, ...] = get_args(Mutability)


@attrs.frozen
class ApprovalRequest:
    agent_id: str
    session_id: str
    call_id: str
    tool: str
    mutability: Mutability
    title: str
    diff: str | None = None
    command: str | None = None
    cwd: str | None = None
    kind: ToolKind = "other"  # what the call does, from the tool's own description


@attrs.frozen
class ApprovalAnswer:
    outcome: Outcome
    feedback: str | None = None


class ApprovalsUnavailable(Exception):
    """No way to get the person's answer (no capability, gone, timed out, malformed reply)."""


class Approvals(Protocol):
    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer: ...


class NoApprovals:
    """The seam when nobody can answer: every ask is ApprovalsUnavailable."""

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        raise ApprovalsUnavailable("no client can answer permission requests")


class InProcessApprovals:
    """Answers from a function (sync or async) of the request; records what was asked."""

    def __init__(self, answer: Callable[[ApprovalRequest], "ApprovalAnswer | Awaitable[ApprovalAnswer]"]) -> None:
        self._answer = answer
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        result = self._answer(request)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        return result  # type: ignore[return-value]


class Permissions:
    """The live policy of one agent. In process only: every load starts from config."""

    def __init__(self, config: ToolsConfig) -> None:
        self._policy = Policy(config.sandbox, config.network, tuple(config.approve))
        self._session_tools: set[str] = set()  # tools the person allowed for this agent

    @property
    def policy(self) -> Policy:
        return self._policy

    def view(self) -> dict[str, Any]:
        return {"sandbox": self._policy.sandbox, "network": self._policy.network, "approve": list(self._policy.approve)}

    def set(self, *, sandbox: str | None = None, approve: list[str] | None = None) -> dict[str, Any]:
        """Change the sandbox mode and/or the approve list. A new approve list also drops
        the session's "allow for this session" grants: the policy starts clean."""
        if sandbox is not None and sandbox not in SANDBOXES:
            raise DshError("invalid-params", f"sandbox must be one of {', '.join(SANDBOXES)}", field="sandbox")
        if approve is not None:
            if not isinstance(approve, list) or any(a not in MUTABILITIES for a in approve):
                raise DshError("invalid-params", f"approve lists classes from {', '.join(MUTABILITIES)}", field="approve")
            if len(set(approve)) != len(approve):
                raise DshError("invalid-params", "approve lists a class twice", field="approve")
        self._policy = Policy(
            sandbox if sandbox is not None else self._policy.sandbox,  # type: ignore[arg-type]
            self._policy.network,
            tuple(approve) if approve is not None else self._policy.approve,  # type: ignore[arg-type]
        )
        if approve is not None:
            self._session_tools.clear()
        return self.view()

    def allowed_for_session(self, tool: str) -> bool:
        return tool in self._session_tools

    def allow_for_session(self, tool: str) -> None:
        self._session_tools.add(tool)


Record = Callable[[dict[str, Any]], None]


def _decision(call_id: str, tool: str, outcome: str, by: str, feedback: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"callId": call_id, "tool": tool, "outcome": outcome, "by": by}
    if feedback:
        data["feedback"] = feedback
    return data


def default_change(tool: Tool, arguments: dict[str, Any]) -> Change:
    """What a person sees for a tool without a preview: its name and arguments."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    if len(shown) > 200:
        shown = shown[:199] + "…"
    return Change(title=f"{tool.name} {shown}")


def _answer_problem(answer: Any) -> str | None:
    if not isinstance(answer, ApprovalAnswer):
        return f"expected an approval answer, got {type(answer).__name__}"
    if answer.outcome not in OUTCOMES:
        return f"unknown outcome {answer.outcome!r}"
    if answer.feedback is not None and not isinstance(answer.feedback, str):
        return "feedback is not text"
    return None


async def run_tool(
    tool: Tool,
    ctx: ToolContext,
    arguments: dict[str, Any],
    *,
    permissions: Permissions,
    approvals: Approvals,
    agent_id: str,
    session_id: str,
    record: Record,
) -> ToolOutcome:
    """Run one tool call under the live policy (see the module docstring)."""
    change: Change | None = None
    if tool.preview is not None:
        previewed = await tool.preview(ctx, arguments)
        if isinstance(previewed, ToolOutcome):
            return previewed  # refused before anyone was asked; nothing happened
        change = previewed
    if tool.approval == "policy":
        needs_yes = tool.mutability in ctx.policy.approve
    else:  # the tool's own rule ("always" / "never": an MCP server's approve key)
        needs_yes = tool.approval == "always"
    if not needs_yes:
        if tool.mutability != "read":
            record(_decision(ctx.call_id, tool.name, "allow-once", "policy"))
        return await tool.run(ctx, arguments)
    if tool.approval != "always" and permissions.allowed_for_session(tool.name):
        record(_decision(ctx.call_id, tool.name, "allow-session", "session"))
        return await tool.run(ctx, arguments)

    change = change or default_change(tool, arguments)
    request = ApprovalRequest(
        agent_id=agent_id,
        session_id=session_id,
        call_id=ctx.call_id,
        tool=tool.name,
        mutability=tool.mutability,
        title=change.title,
        diff=change.diff,
        command=change.command,
        cwd=change.cwd,
        kind=describe_call(tool, tool.name, arguments).kind,
    )
    why: str | None = None
    answer: Any = None
    try:
        answer = await approvals.ask(request)
    except asyncio.CancelledError:
        # Withdrawn (the turn was cancelled or the agent closed): no, and say so if we still can.
        _record_quietly(record, _decision(ctx.call_id, tool.name, "reject", "fail-closed"))
        raise
    except ApprovalsUnavailable as exc:
        why = str(exc) or "no one can answer"
    except TimeoutError:
        why = "no answer in time"
    except Exception as exc:  # noqa: BLE001 - any failure of the channel fails closed
        why = f"asking failed: {exc}"
    else:
        problem = _answer_problem(answer)
        if problem is not None:
            why = f"the answer was malformed ({problem})"
    if why is not None:
        record(_decision(ctx.call_id, tool.name, "reject", "fail-closed"))
        return ToolOutcome.failure(
            f"Not run: {tool.name} needs the person's approval and none could be had ({why}). "
            "Nothing was changed."
        )
    feedback = (answer.feedback or "").strip() or None
    if answer.outcome == "reject":
        record(with_client(_decision(ctx.call_id, tool.name, "reject", "person", feedback), answered_by.get()))
        text = f"The person rejected this {tool.name} call; nothing was changed."
        if feedback:
            text += f"\nTheir feedback: {feedback}"
        return ToolOutcome.failure(text)
    if answer.outcome == "allow-session":
        permissions.allow_for_session(tool.name)
    record(with_client(_decision(ctx.call_id, tool.name, answer.outcome, "person", feedback), answered_by.get()))
    outcome = await tool.run(attrs.evolve(ctx, approved=change), arguments)
    if feedback:
        # Feedback that came with a yes still reaches the model.
        outcome = ToolOutcome(outcome.ok, f"{outcome.content}\nThe person's note: {feedback}")
    return outcome


def _record_quietly(record: Record, data: dict[str, Any]) -> None:
    try:
        record(data)
    except Exception:  # the store may be closing with the agent: the log stays as it is
        log.info("could not record the withdrawn approval of %s", data["callId"])
