"""The JSON Schema of `dshd run --json`'s lines: checked in up to date, a valid draft
2020-12 document, and it tells good lines from bad ones (the chat items are the wire's)."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from dshd_protocol import run_lines
from dshd_protocol.schema import load_schema

SID = "s-01jf3q8m2v9k7x4c6b5n0p1r2t"
SESSION = {"type": "session", "sessionId": SID, "agentId": "agent-1", "workspace": "/w", "via": "in-process"}
ITEM = {"type": "item", "item": {
    "id": "a1", "kind": "assistant-message", "turn": 1, "step": 1, "seq": 3, "at": "2026-12-01T18:00:00Z",
    "text": "hi", "partial": False}}
RESULT = {"type": "result", "stopReason": "end-turn", "exitCode": 0, "sessionId": SID, "durationMs": 812,
          "usage": {"inputTokens": 12, "outputTokens": 5}}


def validator() -> Draft202012Validator:
    return Draft202012Validator(run_lines.load_run_schema())


def test_the_checked_in_schema_is_current_and_valid():
    assert run_lines.main(["--check"]) == 0
    Draft202012Validator.check_schema(run_lines.load_run_schema())


def test_good_lines_pass_and_bad_ones_fail():
    v = validator()
    for line in (SESSION, ITEM, RESULT, {**RESULT, "exitCode": 3, "plan": "# Plan\n",
                  "personNeeded": [{"kind": "permission", "callId": "call-1", "tool": "write_file"}]},
                 {**RESULT, "exitCode": 1, "stopReason": None, "sessionId": None,
                  "error": {"kind": "invalid-params", "message": "bad", "field": "goal"}}):
        assert not list(v.iter_errors(line)), line
    bad = [
        {k: v for k, v in RESULT.items() if k != "sessionId"},  # a required field missing
        {**RESULT, "exitCode": 5},  # not an R-4 code
        {**RESULT, "extra": 1},  # closed objects
        {**ITEM, "item": {**ITEM["item"], "kind": "no-such-kind"}},  # the chat item is checked as the wire's
        {**SESSION, "type": "start"},
        {**SESSION, "via": "carrier-pigeon"},
        {**RESULT, "personNeeded": [{"kind": "coffee"}]},
    ]
    for line in bad:
        assert list(v.iter_errors(line)), line


def test_the_chat_items_are_the_wire_protocols_own_definition():
    run_defs = run_lines.load_run_schema()["$defs"]
    wire_defs = load_schema()["$defs"]
    assert run_defs["ChatItem"] == wire_defs["ChatItem"]
    assert run_defs["AssistantMessageChatItem"] == wire_defs["AssistantMessageChatItem"]
    assert run_defs["GoalView"] == wire_defs["GoalView"]


def test_the_docs_example_lines_are_valid():
    import json
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "headless.md").read_text()
    block = re.findall(r"```json\n(.*?)```", docs, re.S)[0]  # the successful run (all: tests/test_docs_headless_examples.py)
    lines = [json.loads(line) for line in block.splitlines()]
    assert [line["type"] for line in (lines[0], lines[-1])] == ["session", "result"]
    v = validator()
    for line in lines:
        assert not list(v.iter_errors(line)), line
