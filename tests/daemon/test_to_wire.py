"""The LSP door's converter (daemon/to_wire.py) and the ACP door's (acp/convert.py): core
values (snake_case, no wire names) in, the wire's shapes out, checked against the wire
types of dshd_protocol (strict: unknown or missing fields fail)."""

from __future__ import annotations

import typing

import attrs
import msgspec
import pytest

from dshd.acp.convert import goal_meta, plan_meta
from dshd.agent.deltas import AgentDelta
from dshd.api import chat
from dshd.daemon import to_wire
from dshd.folds.events import BlockedReason
from dshd.services.goals import GoalNotice, GoalView
from dshd.services.plan_mode import PlanView
from dshd_protocol import from_wire, wire_name
from dshd_protocol import types as T

AT = "2026-11-29T18:40:18.123Z"


def _core(**kw) -> GoalView:
    fields = dict(
        id="g-1", revision=3, objective="Ship it", phase="blocked", max_rounds=40, rounds_started=5, rounds_left=35,
        tokens_used=1200, created_at=AT, updated_at=AT, activation="disarmed",
        blocked_reason=BlockedReason(code="needs-input", message="which branch?"), max_tokens=5000,
        waiting_for="approval", tokens_estimated=True,
    )  # fmt: skip
    fields.update(kw)
    return GoalView(**fields)


def test_goal_view_is_the_wire_goal_view_in_both_doors():
    view = _core()
    wire = to_wire.goal_view(view)
    parsed = from_wire(T.GoalView, wire)  # strict: every wire field there, none extra
    assert (parsed.max_rounds, parsed.rounds_started, parsed.tokens_used, parsed.max_tokens) == (40, 5, 1200, 5000)
    assert wire["blockedReason"] == {"code": "needs-input", "message": "which branch?"}
    assert wire["status"]["short"] == "blocked: needs-input" and wire["actions"]
    # Every field of the wire type is written (the optional ones too, when the core has them).
    assert set(wire) == {wire_name(f.name) for f in attrs.fields(T.GoalView)}
    # The ACP door's _meta.goal says the same, key for key and in the same order.
    assert list(goal_meta(view).items()) == list(wire.items())
    # Optionals absent in the core are absent on the wire, in both doors.
    bare = _core(phase="active", activation="armed", blocked_reason=None, max_tokens=None, waiting_for=None,
                 tokens_estimated=False)  # fmt: skip
    assert not {"blockedReason", "maxTokens", "waitingFor", "tokensEstimated"} & set(to_wire.goal_view(bare))
    from_wire(T.GoalView, to_wire.goal_view(bare))
    assert goal_meta(bare) == to_wire.goal_view(bare)
    assert to_wire.goal_view(None) is None and goal_meta(None) is None


def test_goal_notices_and_plan_views():
    view = _core(phase="active", activation="armed", blocked_reason=None)
    changed = to_wire.goal_notice(GoalNotice("usage", 3, view))
    assert changed == {"op": "usage", "revision": 3, "goal": to_wire.goal_view(view)}
    assert to_wire.goal_notice(GoalNotice("clear", 4, None)) == {"op": "clear", "revision": 4}
    assert to_wire.plan_view(PlanView(active=True, pending=False)) == {"active": True, "pending": False}
    assert to_wire.plan_view(PlanView(active=False)) == {"active": False} == plan_meta(PlanView(active=False))
    assert to_wire.plan_view(None) == {"active": False}  # plan mode not loaded


def _wire_class(tag: str) -> type:
    (union,) = typing.get_args(T.ChatItem)[:1]
    for cls in typing.get_args(union):
        if typing.get_args(attrs.fields_dict(cls)["kind"].type) == (tag,):
            return cls
    raise AssertionError(f"no wire ChatItem of kind {tag}")


@pytest.mark.parametrize("cls", typing.get_args(chat.ChatItem), ids=lambda c: c.__name__)
def test_every_core_item_field_has_its_wire_field(cls):
    """What the converter relies on: a core item's field and its wire field have one name
    (the protocol's rule, wire_name), so no field is lost or invented on the way out."""
    wire = _wire_class(cls.__struct_config__.tag)
    core_fields = set(cls.__struct_fields__)
    wire_fields = {f.name for f in attrs.fields(wire)} - {"kind"}
    assert core_fields == wire_fields, (cls.__name__, core_fields ^ wire_fields)


def test_a_chat_item_goes_out_in_wire_names_and_its_arguments_as_written():
    item = chat.ToolCallItem(
        id="tool-1.1.c1", turn=1, step=1, seq=4, at=AT, call_id="c1", name="grep", title="Search",
        arguments={"max_count": 3, "nested_dict": {"snake_key": 1}}, status="ok", result="x", partial=False,
    )  # fmt: skip
    wire = to_wire.chat_item(item)
    assert wire == {
        "kind": "tool-call", "id": "tool-1.1.c1", "turn": 1, "step": 1, "seq": 4, "at": AT, "callId": "c1",
        "name": "grep", "title": "Search", "arguments": {"max_count": 3, "nested_dict": {"snake_key": 1}},
        "status": "ok", "result": "x", "partial": False,
    }  # fmt: skip
    assert list(wire)[0] == "kind"
    from_wire(T.ChatItem, wire, root="item")
    # Parts are renamed too (control: a part with a two-word field).
    message = chat.AssistantMessageItem(
        id="assistant-1.1", turn=1, step=1, seq=5, at=AT, text="hi", partial=False,
        usage=chat.Usage(input_tokens=10, output_tokens=2),
    )  # fmt: skip
    assert to_wire.chat_item(message)["usage"] == {"inputTokens": 10, "outputTokens": 2}
    assert "discarded" not in to_wire.chat_item(message)  # at its default: left out, as before
    assert to_wire.chat_item(msgspec.structs.replace(message, discarded=True))["discarded"] is True


def test_deltas_both_ways():
    delta = AgentDelta(turn=2, step=1, kind="tool-arguments", call_id="c9", name="write_file", text='{"pa')
    wire = to_wire.delta(delta)
    assert wire == {"turn": 2, "step": 1, "kind": "tool-arguments", "text": '{"pa', "callId": "c9", "name": "write_file"}
    assert to_wire.delta_from_wire(wire) == delta
    retry = AgentDelta(turn=1, step=2, kind="retry", attempt=2, delay_ms=500)
    assert to_wire.delta(retry) == {"turn": 1, "step": 2, "kind": "retry", "attempt": 2, "delayMs": 500}


def test_session_rows_are_the_wire_session_summary():
    from dshd.services.listing import SessionRefusal, SessionRow

    sid = "s-01m8mcaext7rthc32vvdnh1pd2"
    row = SessionRow(session_id=sid, title="a\u202etitle", updated_at=AT, goal=_core())
    wire = to_wire.session_row(row, "a\\u202etitle")
    assert list(wire) == ["sessionId", "title", "updatedAt", "goal"] and wire["goal"] == to_wire.goal_view(_core())
    from_wire(T.SessionSummary, wire)
    refused = SessionRow(
        session_id=sid, title=None, updated_at=AT,
        refused=SessionRefusal(kind="unsafe-path", path="/w/.dsh/sessions/x/log.jsonl", reason="is a symbolic link"),
    )  # fmt: skip
    wire = to_wire.session_row(refused, None)
    assert wire["refused"] == {"kind": "unsafe-path", "path": "/w/.dsh/sessions/x/log.jsonl", "reason": "is a symbolic link"}
    assert "goal" not in wire
    from_wire(T.SessionSummary, wire)


def test_a_turn_end_is_the_wire_prompt_result():
    from dshd.agent.turn_end import TurnEnd

    wire = to_wire.turn_end(TurnEnd(3, "model-error", {"kind": "auth", "message": "no key"}))
    assert wire == {"turn": 3, "stopReason": "model-error"}  # the error goes by dsh/chat, not the result
    parsed = from_wire(T.PromptResult, wire)  # strict: every wire field there, none extra
    assert (parsed.turn, parsed.stop_reason) == (3, "model-error")
    command = from_wire(T.PromptResult, to_wire.turn_end(TurnEnd(None, "command")))
    assert (command.turn, command.stop_reason) == (None, "command")


def test_the_config_report_is_the_wire_config_get_result_in_both_doors(tmp_path):
    from dshd.acp.convert import config_meta
    from dshd.agent.config_layers import IgnoredKey, LoadedConfig, load_layers

    loaded = load_layers(tmp_path, {}, user_file=None)
    ignored = IgnoredKey(file="/w/.dsh/config.toml", key="model.baseUrl", why="not trusted", untrusted=True)
    loaded = LoadedConfig(loaded.config, (ignored,), False, None, loaded.workspace_file)
    wire = to_wire.config_report(loaded)
    parsed = from_wire(T.ConfigGetResult, wire)  # strict
    assert parsed.trusted is False and [i.key for i in parsed.ignored] == ["model.baseUrl"]
    assert wire["ignored"] == [{"file": "/w/.dsh/config.toml", "key": "model.baseUrl", "why": "not trusted"}]
    assert config_meta(loaded) == {"trusted": False, "ignored": wire["ignored"]}  # the ACP door says the same


def test_the_core_hands_these_over_without_wire_names():
    """The prompt's end and the config report are core values; only the converters above
    write ``stopReason`` / the ``dsh/config/get`` shape (the log's own turn/close keeps its names)."""
    import inspect

    from dshd.agent import loop
    from dshd.agent.config_layers import IgnoredKey, LoadedConfig
    from dshd.agent.turn_end import TurnEnd

    assert not hasattr(LoadedConfig, "to_dict") and not hasattr(IgnoredKey, "to_dict")
    assert inspect.signature(loop.Agent.prompt).return_annotation in (TurnEnd, "TurnEnd")
    assert [f.name for f in attrs.fields(TurnEnd)] == ["turn", "stop_reason", "error"]
    assert 'return {"turn"' not in inspect.getsource(loop)
