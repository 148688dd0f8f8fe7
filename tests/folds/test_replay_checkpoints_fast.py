"""checkpoint/taken takes a fast path in replay's hot loop (one or two per tool step in a
real log); the outcome must stay the reference fold's: the same state, or the same line,
seq and reason for a wrong one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dshd.folds import ReplayError, fold_lines, replay
from dshd.log import iter_records

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from replay import generate_log  # noqa: E402  (bench/replay.py: a sound log of turns and tool steps)

TREE = "4b825dc642cb6eb9a060e54bf8d69288fbe4904a"


def with_checkpoints(base: Path) -> list[dict]:
    """The events of ``base`` with a "before" checkpoint after every tool call and an
    "after" one after its result (seqs renumbered), as the checkpoints plugin writes them."""
    out: list[dict] = []
    step = 0
    for line in base.read_bytes().splitlines():
        event = json.loads(line)
        out.append(event)
        kind = event["type"]
        if kind == "request/header":
            step = event["data"]["step"]
        elif kind in ("tool/call", "tool/result"):
            phase = "before" if kind == "tool/call" else "after"
            data = {"step": step, "tree": TREE, "files": 12, "phase": phase}
            out.append({"type": "checkpoint/taken", "seq": 0, "at": event["at"], "turn": event["turn"], "data": data})
    for seq, event in enumerate(out, 1):
        event["seq"] = seq
    return out


def outcome(path: Path):
    try:
        result = replay(path, use_checkpoint=False)
        return ("ok", result.state, result.events)
    except ReplayError as exc:
        return ("error", exc.line, exc.seq, exc.reason)


def reference(path: Path):
    try:
        state, count, _, _ = fold_lines(None, iter_records(path))
        return ("ok", state, count)
    except ReplayError as exc:
        return ("error", exc.line, exc.seq, exc.reason)


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> list[dict]:
    base = tmp_path_factory.mktemp("base") / "log.jsonl"
    generate_log(base, 600)
    return with_checkpoints(base)


def write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events))
    return path


def test_a_log_full_of_checkpoints_replays_as_the_reference_folds_it(events, tmp_path):
    path = write(tmp_path / "log.jsonl", events)
    fast = outcome(path)
    assert fast[0] == "ok" and fast[2] == len(events)
    assert fast == reference(path)
    assert sum(e["type"] == "checkpoint/taken" for e in events) > 100


@pytest.mark.parametrize(
    ("field", "value", "reason_start"),
    [
        ("step", +1, "checkpoint/taken step"),
        ("step", -99, "checkpoint/taken step"),
        ("tree", "abc", "checkpoint/taken tree 'abc'"),
        ("phase", "during", "checkpoint/taken phase 'during'"),
        ("files", -1, "checkpoint/taken files -1"),
        ("turn", +1, "event in turn"),
    ],
)
@pytest.mark.parametrize("which", [0, 37, -1])
def test_a_wrong_checkpoint_is_rejected_with_the_reference_line_and_reason(events, tmp_path, field, value, reason_start, which):
    events = json.loads(json.dumps(events))
    target = [e for e in events if e["type"] == "checkpoint/taken"][which]
    if field == "turn":
        target["turn"] += value
    elif field == "step":
        target["data"]["step"] += value
    else:
        target["data"][field] = value
    path = write(tmp_path / "log.jsonl", events)
    fast = outcome(path)
    assert fast == reference(path)
    assert fast[0] == "error" and fast[2] == target["seq"] and fast[3].startswith(reason_start)
