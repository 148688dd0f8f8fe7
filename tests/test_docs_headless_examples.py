"""docs/headless.md's JSON examples are what `dshd run --json` prints: every line of every
```json block is checked against the lines' JSON Schema (protocol/, `./run protocol`
makes it from dshd_protocol.run_lines), and every JSON value the result's field table
shows for a field is checked against that field's schema (e.g. `personNeeded` is a list).
A doc that disagrees with the product fails here, not in a person's script."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jsonschema import Draft202012Validator

from dshd_protocol import run_lines

DOC = Path(__file__).resolve().parents[1] / "docs" / "headless.md"
LINE_TYPES = {"session": "RunSessionLine", "item": "RunItemLine", "result": "RunResultLine"}


def schema() -> dict:
    return run_lines.load_run_schema()


def json_blocks(text: str) -> list[str]:
    return re.findall(r"^```json\n(.*?)^```", text, re.S | re.M)


def result_table(text: str) -> dict[str, str]:
    """The result line's field table: field -> its description."""
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", text, re.M)
    return {field: description for field, description in rows}


def field_schema(field: str) -> dict:
    whole = schema()
    properties = whole["$defs"][LINE_TYPES["result"]]["properties"]
    return {"$schema": whole["$schema"], "$defs": whole["$defs"], **properties[field]}


def test_every_json_line_of_the_doc_is_a_valid_line_of_its_type():
    blocks = json_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 2  # the successful run, the run that needed a person
    validator = Draft202012Validator(schema())
    checked = []
    for block in blocks:
        for line in block.splitlines():
            value = json.loads(line)
            errors = [e.message for e in validator.iter_errors(value)]
            assert not errors, (line[:200], errors)
            # The line is valid as the type it says it is (not only as some line).
            own = Draft202012Validator({"$defs": schema()["$defs"], "$ref": f"#/$defs/{LINE_TYPES[value['type']]}"})
            assert not list(own.iter_errors(value)), line[:200]
            checked.append(value["type"])
    assert {"session", "item", "result"} <= set(checked)
    results = [json.loads(line) for block in blocks for line in block.splitlines() if '"type": "result"' in line]
    assert any(isinstance(r.get("personNeeded"), list) and r["personNeeded"] for r in results)


def test_the_result_tables_json_values_match_their_fields_schema():
    table = result_table(DOC.read_text(encoding="utf-8"))
    assert "personNeeded" in table and "usage" in table
    checked = 0
    for field, description in table.items():
        for snippet in re.findall(r"`(\{.*?\}|\[.*?\])`", description):
            try:
                value = json.loads(snippet)
            except ValueError:
                continue  # a shape in words ({inputTokens, outputTokens, ...}), not JSON
            validator = Draft202012Validator(field_schema(field))
            # An entry shown alone is one element of a list-valued field.
            as_field = [value] if field_schema(field).get("type") == "array" and isinstance(value, dict) else value
            assert not list(validator.iter_errors(as_field)), (field, snippet)
            checked += 1
    assert checked >= 2  # personNeeded's two kinds at least


def test_control_the_old_personneeded_description_is_caught():
    """personNeeded as one object (what the doc said) is not the product's list."""
    validator = Draft202012Validator(field_schema("personNeeded"))
    assert list(validator.iter_errors({"kind": "permission", "callId": "call-1", "tool": "write_file"}))
    assert not list(validator.iter_errors([{"kind": "permission", "callId": "call-1", "tool": "write_file"}]))
    bad_doc = '```json\n{"type": "result", "stopReason": "end-turn", "usage": {"inputTokens": 1, "outputTokens": 1}, ' \
              '"durationMs": 1, "sessionId": null, "exitCode": 3, "personNeeded": {"kind": "plan-review"}}\n```\n'
    [block] = json_blocks(bad_doc)
    assert list(Draft202012Validator(schema()).iter_errors(json.loads(block)))
