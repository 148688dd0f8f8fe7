"""docs/protocol.md documents exactly the methods and error kinds that exist, and its
examples are real: every one parses with the codec and validates against the schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from dshd_protocol import ERROR_CODES, ERROR_KINDS, METHODS, from_wire, parse_params
from dshd_protocol.schema import load_schema

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
SCHEMA = load_schema()

HEADING = re.compile(r"^(#{2,3}) `([^`]+)`\s*$", re.MULTILINE)
FENCE = re.compile(r"^```json (params|result|error)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
METHOD_NAME = re.compile(r"(?<!\.)\bdsh/[a-z]+/[a-zA-Z]+\b")  # not .dsh/sessions/... paths


def sections() -> dict[str, str]:
    """Backticked heading -> its text up to the next heading of level 2 or 3."""
    out: dict[str, str] = {}
    matches = list(HEADING.finditer(DOC))
    bounds = [m.start() for m in re.finditer(r"^#{2,3} ", DOC, re.MULTILINE)] + [len(DOC)]
    for match in matches:
        end = next(b for b in bounds if b > match.start())
        assert match.group(2) not in out, f"two sections for {match.group(2)}"
        out[match.group(2)] = DOC[match.end() : end]
    return out


SECTIONS = sections()


def validator_for(subschema: dict) -> Draft202012Validator:
    return Draft202012Validator({"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], **subschema})


def test_every_method_has_a_section():
    missing = [m for m in METHODS if m not in SECTIONS]
    assert not missing, f"docs/protocol.md has no `## ` or `### ` section for {missing}"


def test_the_doc_names_no_method_that_does_not_exist():
    named = set(METHOD_NAME.findall(DOC)) | {h for h in SECTIONS if h.startswith("dsh/")}
    unknown = sorted(named - set(METHODS))
    assert not unknown, f"docs/protocol.md names methods that are not in METHODS: {unknown}"


def test_every_error_kind_has_a_section_and_the_right_code():
    missing = [k for k in ERROR_KINDS if k not in SECTIONS]
    assert not missing, f"no section for error kinds {missing}"
    table = dict(re.findall(r"^\| `([a-z-]+)` \| (-\d+) \|", DOC, re.MULTILINE))
    assert {k: int(v) for k, v in table.items()} == ERROR_CODES


def test_sections_state_direction_and_errors():
    for method, spec in METHODS.items():
        text = SECTIONS[method]
        direction = {
            "request": "client → server, request",
            "notification": "server → client, notification",
            "server-request": "server → client, request",
        }[spec.kind]
        assert f"**Direction:** {direction}" in text, method
        if spec.kind == "request":
            errors = re.search(r"\*\*Errors:\*\*(.*?)(?:\n\n|$)", text, re.DOTALL)
            assert errors, f"{method}: no **Errors:** line"
            # every kind has a hyphen; other backticked words there are field names
            kinds = set(re.findall(r"`([a-z]+-[a-z-]+)`", errors.group(1)))
            assert "invalid-params" in kinds, method
            assert kinds <= set(ERROR_KINDS), (method, kinds - set(ERROR_KINDS))


def _examples(text: str) -> list[tuple[str, object]]:
    return [(tag, json.loads(body)) for tag, body in FENCE.findall(text)]


def test_every_method_has_examples():
    for method, spec in METHODS.items():
        tags = [tag for tag, _ in _examples(SECTIONS[method])]
        assert "params" in tags, method
        assert ("result" in tags) == (spec.kind != "notification"), method


@pytest.mark.parametrize("method", list(METHODS))
def test_method_examples_are_real(method):
    spec = METHODS[method]
    entry = SCHEMA["methods"][method]
    for tag, value in _examples(SECTIONS[method]):
        if tag == "params":
            parse_params(method, value)
            validator_for(entry["params"]).validate(value)
        elif tag == "result":
            from_wire(spec.result, value)
            validator_for(entry["result"]).validate(value)
        else:
            _check_error(value)
            listed = re.search(r"\*\*Errors:\*\*(.*?)(?:\n\n|$)", SECTIONS[method], re.DOTALL)
            assert f"`{value['data']['kind']}`" in listed.group(1), (method, value)


def _check_error(value):
    assert set(value) == {"code", "message", "data"}
    kind = value["data"]["kind"]
    assert value["code"] == ERROR_CODES[kind]
    validator_for({"$ref": "#/$defs/ErrorData"}).validate(value["data"])


def test_error_examples_outside_methods_are_real():
    outside = DOC
    for method in METHODS:
        outside = outside.replace(SECTIONS[method], "")
    errors = [value for tag, value in _examples(outside) if tag == "error"]
    assert errors
    for value in errors:
        _check_error(value)


def test_capability_is_documented():
    assert '"dsh": {"questions": true, "permissions": true}' in DOC
    assert "DshClientCapabilities" in DOC and "DshClientCapabilities" in SCHEMA["$defs"]
