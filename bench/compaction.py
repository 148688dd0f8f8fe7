"""Compaction benchmark: the first model request after opening a long, compacted session.

    .venv/bin/python bench/compaction.py [--events 200000] [--compact-after 199000] [--small 1000] [--repeat 15]

Generates, in a temp workspace, a sound session of ``--events`` events (turns of steps
with tool calls, plan toggles, goal rounds; bench/replay.py's generator) whose one
compaction comes at the first turn after seq ``--compact-after``, and a ``--small``-event
session with no compaction (the baseline). Both are opened once and closed cleanly first,
as a person's sessions would be (so each has its projection checkpoint).

Then, interleaved so machine noise hits both alike, it measures: open the session in a
Workspace (scripted model) and run one prompt to its end (turn/open, user/message,
request/header with the transcript built from the log, the model call, assistant/message,
turn/close, each durable). Target: big / small <= 1.5.

It also times building the big session's transcript from the last compaction on (what
the agent does) against building it from the whole log (what it would cost without).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import generate_log  # noqa: E402

from dshd.agent import Workspace, load_config, new_session_id, transcript  # noqa: E402
from dshd.services.store import SessionStore  # noqa: E402


async def first_request(ws: Workspace, session_id: str) -> tuple[float, int]:
    """Seconds from open to the end of the first prompt, and events the transcript read."""
    gc.collect()
    t0 = time.perf_counter()
    agent = ws.open_session(session_id)
    result = await agent.prompt("What is left to do?")
    elapsed = time.perf_counter() - t0
    assert result.stop_reason == "end-turn", result
    context = agent.store.state.context
    read = agent.store.state.seq - (context.through_seq if context.compact_seq else 0)
    ws.close(agent.agent_id)
    return elapsed, read


async def run(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="dshd-bench-compaction-"))
    try:
        sessions = root / ".dsh" / "sessions"
        big, small = new_session_id(), new_session_id()
        for sid, n, after in ((big, args.events, args.compact_after), (small, args.small, None)):
            (sessions / sid).mkdir(parents=True)
            t0 = time.perf_counter()
            generate_log(sessions / sid / "log.jsonl", n, sid, compact_after=after)
            SessionStore.open(sessions, sid).close()  # first open: full replay, writes the checkpoint
            print(f"session of {n:,} events generated and opened once in {time.perf_counter() - t0:.1f} s")
        with SessionStore.open(sessions, big) as store:
            context = store.state.context
            assert context.compact_seq > args.compact_after, "the big session has no compaction where asked"
            print(f"big session: compaction at seq {context.compact_seq:,} (throughSeq {context.through_seq:,})")
            whole, tail = [], []
            for _ in range(5):
                t0 = time.perf_counter()
                full = transcript.Transcript()
                store.each_event(full.apply)  # every event, streamed
                whole.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                cold = transcript.build(store)
                tail.append(time.perf_counter() - t0)
            assert full.messages == cold.messages
        print(f"transcript of the big session from the whole log:          {statistics.median(whole) * 1e3:8.2f} ms")
        print(f"transcript of the big session from the last compaction on: {statistics.median(tail) * 1e3:8.2f} ms")

        ws = Workspace(root, load_config(root, {"model": {"provider": "scripted"}}))
        big_times, small_times = [], []
        big_read = small_read = 0
        for _ in range(args.repeat):
            elapsed, big_read = await first_request(ws, big)
            big_times.append(elapsed)
            elapsed, small_read = await first_request(ws, small)
            small_times.append(elapsed)
        await ws.shutdown()
        b, s = statistics.median(big_times), statistics.median(small_times)
        print(
            f"first request after open, {args.events:,}-event session compacted at {args.compact_after:,}: "
            f"{b * 1e3:.2f} ms (transcript from {big_read:,} events)"
        )
        print(
            f"first request after open, {args.small:,}-event session, no compaction (baseline): "
            f"{s * 1e3:.2f} ms (transcript from {small_read:,} events)"
        )
        print(f"  ratio = {b / s:.2f}x  (target <= 1.5x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--compact-after", type=int, default=199_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=15)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
