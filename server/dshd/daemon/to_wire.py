"""The LSP door's one converter: core values -> the JSON of ``dsh/*`` (docs/protocol.md).

The core hands the doors plain values with snake_case names and no wire words (chat
items, GoalView, GoalNotice, PlanView, AgentDelta, activity); only this module knows how
``dsh/*`` writes them, as rust-analyzer's ``to_proto`` does for LSP. Names go on the wire
by the protocol's own rule (``dshd_protocol.wire_name``: ``call_id`` -> ``callId``), the
same rule by which ``dshd_protocol.types`` name their fields, so a core field and its wire
field are one name; ``tests/daemon/test_to_wire.py`` checks every item kind against the
wire types. Values the person or the model wrote (tool arguments) go out as they are.
"""

from __future__ import annotations

import functools
import types as pytypes
from typing import Any, Union, get_args, get_origin

import msgspec
from dshd_protocol import wire_name

from dshd.agent.config_layers import IgnoredKey, LoadedConfig
from dshd.agent.deltas import AgentDelta
from dshd.agent.turn_end import TurnEnd
from dshd.api.escape import shown, shown_lines
from dshd.api.words import goal_words
from dshd.folds.plans import PlanRecord
from dshd.folds.rounds import GoalRoundRecord, GoalRounds
from dshd.services.goals import GoalNotice, GoalView
from dshd.services.listing import SessionRow

# ---- goals ------------------------------------------------------------------------------


def goal_view(view: GoalView | None) -> dict[str, Any] | None:
    """The wire GoalView: the goal's fields, then what people read (status, actions)."""
    if view is None:
        return None
    out: dict[str, Any] = {
        "id": view.id,
        "revision": view.revision,
        "objective": view.objective,
        "phase": view.phase,
        "maxRounds": view.max_rounds,
        "roundsStarted": view.rounds_started,
        "roundsLeft": view.rounds_left,
        "tokensUsed": view.tokens_used,
        "createdAt": view.created_at,
        "updatedAt": view.updated_at,
        "activation": view.activation,
    }
    if view.blocked_reason is not None:
        out["blockedReason"] = {"code": view.blocked_reason.code, "message": view.blocked_reason.message}
    if view.max_tokens is not None:
        out["maxTokens"] = view.max_tokens
    if view.waiting_for is not None:
        out["waitingFor"] = view.waiting_for
    if view.tokens_estimated:
        out["tokensEstimated"] = True
    out["status"], out["actions"] = goal_words(view)
    return out


def goal_notice(notice: GoalNotice) -> dict[str, Any]:
    """``dsh/goal/changed`` without agentId and sessionId (no ``goal`` after clear)."""
    out: dict[str, Any] = {"op": notice.op, "revision": notice.revision}
    if notice.view is not None:
        out["goal"] = goal_view(notice.view)
    return out


def goal_ref(ref: Any) -> dict[str, Any]:
    return {"id": ref.id, "revision": ref.revision}


def goal_rounds(value: GoalRounds) -> dict[str, Any]:
    """The ``dsh/goal/rounds`` result: ``{goalId, rounds}`` (GoalRoundRecord each)."""
    return {"goalId": value.goal_id, "rounds": [goal_round(r) for r in value.rounds]}


def goal_round(record: GoalRoundRecord) -> dict[str, Any]:
    tokens = record.tokens
    out: dict[str, Any] = {
        "round": record.round,
        "revision": record.revision,
        "turn": record.turn,
        "startedAt": record.started_at,
        "tokens": {"input": tokens.input, "cachedInput": tokens.cached_input, "output": tokens.output},
        "toolCalls": record.tool_calls,
        "waitedMs": record.waited_ms,
        "outcome": record.outcome,
    }
    if record.ended_at is not None:
        out["endedAt"] = record.ended_at
    if record.estimated:
        out["estimated"] = True
    return out


def session_row(row: SessionRow, title: str | None) -> dict[str, Any]:
    """A ``dsh/session/list`` row (SessionSummary) from the index's row; ``title`` as a
    person may read it (the handler escapes it)."""
    out: dict[str, Any] = {"sessionId": row.session_id, "title": title, "updatedAt": row.updated_at}
    if row.goal is not None:
        out["goal"] = goal_view(row.goal)
    if row.refused is not None:
        out["refused"] = {"kind": row.refused.kind, "path": row.refused.path, "reason": row.refused.reason}
    if row.activity is not None:
        out["activity"] = row.activity
        if row.question is not None:
            out["question"] = row.question
    return out


# ---- turns ------------------------------------------------------------------------------


def turn_end(end: TurnEnd) -> dict[str, Any]:
    """The ``dsh/agent/prompt`` result (PromptResult): ``{turn, stopReason}``."""
    return {"turn": end.turn, "stopReason": end.stop_reason}


# ---- configuration ----------------------------------------------------------------------


def ignored_key(item: IgnoredKey) -> dict[str, str]:
    """An ignored config key as ``dsh/config/get`` lists it (why it was untrusted is in ``why``)."""
    return {"file": item.file, "key": item.key, "why": item.why}


def config_report(loaded: LoadedConfig) -> dict[str, Any]:
    """The ``dsh/config/get`` result. No secret is in it: config holds none (API keys stay
    in environment variables; ``effective`` hides an ``apiKeyEnv`` that looks pasted)."""
    return {"effective": loaded.effective(), "ignored": [ignored_key(i) for i in loaded.ignored], "trusted": loaded.trusted}


# ---- plan mode, activity -------------------------------------------------------------------


def plan_view(view: Any) -> dict[str, Any]:
    """``{active, pending?}``; ``None`` (plan mode not loaded) reads as inactive."""
    if view is None:
        return {"active": False}
    out: dict[str, Any] = {"active": view.active}
    if view.pending is not None:
        out["pending"] = view.pending
    return out


def plan_record(record: PlanRecord) -> dict[str, Any]:
    """One ``dsh/plan/history`` PlanRecord: what the person reads escaped (the markdown
    keeps its lines, so a comment's line number still names its line)."""
    out: dict[str, Any] = {
        "callId": record.call_id,
        "seq": record.seq,
        "title": shown(record.title),
        "markdown": shown_lines(record.markdown),
        "outcome": record.outcome,
        "at": record.at,
    }
    if record.feedback is not None:
        out["feedback"] = shown_lines(record.feedback)
    if record.comments:
        out["comments"] = [{"line": c.line, "text": shown_lines(c.text)} for c in record.comments]
    return out


def activity(state: Any) -> dict[str, Any]:
    """``{activity, question?}`` (dsh/agent/activity, and dsh/session/open's fields)."""
    out: dict[str, Any] = {"activity": state.activity}
    if state.question is not None:
        out["question"] = state.question
    return out


# ---- live deltas ----------------------------------------------------------------------------

_DELTA_FIELDS = ("text", "call_id", "name", "attempt", "delay_ms")


def delta(value: AgentDelta) -> dict[str, Any]:
    """An AgentDelta as ``dsh/agent/delta``'s fields (absent ones left out)."""
    out: dict[str, Any] = {"turn": value.turn, "step": value.step, "kind": value.kind}
    for attr in _DELTA_FIELDS:
        field = getattr(value, attr)
        if field is not None:
            out[wire_name(attr)] = field
    return out


def delta_from_wire(value: dict[str, Any]) -> AgentDelta:
    """A delta as ``dsh/agent/delta`` writes it (without agentId and sessionId): the form
    the chat fixtures are written in."""
    optional = {attr: value.get(wire_name(attr)) for attr in _DELTA_FIELDS}
    return AgentDelta(turn=value["turn"], step=value["step"], kind=value["kind"], **optional)


# ---- chat items -----------------------------------------------------------------------------


def chat_item(item: msgspec.Struct) -> dict[str, Any]:
    """A chat item (``dshd.api.chat``) as the wire's ``ChatItem``: ``kind`` first, then its
    fields in order under their wire names, absent optionals (a field at its default) left
    out; a part (usage, forkedFrom, goalRound, ...) the same way, a plain dict (tool
    arguments) as it is."""
    tag, fields = _plan(type(item))
    out: dict[str, Any] = {} if tag is None else {"kind": tag}
    for attr, key, default, part in fields:
        value = getattr(item, attr)
        if value is default or (default is not _REQUIRED and type(value) is type(default) and value == default):
            continue
        out[key] = chat_item(value) if part and value is not None else value
    return out


_REQUIRED = object()


@functools.cache
def _plan(cls: type) -> tuple[str | None, tuple[tuple[str, str, Any, bool], ...]]:
    """For one item (or part) class: its tag, and per field (attribute, wire name,
    default or _REQUIRED, whether it holds a part)."""
    fields = tuple(
        (
            field.name,
            wire_name(field.name),
            _REQUIRED if field.default is msgspec.NODEFAULT else field.default,
            bool(_struct_types(field.type)),
        )
        for field in msgspec.structs.fields(cls)
    )
    return cls.__struct_config__.tag, fields


def _struct_types(annotation: Any) -> list[type]:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return [annotation]
    if get_origin(annotation) in (Union, pytypes.UnionType):
        return [t for arg in get_args(annotation) for t in _struct_types(arg)]
    return []


def chat_items(items: list[Any]) -> list[dict[str, Any]]:
    return [chat_item(item) for item in items]


# ---- checkpoints ----------------------------------------------------------------------------
# Paths and diffs are read by people: escaped like every other text shown (api/escape.py).


def checkpoint_info(info: Any) -> dict[str, Any]:
    """One ``dsh/checkpoint/list`` CheckpointInfo (a CheckpointService ``CheckpointInfo``)."""
    return {"seq": info.seq, "turn": info.turn, "step": info.step, "at": info.at, "files": [shown(f) for f in info.files]}


def file_restore(change: Any) -> dict[str, Any]:
    """One ``dsh/checkpoint/diff`` file (a CheckpointService ``FileRestore``)."""
    out: dict[str, Any] = {"path": shown(change.path), "status": change.status}
    if change.diff is not None:
        out["diff"] = shown_lines(change.diff)
    out["binary"] = bool(change.binary)
    out["changedByPerson"] = bool(change.changed_by_person)
    return out


def restore_outcome(outcome: Any, fork: Any = None) -> dict[str, Any]:
    """The ``dsh/checkpoint/restore`` result; ``fork`` the agent of the conversation's fork."""
    out: dict[str, Any] = {"restored": [shown(p) for p in outcome.restored], "forced": [shown(p) for p in outcome.forced]}
    if fork is not None:
        out["agent"] = {"sessionId": fork.session_id, "agentId": fork.agent_id}
    return out


# ---- log events -----------------------------------------------------------------------------


def event(value: msgspec.Struct) -> dict[str, Any]:
    """A committed event as ``dsh/session/event`` and ``dsh/session/events`` send it: the
    log line's own shape (docs/log-format.md), which the log defines, not the wire."""
    return msgspec.to_builtins(value)
