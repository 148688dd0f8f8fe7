"""The ``_session/goal`` extension method: a person's goal writes from an ACP client.

    _session/goal {sessionId, action, objective?, maxRounds?, maxTokens?, ref?, reason?}
      -> {goal: <goal> | null, ref?: {id, revision}}

    set       create a goal: objective, maxRounds?, maxTokens? (no ref: nothing to compare)
    edit      ref, objective?, maxRounds? and/or maxTokens?
    pause | resume | complete | clear   ref
    block     ref, reason {code (lowercase-kebab-case), message}

Every write but ``set`` names the ref it read (``{id, revision}``, from the last
``_meta.goal``); a stale one is refused with ``stale-revision`` (``current``, ``goalId``),
exactly as on the LSP door: the same GoalService does the work. A field the action
does not take is invalid-params naming it, never ignored.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from dshd.acp.convert import goal_meta
from dshd.errors import DshError
from dshd.plugins.goals import pause_goal
from dshd.services.goals import GoalService

Action = Literal["set", "pause", "resume", "clear", "complete", "block", "edit"]


class _Ref(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    revision: int


class _Reason(msgspec.Struct, forbid_unknown_fields=True):
    code: str
    message: str


class GoalRequest(msgspec.Struct, forbid_unknown_fields=True):
    sessionId: str
    action: Action
    objective: str | None = None
    maxRounds: int | None = None
    maxTokens: int | None = None
    ref: _Ref | None = None
    reason: _Reason | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


# The fields each action takes besides sessionId and action.
_TAKES: dict[str, set[str]] = {
    "set": {"objective", "maxRounds", "maxTokens"},
    "edit": {"ref", "objective", "maxRounds", "maxTokens"},
    "pause": {"ref"},
    "resume": {"ref"},
    "complete": {"ref"},
    "clear": {"ref"},
    "block": {"ref", "reason"},
}
_REQUIRED: dict[str, set[str]] = {"set": {"objective"}, "block": {"ref", "reason"}}
_PATH = re.compile(r"at `\$\.?(?P<path>[^`]*)`")
_UNKNOWN = re.compile(r"unknown field `(?P<name>[^`]+)`")


def parse(params: Any) -> GoalRequest:
    try:
        request = msgspec.convert(params, GoalRequest, strict=True)
    except msgspec.ValidationError as exc:
        raise DshError("invalid-params", f"_session/goal: {exc}", field=_field(str(exc))) from None
    given = {name for name in ("objective", "maxRounds", "maxTokens", "ref", "reason") if getattr(request, name) is not None}
    for name in sorted(given - _TAKES[request.action]):
        raise DshError("invalid-params", f"action {request.action!r} takes no {name}", field=name)
    required = _REQUIRED.get(request.action, {"ref"})
    for name in sorted(required - given):
        raise DshError("invalid-params", f"action {request.action!r} needs {name}", field=name)
    return request


def _field(message: str) -> str:
    unknown = _UNKNOWN.search(message)
    path = _PATH.search(message)
    prefix = path.group("path") if path else ""
    if unknown:
        return f"{prefix}.{unknown.group('name')}" if prefix else unknown.group("name")
    if "missing required field" in message:
        missing = re.search(r"required field `([^`]+)`", message)
        name = missing.group(1) if missing else ""
        return f"{prefix}.{name}" if prefix else name or "params"
    return prefix or "params"


async def run(agent: Any, request: GoalRequest) -> dict[str, Any]:
    """Apply one action through the agent's GoalService; the answer is the goal after it.
    A pause first cancels the running round (plugins/goals.py)."""
    goals = agent.features.get(GoalService)
    if goals is None:
        raise DshError("plugin-not-loaded", 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml', plugin="goals")
    ref = None if request.ref is None else {"id": request.ref.id, "revision": request.ref.revision}
    action = request.action
    if action == "pause":
        view = await pause_goal(agent, ref)
    elif action == "set":
        view = goals.create(request.objective, max_rounds=request.maxRounds, max_tokens=request.maxTokens)
    elif action == "edit":
        view = goals.edit(ref, objective=request.objective, max_rounds=request.maxRounds, max_tokens=request.maxTokens)
    elif action == "block":
        assert request.reason is not None
        view = goals.block(ref, {"code": request.reason.code, "message": request.reason.message})
    elif action == "clear":
        cleared = goals.clear(ref)
        return {"goal": None, "ref": {"id": cleared.id, "revision": cleared.revision}}
    else:
        view = getattr(goals, action)(ref)
    return {"goal": goal_meta(view)}
