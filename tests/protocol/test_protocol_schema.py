"""The checked-in JSON Schema: fresh, valid, closed, and in agreement with the codec."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dshd_protocol import ERROR_CODES, ERROR_KINDS, METHODS, from_wire, jsonrpc_error, parse_params, to_wire
from dshd_protocol import types as T
from dshd_protocol.codec import tagged_union
from dshd_protocol.schema import REGENERATE, SCHEMA_PATH, build_schema, load_schema, render_schema
from dshd_protocol.strategies import malformed_wire, valid_wire

# DSH_FUZZ_EXAMPLES raises the count for a thorough run; the default keeps the shared box calm.
FUZZ = settings(
    max_examples=int(os.environ.get("DSH_FUZZ_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SCHEMA = load_schema()
SID = "s-01m8mc6qcsxwzr191meb9vsa1k"
AT = "2026-11-29T18:40:18.123Z"


@functools.lru_cache(maxsize=None)
def _cached_validator(subschema_json: str) -> Draft202012Validator:
    return Draft202012Validator({"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], **json.loads(subschema_json)})


def validator_for(subschema: dict) -> Draft202012Validator:
    """A validator for one part of the document (its $refs resolve in the document's $defs)."""
    return _cached_validator(json.dumps(subschema, sort_keys=True))


def params_validator(method: str) -> Draft202012Validator:
    return validator_for(SCHEMA["methods"][method]["params"])


def result_validator(method: str) -> Draft202012Validator:
    return validator_for(SCHEMA["methods"][method]["result"])


def test_checked_in_schema_is_fresh():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema(), (
        f"{SCHEMA_PATH.name} is stale: regenerate it with `{REGENERATE}` and commit it"
    )


def test_check_mode_of_the_generator_agrees():
    done = subprocess.run([sys.executable, "-m", "dshd_protocol.schema", "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_schema_is_valid_draft_2020_12():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(SCHEMA)  # checks every $defs entry too


def test_schema_covers_every_method_and_error():
    assert list(SCHEMA["methods"]) == list(METHODS)
    for name, spec in METHODS.items():
        entry = SCHEMA["methods"][name]
        assert entry["kind"] == spec.kind
        assert entry["params"] == {"$ref": f"#/$defs/{spec.params.__name__}"}
        assert ("result" in entry) == (spec.kind != "notification")
    assert SCHEMA["errors"] == {kind: {"code": ERROR_CODES[kind]} for kind in ERROR_KINDS}
    assert "DshClientCapabilities" in SCHEMA["$defs"] and "DshServerCapabilities" in SCHEMA["$defs"]


def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_ref_resolves_and_every_object_is_closed():
    defs = SCHEMA["$defs"]
    for ref in _refs(SCHEMA):
        assert ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in defs, ref
    wire_classes = {c.__name__: c for c in vars(T).values() if isinstance(c, type) and attrs.has(c)}
    for name, definition in defs.items():
        if name == "ErrorData":
            continue
        if "oneOf" in definition:  # a tagged union (ChatItem): named members, each with its tag
            tagged, by_tag = tagged_union(getattr(T, name))
            assert [m["$ref"] for m in definition["oneOf"]] == [f"#/$defs/{c.__name__}" for c in by_tag.values()]
            for value, cls in by_tag.items():
                assert defs[cls.__name__]["properties"][tagged.tag] == {"type": "string", "enum": [value]}
                assert tagged.tag in defs[cls.__name__]["required"]
            continue
        assert definition["type"] == "object"
        cls = wire_classes[name]
        if name.endswith("Capabilities"):  # LSP-style negotiation: open to newer keys
            assert "additionalProperties" not in definition and cls.__dsh_open__
            continue
        assert definition["additionalProperties"] is False, name
        required = [f for f in attrs.fields(cls) if f.default is attrs.NOTHING]
        assert len(definition.get("required", [])) == len(required), name


def test_optional_fields_are_never_null_and_nullable_ones_are_required():
    goal_view = SCHEMA["$defs"]["GoalView"]
    assert "blockedReason" not in goal_view["required"]
    assert goal_view["properties"]["blockedReason"] == {"$ref": "#/$defs/BlockedReason"}
    opened = SCHEMA["$defs"]["SessionOpenResult"]
    assert "goal" in opened["required"]
    assert {"type": "null"} in opened["properties"]["goal"]["anyOf"]
    edit = SCHEMA["$defs"]["GoalEditParams"]
    assert edit["anyOf"] == [{"required": ["objective"]}, {"required": ["maxRounds"]}, {"required": ["maxTokens"]}]


# ---- real messages ------------------------------------------------------------------

GOAL_VIEW = {
    "id": "g-01", "revision": 3, "objective": "Make the test suite pass", "phase": "active",
    "maxRounds": 256, "roundsStarted": 37, "roundsLeft": 219, "tokensUsed": 12400, "maxTokens": 50000,
    "createdAt": AT, "updatedAt": "2026-11-29T18:52:03Z", "activation": "armed",
    "status": {"text": "37/256 · 12.4k/50k tok · active", "short": "active", "tone": "none",
               "usage": "37 of 256 rounds used, 12.4k of 50k tokens",
               "detail": ["Goal: Make the test suite pass", "Active: rounds continue on their own."]},
    "actions": [{"id": "edit", "label": "Edit the goal…"}, {"id": "pause", "label": "Pause"}],
}  # fmt: skip
SAMPLES = [
    ("dsh/session/create", {"title": "refactor the parser"}, {"sessionId": SID, "agentId": "a-1"}),
    ("dsh/session/create", {}, {"sessionId": SID, "agentId": "a-1"}),
    ("dsh/session/list", {}, {"sessions": [
        {"sessionId": SID, "title": None, "updatedAt": AT},
        {"sessionId": SID, "title": "t", "updatedAt": AT, "goal": GOAL_VIEW},
    ]}),  # fmt: skip
    ("dsh/session/open", {"sessionId": SID, "reload": True},
     {"sessionId": SID, "agentId": "a-2", "plan": {"active": True, "pending": False}, "goal": None}),  # fmt: skip
    ("dsh/session/fork", {"agentId": "a-1", "atSeq": 12}, {"sessionId": SID, "agentId": "a-3"}),
    ("dsh/session/close", {"agentId": "a-1"}, None),
    ("dsh/session/events", {"agentId": "a-1", "afterSeq": 0, "limit": 2}, {"events": [
        {"seq": 1, "type": "session/start", "at": AT, "data": {"sessionId": SID, "formatVersion": 1}},
        {"seq": 2, "type": "turn/open", "at": AT, "turn": 1, "data": {"turn": 1, "cause": "prompt"}},
    ], "nextSeq": 2}),  # fmt: skip
    ("dsh/agent/prompt", {"agentId": "a-1", "text": "/plan add a cache"}, {"turn": 1, "stopReason": "end-turn"}),
    ("dsh/agent/prompt", {"agentId": "a-1", "text": "/plan"}, {"turn": None, "stopReason": "command"}),
    ("dsh/agent/steer", {"agentId": "a-1", "text": "use sqlite"}, {"queued": True}),
    ("dsh/agent/cancel", {"agentId": "a-1"}, None),
    ("dsh/plan/set", {"agentId": "a-1", "active": True}, {"outcome": "queued", "state": {"active": False, "pending": True}}),
    ("dsh/plan/get", {"agentId": "a-1"}, {"active": False}),
    ("dsh/goal/get", {"agentId": "a-1"}, None),
    ("dsh/goal/get", {"agentId": "a-1"}, GOAL_VIEW),
    ("dsh/goal/create", {"agentId": "a-1", "objective": "Make the test suite pass"}, GOAL_VIEW),
    ("dsh/goal/edit", {"agentId": "a-1", "ref": {"id": "g-01", "revision": 2}, "maxRounds": 300}, GOAL_VIEW),
    ("dsh/goal/pause", {"agentId": "a-1", "ref": {"id": "g-01", "revision": 3}}, GOAL_VIEW | {"phase": "paused"}),
    ("dsh/goal/block", {"agentId": "a-1", "ref": {"id": "g-01", "revision": 3},
                        "reason": {"code": "ci-down", "message": "CI is down"}},
     GOAL_VIEW | {"phase": "blocked", "blockedReason": {"code": "ci-down", "message": "CI is down"}}),  # fmt: skip
    ("dsh/goal/clear", {"agentId": "a-1", "ref": {"id": "g-01", "revision": 4}}, {"ref": {"id": "g-01", "revision": 5}}),
    ("dsh/goal/disarm", {"agentId": "a-1"}, GOAL_VIEW | {"activation": "disarmed"}),
    ("dsh/questions/ask",
     {"agentId": "a-1", "sessionId": SID, "questions": [{"id": "q-1", "kind": "plan-review", "title": "Review the plan",
                                                         "plan": "# Plan\n\n1. do it", "choices": ["approve", "revise"]}]},
     {"answers": [{"id": "q-1", "choice": "revise", "feedback": "smaller steps",
                   "comments": [{"line": 3, "text": "split this"}]}]}),  # fmt: skip
    ("dsh/goal/changed", {"agentId": "a-1", "sessionId": SID, "op": "round", "revision": 3, "goal": GOAL_VIEW}, None),
    ("dsh/goal/changed", {"agentId": "a-1", "sessionId": SID, "op": "clear", "revision": 5}, None),
    ("dsh/plan/changed", {"agentId": "a-1", "sessionId": SID, "active": False, "pending": True}, None),
    ("dsh/session/event", {"agentId": "a-1", "sessionId": SID,
                           "event": {"seq": 9, "type": "plan/mode", "at": AT, "turn": 2, "data": {"active": False}}}, None),  # fmt: skip
]


@pytest.mark.parametrize(("method", "params", "result"), SAMPLES)
def test_real_messages_validate_and_parse(method, params, result):
    params_validator(method).validate(params)
    assert to_wire(parse_params(method, params)) == params
    if METHODS[method].kind != "notification":
        result_validator(method).validate(result)
        assert to_wire(from_wire(METHODS[method].result, result)) == result


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("dsh/session/open", {"sessionId": "../x"}),
        ("dsh/session/open", {"sessionId": SID, "reload": "true"}),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "maxRounds": 0}),
        ("dsh/goal/create", {"agentId": "a", "objective": "o", "max_rounds": 5}),
        ("dsh/goal/create", {"agentId": "a", "objective": None}),
        ("dsh/goal/edit", {"agentId": "a", "ref": {"id": "g", "revision": 1}}),
        ("dsh/goal/block", {"agentId": "a", "ref": {"id": "g", "revision": 1}, "reason": {"code": "CI", "message": "m"}}),
        ("dsh/plan/set", {"agentId": "a", "active": 1}),
    ],
)
def test_bad_messages_fail_the_schema_too(method, params):
    assert not params_validator(method).is_valid(params)


def test_error_data_validates():
    validator = validator_for({"$ref": "#/$defs/ErrorData"})
    validator.validate(jsonrpc_error("invalid-params", "bad", field="ref.revision")["data"])
    validator.validate(jsonrpc_error("replay-failed", "bad", seq=None, line=4, reason="seq gap")["data"])
    validator.validate(jsonrpc_error("unknown-agent", "who", agentId="a-9")["data"])  # extra fields allowed
    validator.validate({"kind": "stale-revision", "current": 4, "goalId": "g-1"})
    assert not validator.is_valid({"kind": "stale-revision", "goalId": "g-1"})  # current is required
    assert not validator.is_valid({"kind": "stale-revision", "current": "4", "goalId": "g-1"})
    assert not validator.is_valid({"kind": "nope"})


# ---- the schema and the codec agree ----------------------------------------------------------


def _schema_can_tell(value) -> bool:
    """Faults JSON Schema cannot express (or Python's jsonschema reads differently)."""
    if isinstance(value, float) and value.is_integer():
        return False  # JSON Schema counts 7.0 as an integer
    if isinstance(value, str) and value.endswith("\n"):
        return False  # Python's re lets a final "$" match before "\n"; ECMA 262 does not
    return True


@pytest.mark.slow
@pytest.mark.parametrize("method", list(METHODS))
@FUZZ
@given(data=st.data())
def test_schema_agrees_with_the_codec_on_params(method, data):
    params_type = METHODS[method].params
    validator = params_validator(method)
    validator.validate(data.draw(valid_wire(params_type)))
    wire, fault = data.draw(malformed_wire(params_type))
    if _schema_can_tell(fault.value):
        assert not validator.is_valid(wire), fault


@pytest.mark.slow
@pytest.mark.parametrize("method", [m for m, s in METHODS.items() if s.kind != "notification" and s.result is not None])
@FUZZ
@given(data=st.data())
def test_schema_agrees_with_the_codec_on_results(method, data):
    result_type = METHODS[method].result
    validator = result_validator(method)
    validator.validate(data.draw(valid_wire(result_type)))
    args = getattr(result_type, "__args__", ())
    target = next((a for a in args if a is not type(None)), result_type)
    wire, fault = data.draw(malformed_wire(target))
    if _schema_can_tell(fault.value):
        assert not validator.is_valid(wire), fault


def test_build_is_deterministic():
    assert json.dumps(build_schema()) == json.dumps(build_schema())
