"""Layer 1 (dshd.log): lock, durable append, streaming read, torn tail, checkpoint file."""

from __future__ import annotations

import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from dshd.folds import ReplayError, replay
from dshd.log import LOCK_NAME, LOG_NAME, SessionLocked, SessionLog, iter_records
from dshd.services.store import SessionStore
from log.test_log_sample import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from replay import generate_log  # noqa: E402  (bench/replay.py: the realistic log generator)


def lines(*texts: str) -> list[bytes]:
    return [t.encode() + b"\n" for t in texts]


def test_create_then_append_and_read_back(tmp_path):
    d = tmp_path / "s"
    with SessionLog.create(d) as log:
        assert log.size == 0 and log.torn_tail is None
        log.append(b'{"a":1}\n')
        log.append_many(lines('{"b":2}', '{"c":3}'))
        assert log.size == (d / LOG_NAME).stat().st_size == 24
        assert list(log.records()) == [(1, 0, b'{"a":1}\n'), (2, 8, b'{"b":2}\n'), (3, 16, b'{"c":3}\n')]
        assert list(log.records(offset=8, line_no=2))[0] == (2, 8, b'{"b":2}\n')


def test_create_refuses_existing_log(tmp_path):
    SessionLog.create(tmp_path / "s").close()
    with pytest.raises(FileExistsError):
        SessionLog.create(tmp_path / "s")
    # and the lock was released on that failure
    SessionLog.open(tmp_path / "s").close()


def test_open_missing_log(tmp_path):
    with pytest.raises(FileNotFoundError):
        SessionLog.open(tmp_path / "nope")


@pytest.mark.parametrize("bad", [b"no newline", b"two\nlines\n", b"\n\n"])
def test_append_takes_exactly_one_line(tmp_path, bad):
    with SessionLog.create(tmp_path / "s") as log:
        with pytest.raises(ValueError):
            log.append(bad)
        with pytest.raises(ValueError):
            log.append_many([b"ok\n", bad])
        assert log.size == 0 and (tmp_path / "s" / LOG_NAME).read_bytes() == b""


def test_lock_holds_pid_and_second_open_is_refused(tmp_path):
    d = tmp_path / "s"
    log = SessionLog.create(d)
    try:
        assert int((d / LOCK_NAME).read_text()) == os.getpid()
        with pytest.raises(SessionLocked) as info:
            SessionLog.open(d)
        assert info.value.kind == "session-locked" and info.value.data == {"pid": os.getpid()}
    finally:
        log.close()
    SessionLog.open(d).close()  # released


def test_closed_log_refuses_writes(tmp_path):
    log = SessionLog.create(tmp_path / "s")
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append(b"x\n")


# ---- torn tail ------------------------------------------------------------------------


def make_sound_session(root, sid="s1"):
    with SessionStore.create(root, sid) as store:
        Session(store).turn("hello")
        return store.state


@pytest.mark.parametrize("tail", [b'{"type":"plan/mode","seq":7,"at":"2026', b"x", b'{"seq":7}'])
def test_torn_tail_is_cut_kept_and_reported(tmp_path, tail):
    state = make_sound_session(tmp_path)
    path = tmp_path / "s1" / LOG_NAME
    sound = path.read_bytes()
    with open(path, "ab") as f:
        f.write(tail)
    # A read-only replay reports it and changes nothing.
    result = replay(path)
    assert result.torn_tail.offset == len(sound) and result.torn_tail.length == len(tail)
    assert result.torn_tail.saved_to is None and result.state == state
    assert path.read_bytes() == sound + tail
    # Opening for writing cuts it, keeps a copy, reports it.
    with SessionStore.open(tmp_path, "s1") as store:
        torn = store.torn_tail
        assert torn.offset == len(sound) and torn.length == len(tail)
        assert torn.saved_to.parent == tmp_path / "s1" and torn.saved_to.name.startswith("torn-")
        assert torn.saved_to.read_bytes() == tail
        assert path.read_bytes() == sound
        assert store.state == state
        store.commit("plan/mode", {"active": True}, writer="plan")
    with SessionStore.open(tmp_path, "s1") as store:
        assert store.torn_tail is None and store.state.seq == state.seq + 1


def test_log_that_is_all_torn_tail(tmp_path):
    d = tmp_path / "s1"
    d.mkdir()
    (d / LOG_NAME).write_bytes(b'{"type":"session/st')
    with pytest.raises(ReplayError) as info:
        SessionStore.open(tmp_path, "s1")
    assert (info.value.line, info.value.seq) == (1, None)
    assert info.value.reason == "empty log: line 1 must be session/start"
    assert (d / LOG_NAME).read_bytes() == b""  # cut (a copy is kept)
    assert [p.read_bytes() for p in d.glob("torn-*.bin")] == [b'{"type":"session/st']


def test_complete_bad_last_line_is_corruption_not_a_torn_tail(tmp_path):
    make_sound_session(tmp_path)
    path = tmp_path / "s1" / LOG_NAME
    with open(path, "ab") as f:
        f.write(b'{"type":"plan/mode","seq":7,"at":"2026\n')
    before = path.read_bytes()
    with pytest.raises(ReplayError) as info:
        SessionStore.open(tmp_path, "s1")
    assert info.value.line == 7 and info.value.seq is None
    assert path.read_bytes() == before and not list(path.parent.glob("torn-*"))


def test_two_torn_cuts_keep_both_copies(tmp_path):
    make_sound_session(tmp_path)
    path = tmp_path / "s1" / LOG_NAME
    for tail in (b"first", b"second"):
        with open(path, "ab") as f:
            f.write(tail)
        SessionStore.open(tmp_path, "s1").close()
    assert sorted(p.read_bytes() for p in path.parent.glob("torn-*.bin")) == [b"first", b"second"]


def test_session_start_must_name_the_session_directory(tmp_path):
    make_sound_session(tmp_path, "s1")
    os.rename(tmp_path / "s1", tmp_path / "s2")
    with pytest.raises(ReplayError) as info:
        SessionStore.open(tmp_path, "s2")
    assert info.value.line == 1 and "names session s1, not s2" in info.value.reason


# ---- streaming --------------------------------------------------------------------------


def test_records_stream_without_loading_the_file(tmp_path):
    path = tmp_path / "big.jsonl"
    line = b'{"x":"' + b"y" * 200 + b'"}\n'
    with open(path, "wb") as f:
        for _ in range(50_000):  # ~10 MB
            f.write(line)
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_records(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 50_000
    assert peak < 3_000_000  # a read buffer, not the 10 MB file


@pytest.mark.parametrize("buffer", [1, 2, 3, 7, 64, 1 << 20])
def test_records_are_the_lines_whatever_the_read_buffer(tmp_path, monkeypatch, buffer):
    # Lines shorter and longer than a read, empty ones, a torn tail; from any line on.
    from dshd.log import sessionlog

    monkeypatch.setattr(sessionlog, "_READ_BUFFER", buffer)
    lines = [b"x" * n + b"\n" for n in (0, 1, 5, 0, 17, 2, 100, 3, 0, 64, 1)]
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"".join(lines) + b"torn")
    for first in range(len(lines) + 1):
        offset = sum(map(len, lines[:first]))
        expected = []
        pos = offset
        for number, line in enumerate(lines[first:], first + 1):
            expected.append((number, pos, line))
            pos += len(line)
        assert list(iter_records(path, offset, first + 1)) == expected
        end = sum(map(len, lines[: first + 2]))  # an end before the last line
        assert list(iter_records(path, offset, first + 1, end)) == [r for r in expected if r[1] < end]


@pytest.mark.slow
def test_strict_replay_streams(tmp_path):
    path = tmp_path / LOG_NAME
    generate_log(path, 20_000)  # the benchmark's realistic log, ~4 MB
    size = path.stat().st_size
    tracemalloc.start()
    try:
        result = replay(path, use_checkpoint=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.events == 20_000
    assert size > 3_000_000 and peak < 1_500_000


def test_records_stop_at_durable_size(tmp_path):
    with SessionLog.create(tmp_path / "s") as log:
        log.append(b"one\n")
        # Bytes beyond what this writer acknowledged are not records.
        with open(log.path, "ab") as f:
            f.write(b"two\n")
        assert [r[2] for r in log.records()] == [b"one\n"]
        assert [r[2] for r in iter_records(log.path)] == [b"one\n", b"two\n"]


def test_find_line_start_reads_backwards_to_any_line(tmp_path):
    from dshd.log import find_line_start
    from dshd.log import sessionlog

    path = tmp_path / LOG_NAME
    generate_log(path, 3000, "s1")  # several 64 KiB blocks
    starts = {line_no: offset for line_no, offset, _line in iter_records(path)}
    size = path.stat().st_size
    for target in (1, 2, 17, 1500, 2999, 3000, 3001):
        expected = starts.get(target, size)
        assert find_line_start(path, size, 3001, target) == expected, target
    assert find_line_start(path, starts[2000], 2000, 1000) == starts[1000]
    assert size > 3 * sessionlog._TAIL_BLOCK
    with pytest.raises(ValueError):
        find_line_start(path, size, 3001, 0)


def test_store_events_near_the_end_read_backwards_and_agree_with_reading_forward(tmp_path):
    session_dir = tmp_path / "s1"
    session_dir.mkdir()
    generate_log(session_dir / LOG_NAME, 5000, "s1")
    from dshd.folds.events import encode_event

    lines = [line for _n, _o, line in iter_records(session_dir / LOG_NAME)]
    with SessionStore.open(tmp_path, "s1") as store:
        for after in (4990, 4000, 2600, 5000, 0):
            events = store.events(after_seq=after)
            assert [encode_event(e) for e in events] == lines[after:]
        assert 4991 in store._index_seqs  # a found line joins the index
        assert store.events(after_seq=4990, limit=2)[-1].seq == 4992


def test_an_oversized_cache_file_is_ignored_unread(tmp_path):
    """A cache beside the log (chat-marks.json) that a cloned repository made huge is not
    read into memory: it reads as empty (no marks). Control: a cache of ours reads back."""
    from dshd.log.sessionlog import CACHE_MAX_BYTES

    d = tmp_path / "s"
    with SessionLog.create(d) as log:
        log.write_cache("chat-marks.json", b'{"version":1}')
        assert log.read_cache("chat-marks.json") == b'{"version":1}'  # control
        with open(d / "chat-marks.json", "r+b") as f:
            f.truncate(CACHE_MAX_BYTES + 1)  # sparse: costs no disk
        tracemalloc.start()
        try:
            assert log.read_cache("chat-marks.json") == b""
            assert tracemalloc.get_traced_memory()[1] < 1 << 20  # nothing the file's size was read
        finally:
            tracemalloc.stop()
