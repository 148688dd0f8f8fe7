"""Projection checkpoints are a cache: deleted, damaged or mismatched, they change no result.

Also the property that incremental replay from any split point equals full replay, and
that the fast replay loop agrees with the reference fold (apply) on mutated logs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dshd.folds import ReplayError, encode_checkpoint, fold_lines, replay
from dshd.folds.replay import sign_checkpoint_body
from dshd.log import CHECKPOINT_NAME, LOG_NAME, iter_records
from dshd.services import store as store_module
from dshd.services.store import SessionStore
from log.test_log_sample import SAMPLE, build_sample_session

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from replay import generate_log  # noqa: E402


@pytest.fixture
def session(tmp_path):
    """A closed sound session with a checkpoint covering it all."""
    with SessionStore.create(tmp_path, "s1", title="cp") as store:
        build_sample_session(store)
        state = store.state
    return tmp_path, tmp_path / "s1" / LOG_NAME, tmp_path / "s1" / CHECKPOINT_NAME, state


def resign(body: bytes) -> bytes:
    return sign_checkpoint_body(body)


def edit_body(cp_path: Path, fn) -> None:
    head, _, body = cp_path.read_bytes().partition(b"\n")
    obj = json.loads(body)
    fn(obj)
    cp_path.write_bytes(resign(json.dumps(obj).encode()))


def assert_same_result_and_rebuilt(root, path, cp_path, state, expected_status):
    result = replay(path)
    assert result.checkpoint.startswith(expected_status)
    assert result.state == state == replay(path, use_checkpoint=False).state
    with SessionStore.open(root, "s1") as store:
        assert store.state == state
        assert store.checkpoint_status.startswith(expected_status)
    again = replay(path)  # the store rebuilt a good one
    assert again.checkpoint == "used" and again.tail_events == 0 and again.state == state


def test_checkpoint_used_on_clean_reopen(session):
    root, path, cp, state = session
    result = replay(path)
    assert result.checkpoint == "used" and result.tail_events == 0 and result.state == state


def test_checkpoint_deleted_same_result(session):
    root, path, cp, state = session
    cp.unlink()
    assert_same_result_and_rebuilt(root, path, cp, state, "absent")


@pytest.mark.parametrize(
    "damage, status",
    [
        (lambda b: b"", "ignored: unknown header"),
        (lambda b: b"garbage\n{}", "ignored: unknown header"),
        (lambda b: b[: len(b) // 2], "ignored: checksum mismatch"),
        (lambda b: b[:-5] + bytes([b[-5] ^ 0x01]) + b[-4:], "ignored: checksum mismatch"),
        (lambda b: b.replace(b"sha256=", b"sha256=0", 1), "ignored: checksum mismatch"),
        (lambda b: resign(b"[1, 2, 3]"), "ignored: undecodable"),
        (lambda b: resign(b"{not json"), "ignored: undecodable"),
    ],
)
def test_checkpoint_damaged_same_result(session, damage, status):
    root, path, cp, state = session
    cp.write_bytes(damage(cp.read_bytes()))
    result = replay(path)
    assert result.checkpoint.startswith(status)
    assert_same_result_and_rebuilt(root, path, cp, state, result.checkpoint)


@pytest.mark.parametrize(
    "edit, status",
    [
        (lambda o: o.update(version=99), "ignored: version changed"),
        (lambda o: o.update(formatVersion=2), "ignored: version changed"),
        (lambda o: o.update(stateSchema="0" * 16), "ignored: version changed"),
        (lambda o: o.update(seq=o["seq"] - 1), "ignored: inconsistent seq/line"),
        (lambda o: o.update(offset=o["offset"] + 10_000), "ignored: offset outside the log"),
        (lambda o: o.update(offset=o["offset"] - 1), "ignored: last covered line differs"),
        (lambda o: o["last"].update(sha256="0" * 64), "ignored: last covered line differs"),
        (lambda o: o["state"]["plan"].update(active="yes"), "ignored: undecodable"),
        (lambda o: o.update(extra=1), "ignored: undecodable"),
    ],
)
def test_checkpoint_mismatched_same_result(session, edit, status):
    root, path, cp, state = session
    edit_body(cp, edit)
    assert_same_result_and_rebuilt(root, path, cp, state, status)


def test_checkpoint_of_a_longer_log_is_ignored_after_log_shrinks(session, tmp_path):
    root, path, cp, state = session
    # The log is replaced by an earlier copy of itself (e.g. restored from a backup).
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:20]))
    result = replay(path)
    assert result.checkpoint == "ignored: offset outside the log" and result.events == 20


def test_checkpoint_whose_last_line_was_rewritten_is_ignored(session):
    root, path, cp, state = session
    data = path.read_bytes()
    # Same length, other content: the last covered line no longer matches its fingerprint.
    i = data.rindex(b'"updatedAt":"') + len(b'"updatedAt":"2026-11-29T')
    changed = data[:i] + (b"0" if data[i : i + 1] != b"0" else b"1") + data[i + 1 :]
    path.write_bytes(changed)
    result = replay(path)
    assert result.checkpoint == "ignored: last covered line differs"
    assert result.state.goal.updated_at != state.goal.updated_at  # it really read the log


def test_checkpoint_lagging_behind_replays_the_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY", 40)  # fewer fsyncs, same logic
    with SessionStore.create(tmp_path, "s1") as store:
        for i in range(40 + 10):
            store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
        state = store.state
        # simulate a crash: no close, so the last checkpoint is the one at event 40
        store._log.close()
    result = replay(tmp_path / "s1" / LOG_NAME)
    assert result.checkpoint == "used" and result.tail_events == 11 and result.state == state


def test_incremental_tail_stops_at_first_bad_event_like_full_replay(session):
    root, path, cp, state = session
    lines = path.read_bytes().splitlines(keepends=True)
    # checkpoint at line 30, then corrupt line 40
    prefix_state, _, last, end = fold_lines(None, iter_records(path, 0, 1, sum(map(len, lines[:30]))))
    cp.write_bytes(encode_checkpoint(prefix_state, end, last))
    lines[39] = lines[39].replace(b'"seq":40', b'"seq":41')
    path.write_bytes(b"".join(lines))
    with pytest.raises(ReplayError) as inc:
        replay(path)
    with pytest.raises(ReplayError) as full:
        replay(path, use_checkpoint=False)
    assert (inc.value.line, inc.value.seq, inc.value.reason) == (full.value.line, full.value.seq, full.value.reason) == (
        40, 41, "seq gap: expected 40, got 41")


# ---- properties ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    generated = root / "generated.jsonl"
    generate_log(generated, 400)
    compacted = root / "compacted.jsonl"
    generate_log(compacted, 400, compact_every=3)
    return {"sample": SAMPLE.read_bytes(), "generated": generated.read_bytes(), "compacted": compacted.read_bytes()}


def write_session(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for p in directory.iterdir():
        p.unlink()
    path = directory / LOG_NAME
    path.write_bytes(data)
    return path


def checkpoint_at(path: Path, line: int) -> None:
    """Write projection.json covering the first ``line`` lines (folded with the reference apply)."""
    records = [r for r in iter_records(path) if r[0] <= line]
    state, _, last, end = fold_lines(None, iter(records))
    (path.parent / CHECKPOINT_NAME).write_bytes(encode_checkpoint(state, end, last))


def outcome(path: Path, **kw):
    try:
        r = replay(path, **kw)
        return ("ok", r.state, r.events)
    except ReplayError as e:
        return ("error", e.line, e.seq, e.reason)


def reference(path: Path):
    """Full replay through fold_lines/apply (the reference path), not the fast loop."""
    try:
        state, count, _, _ = fold_lines(None, iter_records(path))
        return ("ok", state, count)
    except ReplayError as e:
        return ("error", e.line, e.seq, e.reason)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["sample", "generated", "compacted"]), split=st.floats(0, 1))
def test_property_incremental_from_any_split_equals_full(base_logs, tmp_path, which, split):
    data = base_logs[which]
    path = write_session(tmp_path / "s", data)
    n = data.count(b"\n")
    k = max(1, min(n, round(split * n)))
    checkpoint_at(path, k)
    inc = replay(path)
    full = replay(path, use_checkpoint=False)
    assert inc.checkpoint == "used" and inc.tail_events == n - k
    assert inc.state == full.state and inc.events == full.events == n
    assert inc.last_line == full.last_line and inc.end == full.end


MUTATIONS = [
    "delete", "duplicate", "swap-next", "seq+1", "turn+1", "revision+1", "round+1", "usage+1", "cut-half",
    "drop-field", "through-3", "through+2", "call-id", "step+1", "data-turn+1", "round-goal",
]


# Mutations aimed at one kind of line hit the next such line at or after the chosen one.
_AIMED = {
    "through-3": b'"context/compact"', "through+2": b'"context/compact"', "call-id": b'"tool/result"',
    "usage+1": b'"usage"', "step+1": b'"request/header"', "data-turn+1": b'"turn/',
    "round-goal": b'"goalRound"',
}


def mutate(lines: list[bytes], i: int, how: str) -> list[bytes]:
    lines = list(lines)
    if how in _AIMED:
        i = next((j for j in range(i, len(lines)) if _AIMED[how] in lines[j]), i)
    line = lines[i]
    if how == "delete":
        del lines[i]
    elif how == "duplicate":
        lines.insert(i, line)
    elif how == "swap-next" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif how == "cut-half":
        lines[i] = line[: len(line) // 2] + b"\n"
    else:
        obj = json.loads(line)
        data = obj["data"]
        if how == "seq+1":
            obj["seq"] += 1
        elif how == "turn+1" and "turn" in obj:
            obj["turn"] += 1
        elif how == "revision+1" and isinstance(data.get("goal"), dict):
            data["goal"]["revision"] += 1
        elif how == "round+1" and isinstance(data.get("goalRound"), dict):
            data["goalRound"]["round"] += 1
        elif how == "usage+1" and isinstance(data.get("usage"), dict):
            data["usage"]["outputTokens"] += 1
        elif how == "drop-field":
            obj.pop("at")
        elif how in ("through-3", "through+2") and "throughSeq" in data:
            data["throughSeq"] += -3 if how == "through-3" else 2
        elif how == "call-id" and "callId" in data:
            data["callId"] += "x"
        elif how == "step+1" and "step" in data:
            data["step"] += 1
        elif how == "data-turn+1" and isinstance(data.get("turn"), int):
            data["turn"] += 1
        elif how == "round-goal" and isinstance(data.get("goalRound"), dict):
            data["goalRound"]["goalId"] += "x"
        lines[i] = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    return lines


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["sample", "generated", "compacted"]), at=st.floats(0, 1), how=st.sampled_from(MUTATIONS),
       split=st.floats(0, 1))
def test_property_fast_replay_agrees_with_reference_and_incremental(base_logs, tmp_path, which, at, how, split):
    lines = base_logs[which].splitlines(keepends=True)
    i = min(len(lines) - 1, int(at * len(lines)))
    mutated = mutate(lines, i, how)
    path = write_session(tmp_path / "s", b"".join(mutated))
    full = outcome(path, use_checkpoint=False)
    assert full == reference(path)
    # A checkpoint anywhere before the mutated line gives the same outcome.
    if i >= 1:
        k = max(1, min(i, round(split * i)))
        checkpoint_at(path, k)
        assert replay(path).checkpoint == "used" if full[0] == "ok" else True
        assert outcome(path) == full
