"""Replay benchmark: strict replay vs the raw parse floor, cold open with a checkpoint, peak RSS.

    .venv/bin/python bench/replay.py [--events 1000000] [--repeat 3]

Generates a realistic sound log (turns of steps with tool calls and results, plan mode
toggles, a goal spending continuation rounds, pauses and resumes) in a temp dir, then
measures, in this one run:

  parse floor    msgspec typed decode of every line of the same file (no checks, no fold)
  strict replay  dshd.folds.replay(path, use_checkpoint=False): decode + every G-5 rule
  loop floor     the parse floor plus a Python loop that reads each event's class, seq and
                 turn (no rule): the best a fold written in Python can reach
  cold open      SessionLog.open + replay + close of the 1M log with a checkpoint 1,000
                 events before the end, vs the same for a 1,000-event log with no checkpoint
  peak RSS       a child process that does the full strict replay (ru_maxrss via wait4),
                 beside a child that only imports dshd

Targets: replay >= 0.8x parse floor speed; cold open within 2x; peak RSS < 150 MB.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from dshd.folds import encode_checkpoint, fold_lines, replay
from dshd.folds import events as ev
from dshd.log import SessionLog, iter_records
from dshd.services.store import SessionStore

TAIL = 1_000

_TOOLS = ["read_file", "write_file", "run_tests", "search", "exit_plan_mode"]
_SECTIONS = ["base:system", "workspace:files", "goals:status"]
_TEXT = (
    "I looked at the parser and the failing test: the tokenizer drops the last token when the input "
    "ends without a newline. I will fix the loop bound and add a regression test."
)
_SUMMARY = (
    "The person asked to fix the tokenizer, which dropped the last token of input without a trailing "
    "newline. Done: the loop bound in src/tokenize.py is fixed and tests/test_tokenize.py has a regression "
    "test; all parser tests pass. Next: keep the parser tests green."
)
_CONTENT = (
    "def tokenize(src):\n    tokens = []\n    i = 0\n    while i < len(src) - 1:\n        ch = src[i]\n"
    "        if ch.isspace():\n            i += 1\n            continue\n        tokens.append(ch)\n"
)


def generate_log(
    path: Path, n_events: int, session_id: str = "bench", *, compact_every: int = 0, compact_after: int | None = None
) -> None:
    """Write a sound log of exactly n_events lines (streamed, 64k events per write).

    Compactions, as the agent loop writes them (a compaction step at the start of a turn
    keeping the turn's user message), every ``compact_every`` turns and/or once at the
    first turn that starts after seq ``compact_after``."""
    enc = msgspec.json.Encoder()
    out: list[bytes] = []
    seq = 0
    base = 1_764_000_000_000  # ms

    def at() -> str:
        ms = base + seq * 7
        secs, rem = divmod(ms, 1000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem:03d}Z"

    def emit(event_cls, data, turn=None) -> bool:
        nonlocal seq
        if seq >= n_events:
            return False
        seq += 1
        out.append(enc.encode(event_cls(seq=seq, at=at(), turn=turn, data=data)) + b"\n")
        if len(out) >= 65536:
            f.write(b"".join(out))
            out.clear()
        return True

    with open(path, "wb") as f:
        emit(ev.SessionStart, ev.SessionStartData(sessionId=session_id, formatVersion=1, title="benchmark"))
        turn = 0
        plan_active = False
        goal_id = "g-1"
        revision = 0
        rounds = 0
        tokens = 0  # usage of the assistant messages in round turns (the goal's tokensUsed)
        phase = None
        created = at()
        compacted_once = False
        while seq < n_events:
            turn += 1
            # Every 40 turns: plan mode toggles; every 25: a goal change.
            if turn % 40 == 0:
                plan_active = not plan_active
                emit(ev.PlanMode, ev.PlanModeData(active=plan_active))
            goal_round = None
            if phase is None:
                revision, rounds, tokens, phase, created = 1, 0, 0, "active", at()
                goal = ev.GoalSnapshot(id=goal_id, revision=1, objective="Keep the parser tests green",
                                       phase="active", maxRounds=10_000_000)
                emit(ev.GoalChange, ev.GoalChangeData(version=1, op="create", goal=goal, roundsStarted=0,
                                                      tokensUsed=0, createdAt=created, updatedAt=created))
            elif turn % 25 == 0:
                op, phase = ("pause", "paused") if phase == "active" else ("resume", "active")
                revision += 1
                goal = ev.GoalSnapshot(id=goal_id, revision=revision, objective="Keep the parser tests green",
                                       phase=phase, maxRounds=10_000_000)
                emit(ev.GoalChange, ev.GoalChangeData(version=1, op=op, goal=goal, roundsStarted=rounds,
                                                      tokensUsed=tokens, createdAt=created, updatedAt=at()))
            if phase == "active":
                rounds += 1
                goal_round = ev.GoalRound(goalId=goal_id, round=rounds, revision=revision)
            cause = "continuation" if goal_round else "prompt"
            emit(ev.TurnOpen, ev.TurnOpenData(turn=turn, cause=cause), turn)
            text = f"Continue toward the goal (round {rounds})" if goal_round else "Please fix the tokenizer bug."
            emit(ev.UserMessage, ev.UserMessageData(text=text, source="plugin" if goal_round else "user",
                                                    plugin="goals" if goal_round else None, goalRound=goal_round), turn)
            first_step = 1
            if (compact_every and turn % compact_every == 0) or (
                compact_after is not None and seq >= compact_after and not compacted_once
            ):
                compacted_once = compacted_once or (compact_after is not None and seq >= compact_after)
                through = seq - 1  # the turn's user message stays
                emit(ev.RequestHeader, ev.RequestHeaderData(step=1, planActive=plan_active,
                                                            sections=["context:compact"], tools=[]), turn)
                emit(ev.ContextCompact, ev.ContextCompactData(summary=_SUMMARY, throughSeq=through,
                                                              tokensBefore=182_000, tokensAfter=14_000), turn)
                first_step = 2
            steps = first_step + turn % 4
            for step in range(first_step, steps + 1):
                emit(ev.RequestHeader, ev.RequestHeaderData(step=step, planActive=plan_active,
                                                            sections=_SECTIONS, tools=_TOOLS), turn)
                if step < steps:
                    call = f"call-{turn}-{step}"
                    emit(ev.ToolCall, ev.ToolCallData(callId=call, name="read_file",
                                                      arguments={"path": f"src/mod{step}.py"}), turn)
                    emit(ev.ToolResult, ev.ToolResultData(callId=call, ok=True, content=_CONTENT), turn)
                else:
                    usage = ev.Usage(inputTokens=1200 + 300 * step, outputTokens=40 + turn % 90)
                    emit(ev.AssistantMessage, ev.AssistantMessageData(text=_TEXT, usage=usage), turn)
                    if goal_round:
                        tokens += usage.inputTokens + usage.outputTokens
            emit(ev.TurnClose, ev.TurnCloseData(turn=turn, stopReason="end_turn"), turn)
        if out:
            f.write(b"".join(out))


def parse_floor(path: Path) -> int:
    decode = ev.decode_line
    n = 0
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            decode(line)
            n += 1
    return n


def loop_floor(path: Path) -> int:
    """The parse floor plus the least a fold written in Python does per event: read its
    class, seq and turn and compare the seq (no rule checked, nothing kept). What strict
    replay can reach at best while its loop is Python."""
    decode = ev.decode_line
    seq = 0
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            event = decode(line)
            seq += 1
            cls, turn = event.__class__, event.turn
            if event.seq != seq:
                raise AssertionError(seq)
    return seq


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Median wall time, median CPU time of this process, last result."""
    walls, cpus = [], []
    result = None
    for _ in range(repeat):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), result


_LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", sys.argv[1]], os.environ)
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss if os.waitstatus_to_exitcode(status) == 0 else -1)
"""


def child_peak_rss_mb(code: str) -> float:
    """ru_maxrss of a child running ``code``.

    Linux carries the pre-exec memory of the forking process into a child's ru_maxrss, so
    the child is started by a tiny launcher (python -S, no imports) rather than by this
    process, which holds hundreds of MB of benchmark state.
    """
    out = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, code], capture_output=True, text=True, check=True)
    kib = int(out.stdout.strip())
    if kib < 0:
        raise SystemExit(f"child failed: {code}")
    return kib / 1024  # KiB on Linux


def cold_open(session_dir: Path) -> int:
    log = SessionLog.open(session_dir)
    try:
        result = replay(log)
        assert result.checkpoint in ("used", "absent"), result.checkpoint
        return result.tail_events
    finally:
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dshd-bench-replay-"))
    try:
        sessions = tmp / "sessions"
        big_dir = sessions / "big"
        big_dir.mkdir(parents=True)
        big = big_dir / "log.jsonl"
        t0 = time.perf_counter()
        generate_log(big, args.events, "big")
        gen_s = time.perf_counter() - t0
        size_mb = big.stat().st_size / 1e6
        print(f"log: {args.events:,} events, {size_mb:.0f} MB ({big.stat().st_size / args.events:.0f} B/line), "
              f"generated in {gen_s:.1f} s")

        # Interleaved rounds, so machine noise hits both alike; CPU time is the steadier figure
        # on a shared machine.
        floor_w, floor_c, replay_w, replay_c, loop_w, loop_c = [], [], [], [], [], []
        for _ in range(args.repeat):
            w, c, n = timed(lambda: parse_floor(big), 1)
            assert n == args.events
            floor_w.append(w)
            floor_c.append(c)
            w, c, n = timed(lambda: loop_floor(big), 1)
            assert n == args.events
            loop_w.append(w)
            loop_c.append(c)
            w, c, result = timed(lambda: replay(big, use_checkpoint=False), 1)
            assert result.events == args.events
            replay_w.append(w)
            replay_c.append(c)
        fw, fc = statistics.median(floor_w), statistics.median(floor_c)
        rw, rc = statistics.median(replay_w), statistics.median(replay_c)
        print(f"parse floor (msgspec typed decode, streaming): wall {fw:.3f} s, cpu {fc:.3f} s  ({args.events / fw / 1e6:.2f} M events/s)")
        print(f"strict full replay:                            wall {rw:.3f} s, cpu {rc:.3f} s  ({args.events / rw / 1e6:.2f} M events/s)")
        print(f"  replay speed / parse floor speed = {fw / rw:.2f}x wall, {fc / rc:.2f}x cpu  (target >= 0.8x)")
        lw, lc = statistics.median(loop_w), statistics.median(loop_c)
        print(f"  (the floor plus a Python loop reading each event's class, seq and turn, no rule: "
              f"{fw / lw:.2f}x wall, {fc / lc:.2f}x cpu of the floor)")

        # Checkpoint TAIL events before the end of the big log.
        cut_line = args.events - TAIL
        cut_offset = None
        for line_no, offset, line in iter_records(big):
            if line_no == cut_line:
                cut_offset, last_line = offset + len(line), line
                break
        state, _, _, _ = fold_lines(None, iter_records(big, 0, 1, cut_offset))
        big_log = SessionLog.open(big_dir)
        big_log.write_checkpoint(encode_checkpoint(state, cut_offset, last_line))
        big_log.close()

        small_dir = sessions / "small"
        small_dir.mkdir()
        generate_log(small_dir / "log.jsonl", TAIL, "small")

        # Interleaved, so machine noise hits both sides alike.
        big_times, small_times = [], []
        for _ in range(max(args.repeat, 40)):
            t0 = time.perf_counter()
            assert cold_open(big_dir) == TAIL
            big_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert cold_open(small_dir) == TAIL
            small_times.append(time.perf_counter() - t0)
        open_big_s, open_small_s = statistics.median(big_times), statistics.median(small_times)
        print(f"cold open, {args.events:,}-event log, checkpoint + {TAIL:,}-event tail: {open_big_s * 1e3:.2f} ms")
        print(f"cold open, {TAIL:,}-event log, full replay (baseline):          {open_small_s * 1e3:.2f} ms")
        print(f"  ratio = {open_big_s / open_small_s:.2f}x  (target <= 2x)")

        # SessionStore.open also rebuilds a missing or far-behind checkpoint (an fsync'd write).
        def store_open(sid: str) -> None:
            SessionStore.open(sessions, sid).close()

        cp_bytes = (big_dir / "projection.json").read_bytes()

        def store_open_big() -> None:
            (big_dir / "projection.json").write_bytes(cp_bytes)
            store_open("big")

        st_big, _, _ = timed(store_open_big, 10)
        print(f"  (SessionStore.open+close incl. checkpoint rewrite: big {st_big * 1e3:.2f} ms)")

        code_replay = f"from dshd.folds import replay; r = replay({str(big)!r}, use_checkpoint=False); assert r.events == {args.events}"
        rss_replay = child_peak_rss_mb(code_replay)
        rss_import = child_peak_rss_mb("import dshd.folds, dshd.services.store")
        print(f"peak RSS, child doing the full strict replay: {rss_replay:.0f} MB  "
              f"(baseline: child only importing dshd: {rss_import:.0f} MB; target < 150 MB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
