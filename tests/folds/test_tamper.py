"""G-5 tamper suite: a sound log written through SessionStore, edited to break one rule.

Full replay, incremental replay from a checkpoint before the bad line, SessionStore.open
and the real `dshd log verify --json` (a subprocess) must all name the same line, seq and
reason; the log file must be left untouched by all of them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dshd.folds import ReplayError, replay
from dshd.services.store import SessionStore
from log.test_log_sample import Session, snapshot, tombstone

SID = "tamper"


def build(root: Path) -> tuple[Path, dict[str, int], bytes]:
    """The base log; returns its path, the seq of named events, and a checkpoint taken at seq 6."""
    seqs: dict[str, int] = {}
    with SessionStore.create(root, SID) as store:
        s = Session(store)
        s.turn("Hello", usage=(900, 40))  # seq 2..6; a person's turn: its tokens are no round's
        store.checkpoint()
        early_checkpoint = (store.dir / "projection.json").read_bytes()
        created = "2026-11-29T18:00:00.000Z"
        seqs["create g1"] = s.goal(snapshot("create", "g1", 1, "active", created_at=created, tokens=0)).seq
        first = store.state.seq + 1
        s.turn("round 1", cause="continuation", goal_round={"goalId": "g1", "round": 1, "revision": 1}, usage=(100, 20))
        seqs["round 1 message"] = first + 1
        seqs["round 1 header"] = first + 2
        seqs["round 1 reply"] = first + 3
        first = store.state.seq + 1
        s.turn("round 2", cause="continuation", goal_round={"goalId": "g1", "round": 2, "revision": 1}, usage=(200, 30))
        seqs["round 2 message"] = first + 1
        g1 = {"created_at": created, "tokens": 350}
        seqs["pause g1"] = s.goal(snapshot("pause", "g1", 2, "paused", rounds=2, **g1)).seq
        seqs["edit g1"] = s.goal(snapshot("edit", "g1", 3, "paused", rounds=2, max_rounds=4, **g1)).seq
        s.goal(snapshot("complete", "g1", 4, "complete", rounds=2, max_rounds=4, **g1))
        seqs["after complete"] = s.plan(True).seq
        s.goal(snapshot("create", "g2", 1, "active", created_at=created))
        s.goal(tombstone("g2", 1))
        seqs["after clear"] = s.plan(False).seq
        seqs["create g3"] = s.goal(snapshot("create", "g3", 1, "active", created_at=created)).seq
    return root / SID / "log.jsonl", seqs, early_checkpoint


def edit_line(path: Path, line_no: int, fn) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    old = lines[line_no - 1]
    new = fn(json.loads(old))
    lines[line_no - 1] = new if isinstance(new, bytes) else json.dumps(new, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def set_in(path_keys, value):
    def fn(obj):
        target = obj
        for k in path_keys[:-1]:
            target = target[k]
        target[path_keys[-1]] = value
        return obj

    return fn


def replace_with_goal_change(data):
    def fn(obj):
        return {"type": "goal/change", "seq": obj["seq"], "at": obj["at"], "data": data}

    return fn


EDIT_G1_AFTER_COMPLETE = {
    "version": 1, "op": "edit",
    "goal": {"id": "g1", "revision": 5, "objective": "again", "phase": "complete", "maxRounds": 4},
    "roundsStarted": 2, "createdAt": "2026-11-29T18:00:00.000Z", "updatedAt": "2026-11-29T18:09:00.000Z",
}
EDIT_G2_AFTER_CLEAR = {
    "version": 1, "op": "edit",
    "goal": {"id": "g2", "revision": 2, "objective": "again", "phase": "active", "maxRounds": 3},
    "roundsStarted": 0, "createdAt": "2026-11-29T18:00:00.000Z", "updatedAt": "2026-11-29T18:09:00.000Z",
}

# name -> (event whose line is edited, edit, expected seq (None: same as line), expected reason;
#          None reason: msgspec's message, checked only for equality across the four readers)
CASES = {
    "malformed_json": ("round 1 message", lambda obj: b'{"seq": 9, "type": "user/mess\n', None, "JSON is malformed"),
    "bad_envelope": ("round 1 header", lambda obj: {k: v for k, v in obj.items() if k != "at"}, "same", "Object missing required field `at`"),
    "wrong_type_in_payload": ("round 1 header", set_in(["data", "planActive"], "false"), "same", "Expected `bool`, got `str` - at `$.data.planActive`"),
    "seq_gap": ("round 1 reply", lambda obj: {**obj, "seq": obj["seq"] + 1}, "plus1", "seq gap: expected {line}, got {seq}"),
    "seq_repeat": ("round 1 reply", lambda obj: {**obj, "seq": obj["seq"] - 1}, "minus1", "seq repeat: expected {line}, got {seq}"),
    "non_positive_round": ("round 2 message", set_in(["data", "goalRound", "round"], 0), "same", "non-positive round 0"),
    "non_sequential_round": ("round 2 message", set_in(["data", "goalRound", "round"], 3), "same", "non-sequential round 3: expected 2"),
    "revision_not_previous_plus_one": ("edit g1", set_in(["data", "goal", "revision"], 4), "same", "revision 4 is not previous+1: expected 3"),
    "write_to_stopped_goal": ("after complete", replace_with_goal_change(EDIT_G1_AFTER_COMPLETE), "same", "write to stopped goal g1"),
    "write_to_cleared_goal": ("after clear", replace_with_goal_change(EDIT_G2_AFTER_CLEAR), "same", "write to cleared goal g2"),
    "invalid_transition": ("pause g1", set_in(["data", "op"], "resume"), "same", "invalid transition resume from active"),
    "rounds_over_cap": ("create g1", set_in(["data", "goal", "maxRounds"], 1), "round 2 message", "rounds over the cap: round 2 > maxRounds 1"),
    "rounds_started_disagrees": ("pause g1", set_in(["data", "roundsStarted"], 1), "same", "roundsStarted 1 disagrees with rounds counted 2"),
    "reused_id": ("create g3", set_in(["data", "goal", "id"], "g1"), "same", "reused goal id g1"),
    "tokens_used_disagrees": ("pause g1", set_in(["data", "tokensUsed"], 349), "same", "tokensUsed 349 disagrees with tokens counted 350"),
    "usage_changed_under_a_snapshot": ("round 1 reply", set_in(["data", "usage", "outputTokens"], 21), "pause g1",
                                       "tokensUsed 350 disagrees with tokens counted 351"),
    "tokens_used_dropped": ("pause g1", lambda obj: {**obj, "data": {k: v for k, v in obj["data"].items() if k != "tokensUsed"}},
                            "same", "tokensUsed absent but tokens counted 350"),
    "tokens_over_budget": ("create g1", set_in(["data", "goal", "maxTokens"], 120), "round 2 message",
                           "tokens over the budget: round 2 starts with 120 of maxTokens 120 used"),
    "negative_usage": ("round 1 reply", set_in(["data", "usage", "inputTokens"], -1), "same",
                       "Expected `int` >= 0 - at `$.data.usage.inputTokens`"),
}


def verify_json(path: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "verify", str(path), "--json"], capture_output=True, text=True, timeout=60
    )
    return proc.returncode, json.loads(proc.stdout)


def reports_everywhere(path: Path, root: Path, session_id: str):
    """What full replay, incremental replay, SessionStore.open and `dshd log verify --json`
    report for a bad log: (full, incremental, opened) ReplayErrors, verify's exit code and JSON."""
    with pytest.raises(ReplayError) as full:
        replay(path, use_checkpoint=False)
    with pytest.raises(ReplayError) as incremental:
        replay(path, use_checkpoint=True)
    with pytest.raises(ReplayError) as opened:
        SessionStore.open(root, session_id)
    rc, out = verify_json(path)
    return full.value, incremental.value, opened.value, rc, out


@pytest.mark.parametrize("case", list(CASES))
def test_g05_tamper_reported_at_same_line_seq_reason_everywhere(tmp_path, case):
    path, seqs, early_checkpoint = build(tmp_path)
    target, edit, seq_rule, reason = CASES[case]
    line = seqs[target]
    edit_line(path, line, edit)
    # Put back the checkpoint from seq 6 (close wrote a later one) and prove it still matches.
    (path.parent / "projection.json").write_bytes(early_checkpoint)
    tampered = path.read_bytes()

    expected_line = line if seq_rule in ("same", "plus1", "minus1", None) else seqs[seq_rule]
    if seq_rule is None:
        expected_seq = None
    elif seq_rule == "plus1":
        expected_seq = line + 1
    elif seq_rule == "minus1":
        expected_seq = line - 1
    else:
        expected_seq = expected_line

    got, incremental, opened, rc, out = reports_everywhere(path, tmp_path, SID)
    assert (got.line, got.seq) == (expected_line, expected_seq)
    if "{" in reason:
        assert got.reason == reason.format(line=expected_line, seq=expected_seq)
    elif case == "malformed_json":
        assert got.reason.startswith(reason)
    else:
        assert got.reason == reason
    assert got.kind == "replay-failed" and got.data == {"seq": got.seq, "line": got.line, "reason": got.reason}
    for other in (incremental, opened):
        assert (other.line, other.seq, other.reason) == (got.line, got.seq, got.reason)
    assert rc == 1
    assert out == {"ok": False, "line": got.line, "seq": got.seq, "reason": got.reason}
    # Nobody repaired or skipped anything.
    assert path.read_bytes() == tampered


def test_g05_incremental_replay_really_starts_at_the_checkpoint(tmp_path):
    path, seqs, early_checkpoint = build(tmp_path)
    (path.parent / "projection.json").write_bytes(early_checkpoint)
    result = replay(path)
    assert result.checkpoint == "used"
    assert result.tail_events == result.events - 6
    assert result.state == replay(path, use_checkpoint=False).state


def test_g05_bad_line_before_the_checkpoint_is_caught_by_full_replay(tmp_path):
    # The checkpoint is a cache trusted for its prefix; `log verify` never uses one.
    path, seqs, early_checkpoint = build(tmp_path)
    shutil.copy(path, tmp_path / "sound.jsonl")
    edit_line(path, 3, set_in(["data", "source"], "robot"))
    with pytest.raises(ReplayError) as info:
        replay(path, use_checkpoint=False)
    assert info.value.line == 3 and info.value.seq == 3
    rc, out = verify_json(path)
    assert rc == 1 and out["line"] == 3
