"""Strict replay of `context/compact`: a sound compacted log written through SessionStore,
edited to break one rule. Full replay, incremental replay from a checkpoint before the bad
line, SessionStore.open and the real `dshd log verify --json` must all name the same line,
seq and reason, and leave the file untouched (as tests/folds/test_tamper.py does for goals)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from folds.test_tamper import edit_line, reports_everywhere, set_in, verify_json

from dshd.folds import replay
from dshd.folds.rules import MAX_TOKENS
from dshd.services.store import SessionStore
from log.test_log_sample import DSHD, Session

SID = "compacted"
TOOLS = ["read_file"]


def header(store, turn, step, *, compact=False):
    return store.commit(
        "request/header",
        {"step": step, "planActive": False, "sections": ["context:compact"] if compact else ["base:system"],
         "tools": [] if compact else TOOLS},
        turn=turn,
    )


def compact(store, turn, through, summary="Summary so far."):
    return store.commit(
        "context/compact",
        {"summary": summary, "throughSeq": through, "tokensBefore": 1700, "tokensAfter": 120},
        turn=turn,
    )


def build(root: Path) -> tuple[Path, dict[str, int], bytes]:
    """The base log; returns its path, the seq of named events and a checkpoint taken at seq 6."""
    seqs: dict[str, int] = {}
    with SessionStore.create(root, SID) as store:
        s = Session(store)
        s.turn("Hello", steps=2, tool="read_file")  # seq 2..9
        store.checkpoint()
        early = (store.dir / "projection.json").read_bytes()
        # Turn 2: a compaction at its start keeps the turn's prompt.
        opened = store.commit("turn/open", {"turn": 2, "cause": "prompt"}, turn=2)
        store.commit("user/message", {"text": "Go on", "source": "user"}, turn=2)
        header(store, 2, 1, compact=True)
        seqs["compact 1"] = compact(store, 2, opened.seq).seq
        header(store, 2, 2)
        store.commit("assistant/message", {"text": "Going on."}, turn=2)
        store.commit("turn/close", {"turn": 2, "stopReason": "end-turn"}, turn=2)
        # Turn 3: a tool batch, then a compaction mid-turn.
        store.commit("turn/open", {"turn": 3, "cause": "prompt"}, turn=3)
        store.commit("user/message", {"text": "Read it", "source": "user"}, turn=3)
        header(store, 3, 1)
        seqs["call a"] = store.commit("tool/call", {"callId": "a", "name": "read_file", "arguments": {}}, turn=3).seq
        seqs["call b"] = store.commit("tool/call", {"callId": "b", "name": "read_file", "arguments": {}}, turn=3).seq
        seqs["result a"] = store.commit("tool/result", {"callId": "a", "ok": True, "content": "A"}, turn=3).seq
        seqs["result b"] = store.commit("tool/result", {"callId": "b", "ok": True, "content": "B"}, turn=3).seq
        header(store, 3, 2, compact=True)
        seqs["compact 2"] = compact(store, 3, seqs["result b"]).seq
        header(store, 3, 3)
        store.commit("assistant/message", {"text": "Read."}, turn=3)
        store.commit("turn/close", {"turn": 3, "stopReason": "end-turn"}, turn=3)
    return root / SID / "log.jsonl", seqs, early


def make_compact(through):
    def fn(obj):
        return {"type": "context/compact", "seq": obj["seq"], "at": obj["at"], "turn": obj["turn"],
                "data": {"summary": "S", "throughSeq": through, "tokensBefore": 10, "tokensAfter": 5}}

    return fn


def drop_data_key(key):
    def fn(obj):
        del obj["data"][key]
        return obj

    return fn


# name -> (event whose line is edited, edit (given the named seqs), reason (given the named seqs))
CASES = {
    "through_not_in_log": ("compact 2", lambda s: set_in(["data", "throughSeq"], 0), lambda s: "throughSeq 0 is not in the log"),
    "through_negative": ("compact 2", lambda s: set_in(["data", "throughSeq"], -4), lambda s: "throughSeq -4 is not in the log"),
    "through_is_the_event": (
        "compact 2", lambda s: set_in(["data", "throughSeq"], s["compact 2"]),
        lambda s: f"throughSeq {s['compact 2']} is not before this event (seq {s['compact 2']})",
    ),
    "through_after_the_event": (
        "compact 2", lambda s: set_in(["data", "throughSeq"], s["compact 2"] + 3),
        lambda s: f"throughSeq {s['compact 2'] + 3} is not before this event (seq {s['compact 2']})",
    ),
    "through_before_last_compaction": (
        "compact 2", lambda s: set_in(["data", "throughSeq"], s["compact 1"] - 1),
        lambda s: f"throughSeq {s['compact 1'] - 1} is before the last compaction (seq {s['compact 1']})",
    ),
    "through_inside_a_finished_batch": (
        "compact 2", lambda s: set_in(["data", "throughSeq"], s["call b"]),
        lambda s: f"throughSeq {s['call b']} is before the end of the last tool batch (seq {s['result b']})",
    ),
    "through_inside_the_open_batch": (
        "result b", lambda s: make_compact(s["result a"]),
        lambda s: f"throughSeq {s['result a']} is inside the open tool batch (from seq {s['call a']})",
    ),
    "empty_summary": ("compact 2", lambda s: set_in(["data", "summary"], " \n "), lambda s: "context/compact with an empty summary"),
    "tokens_before_zero": (
        "compact 2", lambda s: set_in(["data", "tokensBefore"], 0),
        lambda s: f"tokensBefore 0 is not a token count from 1 to {MAX_TOKENS}",
    ),
    "tokens_after_too_big": (
        "compact 2", lambda s: set_in(["data", "tokensAfter"], MAX_TOKENS + 1),
        lambda s: f"tokensAfter {MAX_TOKENS + 1} is not a token count from 1 to {MAX_TOKENS}",
    ),
    "tokens_not_a_number": (
        "compact 1", lambda s: set_in(["data", "tokensBefore"], "182k"),
        lambda s: "Expected `int`, got `str` - at `$.data.tokensBefore`",
    ),
    "summary_missing": (
        "compact 1", lambda s: drop_data_key("summary"), lambda s: "Object missing required field `summary` - at `$.data`",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tampered_compaction_reported_at_same_line_seq_reason_everywhere(tmp_path, case):
    path, seqs, early = build(tmp_path)
    assert replay(path, use_checkpoint=False).state.context.compact_seq == seqs["compact 2"]
    target, edit, reason = CASES[case]
    line = seqs[target]
    edit_line(path, line, edit(seqs))
    (path.parent / "projection.json").write_bytes(early)
    tampered = path.read_bytes()

    got, incremental, opened, rc, out = reports_everywhere(path, tmp_path, SID)
    assert (got.line, got.seq, got.reason) == (line, line, reason(seqs))
    for other in (incremental, opened):
        assert (other.line, other.seq, other.reason) == (got.line, got.seq, got.reason)
    assert rc == 1 and out == {"ok": False, "line": line, "seq": line, "reason": got.reason}
    assert path.read_bytes() == tampered


def test_verify_accepts_the_compacted_log_and_show_prints_the_compaction(tmp_path):
    path, seqs, _ = build(tmp_path)
    rc, out = verify_json(path)
    assert rc == 0 and out["ok"] is True and out["events"] == replay(path).events
    shown = subprocess.run([*DSHD, "log", "show", str(path)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    (line,) = [l for l in shown.stdout.splitlines() if l.split()[:1] == [str(seqs["compact 2"])]]
    assert "context/compact" in line
    assert f"Context compacted: 1.7k -> 120 tokens (through seq {seqs['result b']}): Summary so far." in line


def test_a_batch_also_ends_with_its_turn(tmp_path):
    # A turn closed with a call left without a result (not something dshd writes: it gives
    # every call a result first) ends that batch: a later compaction may summarize it.
    with SessionStore.create(tmp_path, SID) as store:
        store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
        header(store, 1, 1)
        store.commit("tool/call", {"callId": "lost", "name": "read_file", "arguments": {}}, turn=1)
        closed = store.commit("turn/close", {"turn": 1, "stopReason": "interrupted"}, turn=1)
        assert store.state.context.pending_calls == frozenset() and store.state.context.quiet_from == closed.seq
        store.commit("turn/open", {"turn": 2, "cause": "compact"}, turn=2)
        header(store, 2, 1, compact=True)
        compact(store, 2, closed.seq)
    assert replay(tmp_path / SID / "log.jsonl", use_checkpoint=False).state.context.through_seq == closed.seq


def test_commit_refuses_a_bad_compaction_and_writes_nothing(tmp_path):
    from dshd.folds import FoldError

    with SessionStore.create(tmp_path, SID) as store:
        Session(store).turn("Hello", steps=2, tool="read_file")
        size = store.path.stat().st_size
        with pytest.raises(FoldError, match="is not before this event"):
            compact(store, None, store.state.seq + 1)
        assert store.path.stat().st_size == size
