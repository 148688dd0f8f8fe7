"""Wire types and the strict codec: round trips, strictness, value rules, error kinds."""

from __future__ import annotations

import os
import subprocess
import sys

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dshd_protocol import (
    ERROR_CODES,
    ERROR_KINDS,
    METHODS,
    InvalidMessage,
    InvalidParams,
    from_wire,
    is_session_id,
    jsonrpc_error,
    new_session_id,
    parse_params,
    result_to_wire,
    to_wire,
)
from dshd_protocol import types as T
from dshd_protocol.codec import wire_name
from dshd_protocol.strategies import malformed_wire, valid_wire

REQUESTS = [m for m, spec in METHODS.items() if spec.kind != "notification"]
# DSH_FUZZ_EXAMPLES raises the count for a thorough run; the default keeps the shared box calm.
FUZZ = settings(
    max_examples=int(os.environ.get("DSH_FUZZ_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SID = "s-01m8mc6qcsxwzr191meb9vsa1k"
REF = {"id": "g-1", "revision": 3}


def _drop_defaults(tp, wire):
    """``wire`` without top-level keys equal to their field's default (to_wire omits them).
    Nested optionals need no care: valid_wire never writes an optional as its default."""
    if not attrs.has(tp):
        return wire
    defaults = {wire_name(f.name): f.default for f in attrs.fields(tp) if f.default is not attrs.NOTHING}
    return {k: v for k, v in wire.items() if not (k in defaults and v is defaults[k])}


# ---- the table ----------------------------------------------------------------------


def test_table_covers_spec_section_6():
    expected = {
        "dsh/session/create", "dsh/session/list", "dsh/session/open", "dsh/session/fork",
        "dsh/session/close", "dsh/session/events", "dsh/agent/prompt", "dsh/agent/steer",
        "dsh/agent/cancel", "dsh/plan/set", "dsh/plan/get", "dsh/plan/history", "dsh/goal/get", "dsh/goal/create",
        "dsh/goal/edit", "dsh/goal/pause", "dsh/goal/resume", "dsh/goal/complete",
        "dsh/goal/block", "dsh/goal/clear", "dsh/goal/disarm", "dsh/goal/rounds", "dsh/questions/ask",
        "dsh/goal/changed", "dsh/plan/changed", "dsh/session/event", "dsh/agent/delta",
        "dsh/agent/activity", "dsh/permission/get", "dsh/permission/set", "dsh/permission/ask",
        "dsh/chat/get", "dsh/chat/item", "dsh/config/get", "dsh/session/clients", "dsh/question/resolved",
        "dsh/checkpoint/list", "dsh/checkpoint/diff", "dsh/checkpoint/restore",
    }  # fmt: skip
    assert set(METHODS) == expected
    assert METHODS["dsh/questions/ask"].kind == "server-request"
    assert METHODS["dsh/permission/ask"].kind == "server-request"
    assert {m for m, s in METHODS.items() if s.kind == "notification"} == {
        "dsh/goal/changed", "dsh/plan/changed", "dsh/session/event", "dsh/chat/item", "dsh/agent/delta",
        "dsh/agent/activity", "dsh/session/clients", "dsh/question/resolved",
    }  # fmt: skip
    for spec in METHODS.values():
        assert attrs.has(spec.params)
        if spec.kind == "notification":
            assert spec.result is None


def test_every_wire_class_is_frozen_and_kw_only():
    classes = [c for c in vars(T).values() if isinstance(c, type) and attrs.has(c) and c.__module__ == T.__name__]
    assert len(classes) > 20
    for cls in classes:
        assert all(f.kw_only for f in attrs.fields(cls)), cls
        if attrs.fields(cls):
            with pytest.raises(TypeError):
                cls(*[None] * len(attrs.fields(cls)))  # positional construction is refused
    ref = T.GoalRef(id="g", revision=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ref.revision = 2  # type: ignore[misc]


# ---- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
@FUZZ
@given(data=st.data())
def test_params_round_trip(method, data):
    spec = METHODS[method]
    wire = data.draw(valid_wire(spec.params))
    params = parse_params(method, wire)
    assert isinstance(params, spec.params)
    again = to_wire(params)
    assert again == _drop_defaults(spec.params, wire)
    assert parse_params(method, again) == params


@pytest.mark.parametrize("method", REQUESTS)
@FUZZ
@given(data=st.data())
def test_results_round_trip(method, data):
    spec = METHODS[method]
    if spec.result is None:
        assert from_wire(None, None) is None
        assert result_to_wire(method, None) is None
        return
    wire = data.draw(valid_wire(spec.result))
    result = from_wire(spec.result, wire)
    assert to_wire(result) == _drop_defaults(spec.result, wire)
    assert result_to_wire(method, result) == to_wire(result)


def test_to_wire_is_camel_case_and_omits_absent_optionals_but_keeps_nullables():
    view = T.GoalView(
        id="g-1", revision=2, objective="ship it", phase="blocked", max_rounds=256,
        rounds_started=37, rounds_left=219, tokens_used=0, created_at="2026-11-29T18:40:18.123Z",
        updated_at="2026-11-29T18:41:00Z", activation="disarmed",
        status=T.GoalStatus(text="37/256 · blocked: round-budget-exhausted", short="blocked: round-budget-exhausted",
                            tone="warning", usage="37 of 256 rounds used", detail=["Goal: ship it"]),
        actions=[T.GoalAction(id="edit", label="Edit the goal…")],
        blocked_reason=T.BlockedReason(code="round-budget-exhausted", message="spent"),
    )  # fmt: skip
    assert to_wire(view) == {
        "id": "g-1", "revision": 2, "objective": "ship it", "phase": "blocked", "maxRounds": 256,
        "roundsStarted": 37, "roundsLeft": 219, "tokensUsed": 0, "createdAt": "2026-11-29T18:40:18.123Z",
        "updatedAt": "2026-11-29T18:41:00Z", "activation": "disarmed",
        "status": {"text": "37/256 · blocked: round-budget-exhausted", "short": "blocked: round-budget-exhausted",
                   "tone": "warning", "usage": "37 of 256 rounds used", "detail": ["Goal: ship it"]},
        "actions": [{"id": "edit", "label": "Edit the goal…"}],
        "blockedReason": {"code": "round-budget-exhausted", "message": "spent"},
    }  # fmt: skip
    opened = T.SessionOpenResult(session_id=SID, agent_id="a-1", plan=T.PlanState(active=True), goal=None)
    assert to_wire(opened) == {"sessionId": SID, "agentId": "a-1", "plan": {"active": True}, "goal": None}
    assert to_wire(T.SessionOpenParams(session_id=SID)) == {"sessionId": SID}
    assert to_wire(T.PlanState(active=False, pending=True)) == {"active": False, "pending": True}


def test_pygls_converter_writes_the_same_json():
    """The convention is lsprotocol's, so passing our objects straight to pygls is safe too."""
    from pygls.protocol import default_converter

    pygls_converter = default_converter()
    samples = [
        T.GoalChangedParams(agent_id="a", session_id=SID, op="clear", revision=4),
        T.SessionOpenResult(session_id=SID, agent_id="a", plan=T.PlanState(active=True, pending=False), goal=None),
        T.QuestionsAskResult(answers=[T.Answer(id="q", choice="revise", comments=[T.LineComment(line=3, text="why")])]),
        T.SessionEventParams(
            agent_id="a", session_id=SID,
            event=T.SessionEvent(seq=2, type="plan/mode", at="2026-11-29T18:40:18.123Z", data={"active": True}),
        ),
    ]  # fmt: skip
    for obj in samples:
        assert pygls_converter.unstructure(obj) == to_wire(obj)


# ---- strictness ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
@FUZZ
@given(data=st.data())
def test_malformed_params_always_name_the_wrong_field(method, data):
    spec = METHODS[method]
    wire, fault = data.draw(malformed_wire(spec.params))
    with pytest.raises(InvalidParams) as caught:
        parse_params(method, wire)
    assert caught.value.field == (fault.field or "params"), (fault, caught.value.message)
    assert caught.value.message


@pytest.mark.slow
@pytest.mark.parametrize("method", [m for m in REQUESTS if METHODS[m].result is not None])
@FUZZ
@given(data=st.data())
def test_malformed_results_name_the_wrong_field(method, data):
    spec = METHODS[method]
    target = spec.result
    args = getattr(target, "__args__", ())
    if type(None) in args:  # GoalView | None: break the GoalView
        target = next(a for a in args if a is not type(None))
    wire, fault = data.draw(malformed_wire(target))
    with pytest.raises(InvalidMessage) as caught:
        from_wire(target, wire)
    assert not isinstance(caught.value, InvalidParams)
    assert caught.value.field == (fault.field or "result"), (fault, caught.value.message)


def _error(method, raw):
    with pytest.raises(InvalidParams) as caught:
        parse_params(method, raw)
    return caught.value.field, caught.value.message


@pytest.mark.parametrize(
    ("method", "raw", "field"),
    [
        # no coercion: string is not bool or number, bool not int, float not int, null not string
        ("dsh/plan/set", {"agentId": "a", "active": "false"}, "active"),
        ("dsh/plan/set", {"agentId": "a", "active": 0}, "active"),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": "7"}, "maxRounds"),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": True}, "maxRounds"),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": 7.0}, "maxRounds"),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": 7.9}, "maxRounds"),
        ("dsh/goal/create", {"agentId": "a", "objective": None}, "objective"),
        ("dsh/session/create", {"title": None}, "title"),
        ("dsh/agent/prompt", {"agentId": "a", "text": ["/plan"]}, "text"),
        ("dsh/questions/ask", {"agentId": "a", "sessionId": SID, "questions": "q"}, "questions"),
        # unknown and missing fields, named; snake_case is not the wire spelling
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "max_rounds": 5}, "max_rounds"),
        ("dsh/plan/get", {"agentId": "a", "force": True}, "force"),
        ("dsh/goal/pause", {"agentId": "a"}, "ref"),
        ("dsh/goal/pause", {"ref": REF}, "agentId"),
        ("dsh/session/list", {"verbose": True}, "verbose"),
        # nested paths
        ("dsh/goal/pause", {"agentId": "a", "ref": {"id": "g", "revision": "3"}}, "ref.revision"),
        ("dsh/goal/pause", {"agentId": "a", "ref": {"id": "g"}}, "ref.revision"),
        ("dsh/goal/pause", {"agentId": "a", "ref": {"id": "g", "revision": 3, "phase": "x"}}, "ref.phase"),
        ("dsh/goal/block", {"agentId": "a", "ref": REF, "reason": {"code": "Too Slow", "message": "m"}}, "reason.code"),
        ("dsh/goal/block", {"agentId": "a", "ref": REF, "reason": {"code": "slow", "message": ""}}, "reason.message"),
        ("dsh/goal/block", {"agentId": "a", "ref": REF, "reason": "slow"}, "reason"),
        (
            "dsh/questions/ask",
            {"agentId": "a", "sessionId": SID, "questions": [
                {"id": "q", "kind": "plan-review", "title": "t", "plan": "# p", "choices": ["approve", None]},
            ]},
            "questions[0].choices[1]",
        ),  # fmt: skip
        # params that are not an object
        ("dsh/plan/get", [], "params"),
        ("dsh/plan/get", "a", "params"),
        ("dsh/plan/get", 3, "params"),
        ("dsh/plan/get", None, "agentId"),  # absent params read as {}
        # value rules
        ("dsh/session/open", {"sessionId": "../x"}, "sessionId"),
        ("dsh/session/open", {"sessionId": "/etc"}, "sessionId"),
        ("dsh/session/open", {"sessionId": ""}, "sessionId"),
        ("dsh/session/open", {"sessionId": SID + "\n"}, "sessionId"),
        ("dsh/session/open", {"sessionId": SID.upper()}, "sessionId"),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": 0}, "maxRounds"),
        ("dsh/goal/create", {"agentId": "a", "objective": "   "}, "objective"),
        ("dsh/goal/create", {"agentId": "", "objective": "o"}, "agentId"),
        ("dsh/goal/edit", {"agentId": "a", "ref": {"id": "g", "revision": 0}, "maxRounds": 3}, "ref.revision"),
        ("dsh/goal/edit", {"agentId": "a", "ref": REF}, "objective"),  # needs objective or maxRounds
        ("dsh/session/events", {"agentId": "a", "limit": 0}, "limit"),
        ("dsh/session/events", {"agentId": "a", "afterSeq": -1}, "afterSeq"),
        ("dsh/session/fork", {"agentId": "a", "atSeq": -1}, "atSeq"),
        ("dsh/session/fork", {"agentId": "a", "atSeq": 0}, "atSeq"),  # seq 1 is session/start
        ("dsh/agent/steer", {"agentId": "a", "text": ""}, "text"),
    ],
)
def test_specific_bad_params(method, raw, field):
    got, message = _error(method, raw)
    assert got == field, message


def test_error_messages_say_what_was_expected():
    assert _error("dsh/plan/set", {"agentId": "a", "active": "false"})[1] == "expected boolean, got string"
    assert _error("dsh/goal/pause", {"agentId": "a"})[1] == "missing required field"
    assert _error("dsh/plan/get", {"agentId": "a", "x": 1})[1] == "unknown field"
    assert "session id" in _error("dsh/session/open", {"sessionId": "../x"})[1]
    assert "kebab" in _error("dsh/goal/block", {"agentId": "a", "ref": REF, "reason": {"code": "A", "message": "m"}})[1]


def test_valid_edge_values_pass():
    assert parse_params("dsh/session/events", {"agentId": "a", "afterSeq": 0, "limit": 1}).after_seq == 0
    assert parse_params("dsh/session/list", None) == T.SessionListParams()
    assert parse_params("dsh/session/list", {}) == T.SessionListParams()
    edit = parse_params("dsh/goal/edit", {"agentId": "a", "ref": REF, "maxRounds": 1})
    assert edit.ref == T.GoalRef(id="g-1", revision=3) and edit.objective is None
    assert parse_params("dsh/session/open", {"sessionId": SID, "reload": True}).reload is True
    assert parse_params("dsh/session/open", {"sessionId": SID}).reload is False
    big = parse_params("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": 2**40})
    assert big.max_rounds == 2**40


def test_capabilities_ignore_unknown_keys_but_not_wrong_types():
    caps = from_wire(T.DshClientCapabilities, {"questions": True, "futureThing": 1}, root="dsh")
    assert caps == T.DshClientCapabilities(questions=True)
    assert from_wire(T.DshClientCapabilities, {}, root="dsh").questions is False
    with pytest.raises(InvalidMessage) as caught:
        from_wire(T.DshClientCapabilities, {"questions": "yes"}, root="dsh")
    assert caught.value.field == "questions"
    server = from_wire(T.DshServerCapabilities, {"version": 1, "questions": True})
    assert to_wire(server) == {"version": 1, "questions": True}


def test_unknown_method_is_a_programming_error():
    with pytest.raises(KeyError):
        parse_params("dsh/nope", {})


def test_result_to_wire_checks_the_table():
    view = T.PlanState(active=True)
    assert result_to_wire("dsh/plan/get", view) == {"active": True}
    with pytest.raises(TypeError):
        result_to_wire("dsh/goal/create", view)
    with pytest.raises(TypeError):
        result_to_wire("dsh/goal/create", None)
    with pytest.raises(TypeError):
        result_to_wire("dsh/session/close", view)
    with pytest.raises(ValueError):
        result_to_wire("dsh/goal/changed", None)


# ---- session ids --------------------------------------------------------------------------


def test_session_ids():
    ids = [new_session_id(now_ms=1_700_000_000_000 + i) for i in range(50)]
    assert all(is_session_id(i) for i in ids)
    assert ids == sorted(ids)  # time-ordered
    assert len({new_session_id() for _ in range(1000)}) == 1000
    for bad in ["", "../x", "/etc", "s-", SID + "\n", SID[:-1], SID + "0", SID.upper(), "s-" + "i" * 26, 7, None]:
        assert not is_session_id(bad), bad


def test_the_kebab_check_is_the_schema_pattern():
    """One rule (dshd_protocol.ids.KEBAB_CASE), two uses: the core's check (fullmatch, which
    dshd.formats re-exports) and the schema pattern the codec searches. Both accept and
    refuse the same codes, a trailing newline included."""
    from dshd.formats import is_kebab_case

    def wire_accepts(code: str) -> bool:
        try:
            from_wire(T.BlockedReason, {"code": code, "message": "m"})
        except InvalidMessage:
            return False
        return True

    codes = ["ci-down", "round-budget-exhausted", "a", "x2-y3", "Budget", "round_budget", "-x", "x-",
             "a--b", "", "ok code", "ci-down\n", "é-x"]
    for code in codes:
        assert is_kebab_case(code) == wire_accepts(code), code
    assert not is_kebab_case(None) and not is_kebab_case(7)


# ---- errors ----------------------------------------------------------------------------------


def test_error_codes():
    assert ERROR_CODES["invalid-params"] == -32602
    others = [code for kind, code in ERROR_CODES.items() if kind != "invalid-params"]
    assert len(set(others)) == len(others) == len(ERROR_KINDS) - 1
    assert all(-32099 <= code <= -32001 for code in others)
    assert set(ERROR_CODES) == set(ERROR_KINDS)


def test_invalid_params_to_jsonrpc_error():
    try:
        parse_params("dsh/goal/pause", {"agentId": "a", "ref": {"id": "g", "revision": "3"}})
    except InvalidParams as exc:
        error = exc.to_jsonrpc_error()
    assert error["code"] == -32602
    assert error["data"] == {"kind": "invalid-params", "field": "ref.revision"}
    assert "ref.revision" in error["message"]
    assert jsonrpc_error("stale-revision", "stale", current=4, goalId="g-1") == {
        "code": ERROR_CODES["stale-revision"], "message": "stale",
        "data": {"kind": "stale-revision", "current": 4, "goalId": "g-1"},
    }  # fmt: skip
    with pytest.raises(ValueError):
        jsonrpc_error("oops", "x")


def test_protocol_imports_neither_dshd_nor_pygls():
    code = (
        "import sys, dshd_protocol, dshd_protocol.schema;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dshd', 'pygls', 'lsprotocol'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
