"""Chat benchmark: what the first dsh/chat/get of a long session costs, beside a strict
replay of the same log measured in the same run.

    .venv/bin/python bench/chat.py [--events 100000] [--repeat 3]

Generates the realistic log of bench/replay.py (turns of steps with tool calls, plan mode
toggles, goal rounds) and measures, in this one run:

  strict replay  dshd.folds.replay(path, use_checkpoint=False): the baseline
  first get      what the hub does at a client's first dsh/chat/get: read every event
                 from the store, project them into chat items, turn the items into JSON
  projection     the projection alone, over events already read (per event: the cost each
                 commit adds once a client follows the chat)
  next page      a later dsh/chat/get of 200 items from the projection in memory
  deltas         text deltas streamed into one growing item (per delta)

The projection is plain Python per event; the replay decodes and folds in C-backed
msgspec, so the ratio is large. What matters to a person is the first get's wall time on
a long session (it runs once per chat view; opening a session does not pay it).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import generate_log  # noqa: E402  (the same realistic log)

from dshd.agent.deltas import AgentDelta  # noqa: E402
from dshd.api.chat import ChatProjection  # noqa: E402
from dshd.daemon.to_wire import chat_item as to_json  # noqa: E402
from dshd.api.hub import read_log_events  # noqa: E402
from dshd.folds import replay  # noqa: E402
from dshd.services.store import SessionStore  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="dshd-bench-chat-"))
    try:
        sessions = tmp / "sessions"
        (sessions / "s-bench").mkdir(parents=True)
        log = sessions / "s-bench" / "log.jsonl"
        generate_log(log, args.events, session_id="s-bench")
        store = SessionStore.open(sessions, "s-bench")

        replay_s, _ = timed(lambda: replay(log, use_checkpoint=False), args.repeat)

        def first_get():
            projection = ChatProjection()
            for event in read_log_events(log):
                projection.apply_event(event)
            return projection, [to_json(i) for i in projection.items()]

        first_s, (projection, items) = timed(first_get, args.repeat)
        read = [msgspec.to_builtins(e) for e in store.events()]

        def project_only():
            alone = ChatProjection()
            for event in read:
                alone.apply_event(event)

        project_s, _ = timed(project_only, args.repeat)
        page_s, _ = timed(lambda: [to_json(i) for i in projection.page(args.events // 2, 200)[0]], args.repeat * 10)
        store.close()

        # A turn that streams 2,000 text deltas into one item, in a projection that saw its turn open.
        live = ChatProjection()
        live.apply_event({"seq": 1, "type": "turn/open", "at": "", "turn": 1, "data": {"turn": 1, "cause": "prompt"}})
        deltas = [AgentDelta(turn=1, step=1, kind="text", text="word " * 3) for _ in range(2000)]
        start = time.perf_counter()
        for delta in deltas:
            live.apply_delta(delta)
        delta_s = (time.perf_counter() - start) / len(deltas)

        print(f"log: {args.events} events, {log.stat().st_size / 1e6:.1f} MB -> {len(items)} chat items")
        print(f"strict replay (baseline)   {replay_s * 1000:8.1f} ms")
        print(f"first dsh/chat/get         {first_s * 1000:8.1f} ms   ({first_s / replay_s:.2f}x the replay)")
        print(f"next page of 200           {page_s * 1000:8.2f} ms")
        print(f"projection alone           {project_s * 1000:8.1f} ms   ({project_s / args.events * 1e6:.1f} µs an event)")
        print(f"per text delta (2,000)     {delta_s * 1e6:8.1f} µs   (the item's text is rebuilt each time)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
