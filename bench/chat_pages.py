"""Chat pages of long sessions: what a first dsh/chat/get costs and what it makes the
connection's other requests wait, paged the new way beside the old way, in the same run.

    .venv/bin/python bench/chat_pages.py [--sizes 1000,100000,1000000] [--limit 200]

For each size it writes a sound log from byte templates (turns of tool calls, results and
replies; plan mode toggles), opens it in a real Workspace (an Agent on a SessionStore: a
strict replay, which also checks the log) and measures, through api/hub.py:

  first page     the first dsh/chat/get {afterSeq: 0, limit}: new = Hub.chat_page (answered
                 once its items are settled), old = the whole log projected at once
                 (Hub.chat, what the daemon did before), then the page
  behind         how long a request sent right behind that first get waits for the event
                 loop (a dsh/plan/get is answered as soon as it runs): new = the first get
                 yields every few ms; old = it holds the loop for the whole build
  longest stall  the longest the loop was held at once during the whole new build (and the
                 longest garbage-collector pause in it; on a loaded machine the OS adds its own)
  whole build    the new sliced build to the end of the log (a first get of a later page
                 waits for it; other requests do not) vs the old one
  page k         a later page of `limit` items at afterSeq = half the log, from the
                 projection in memory: new = the bisect, old = the scan from the first item

Ratios are old / new (above 1: the new way is faster or waits less).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

from dshd.agent import Workspace, load_config  # noqa: E402
from dshd.api.chat import ChatProjection  # noqa: E402
from dshd.daemon.to_wire import chat_item as to_json  # noqa: E402
from dshd.api.hub import Hub  # noqa: E402

SESSION_ID = "s-01m8bench0000000000000000p"
AT = b"2026-12-01T10:00:00.000Z"
TEXT = (
    b"I looked at the parser and the failing test: the tokenizer drops the last token when the input "
    b"ends without a newline. I will fix the loop bound and add a regression test."
)
CONTENT = b"def tokenize(src):\\n    tokens = []\\n    i = 0\\n    while i < len(src) - 1:\\n        tokens.append(src[i])\\n"
HEADER = b',"sections":["base:system","workspace:files"],"tools":["read_file","write_file","run_tests","search"]}}\n'


def write_log(path: Path, n_events: int) -> None:
    """A sound log of exactly ``n_events`` lines, written as bytes from templates (no
    encoder per event: a million lines take seconds): turns of 1-4 steps, each step but
    the last a read_file call and its result, the last the reply; plan mode toggles every
    40 turns. Opening the session replays it strictly, so a wrong line fails the run."""
    lines: list[bytes] = [
        b'{"type":"session/start","seq":1,"at":"%s","data":{"sessionId":"%s","formatVersion":1,"title":"benchmark"}}\n'
        % (AT, SESSION_ID.encode())
    ]
    seq, turn, plan = 1, 0, b"false"
    with open(path, "wb") as f:
        while seq < n_events:
            turn += 1
            if turn % 40 == 0:
                plan = b"true" if plan == b"false" else b"false"
                seq += 1
                lines.append(b'{"type":"plan/mode","seq":%d,"at":"%s","data":{"active":%s}}\n' % (seq, AT, plan))
            seq += 1
            lines.append(b'{"type":"turn/open","seq":%d,"at":"%s","turn":%d,"data":{"turn":%d,"cause":"prompt"}}\n' % (seq, AT, turn, turn))
            seq += 1
            lines.append(b'{"type":"user/message","seq":%d,"at":"%s","turn":%d,"data":{"text":"Please fix the tokenizer bug.","source":"user"}}\n' % (seq, AT, turn))
            steps = 1 + turn % 4
            for step in range(1, steps + 1):
                seq += 1
                lines.append(b'{"type":"request/header","seq":%d,"at":"%s","turn":%d,"data":{"step":%d,"planActive":%s' % (seq, AT, turn, step, plan) + HEADER)
                if step < steps:
                    call = b"call-%d-%d" % (turn, step)
                    seq += 1
                    lines.append(b'{"type":"tool/call","seq":%d,"at":"%s","turn":%d,"data":{"callId":"%s","name":"read_file","arguments":{"path":"src/mod%d.py"}}}\n' % (seq, AT, turn, call, step))
                    seq += 1
                    lines.append(b'{"type":"tool/result","seq":%d,"at":"%s","turn":%d,"data":{"callId":"%s","ok":true,"content":"%s"}}\n' % (seq, AT, turn, call, CONTENT))
                else:
                    seq += 1
                    lines.append(b'{"type":"assistant/message","seq":%d,"at":"%s","turn":%d,"data":{"text":"%s","usage":{"inputTokens":%d,"outputTokens":40}}}\n' % (seq, AT, turn, TEXT, 1200 + 300 * step))
            seq += 1
            lines.append(b'{"type":"turn/close","seq":%d,"at":"%s","turn":%d,"data":{"turn":%d,"stopReason":"end_turn"}}\n' % (seq, AT, turn, turn))
            if len(lines) >= 65536:
                f.write(b"".join(lines))
                lines.clear()
        # The last turn may run past n_events: cut it there (a turn left open, as after a crash).
        f.write(b"".join(lines))
    with open(path, "rb+") as f:
        data_end = _end_of_line(path, n_events)
        f.truncate(data_end)


def _end_of_line(path: Path, line_no: int) -> int:
    with open(path, "rb") as f:
        offset = 0
        for number, line in enumerate(f, 1):
            offset += len(line)
            if number == line_no:
                return offset
    return offset


class Door:
    """A door that takes everything and sends nothing (the wire is not what is measured)."""

    def __getattr__(self, name):
        return lambda *args: None


def scan_page(projection: ChatProjection, after_seq: int, limit: int):
    """The old ChatProjection.page: a scan from the first item."""
    out, next_seq, counted, position = [], after_seq, 0, 0
    for item in projection.items():
        seq = getattr(item, "seq", None)
        if seq is None:
            if position >= after_seq:
                out.append(item)
            continue
        position = seq
        if seq <= after_seq:
            continue
        if counted >= limit:
            break
        out.append(item)
        counted += 1
        next_seq = seq
    return out, next_seq


async def request_behind(started: float) -> float:
    """A request that arrives right behind the first get: the reader hands it to the
    dispatcher, which starts its handler (a few loop turns); the wait until it runs."""
    for _ in range(3):
        await asyncio.sleep(0)
    return time.perf_counter() - started


async def measure_old(agent, limit: int) -> dict[str, float]:
    hub = Hub(Door())
    behind = asyncio.ensure_future(request_behind(time.perf_counter()))
    start = time.perf_counter()
    page = hub.chat(agent, 0, limit)  # what the handler did: the whole log, on the loop
    [to_json(i) for i in page[0]]
    first = time.perf_counter() - start
    waited = await behind
    projection = hub._feeds[agent.agent_id].chat
    after = projection.last_seq // 2
    reps = 20
    start = time.perf_counter()
    for _ in range(reps):
        scanned = scan_page(projection, after, limit)
    page_k = (time.perf_counter() - start) / reps
    assert [to_json(i) for i in scanned[0]] == [to_json(i) for i in projection.page(after, limit)[0]]
    return {"first": first, "behind": waited, "build": first, "page_k": page_k}


async def measure_new(agent, limit: int) -> dict[str, float]:
    hub = Hub(Door())
    stall = 0.0
    done = False

    cpu_stall = 0.0

    async def ticker():
        # The longest wall time between two turns of the loop, and the CPU time this
        # process spent in it (the rest is the OS running other work on a busy machine).
        nonlocal stall, cpu_stall
        last, last_cpu = time.perf_counter(), time.thread_time()
        while not done:
            await asyncio.sleep(0)
            now, now_cpu = time.perf_counter(), time.thread_time()
            if now - last > stall:
                stall, cpu_stall = now - last, now_cpu - last_cpu
            last, last_cpu = now, now_cpu

    pauses: list[float] = []
    gc_start = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - gc_start[0])

    gc.callbacks.append(on_gc)
    start = time.perf_counter()
    first_task = asyncio.ensure_future(hub.chat_page(agent, 0, limit))
    behind = asyncio.ensure_future(request_behind(time.perf_counter()))
    ticking = asyncio.ensure_future(ticker())
    page = await first_task
    [to_json(i) for i in page[0]]
    first = time.perf_counter() - start
    waited = await behind
    whole = await hub.chat_page(agent, 1, 1)  # waits for the rest of the build
    build = time.perf_counter() - start
    done = True
    await ticking
    gc.callbacks.remove(on_gc)
    projection = hub._feeds[agent.agent_id].chat
    after = projection.last_seq // 2
    reps = 200
    start = time.perf_counter()
    for _ in range(reps):
        paged = projection.page(after, limit)
    page_k = (time.perf_counter() - start) / reps
    assert whole and [to_json(i) for i in paged[0]] == [to_json(i) for i in scan_page(projection, after, limit)[0]]
    return {"first": first, "behind": waited, "stall": stall, "cpu_stall": cpu_stall, "gc": max(pauses, default=0.0), "build": build, "page_k": page_k}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


async def bench_size(root: Path, events: int, limit: int) -> None:
    sessions = root / ".dsh" / "sessions"
    (sessions / SESSION_ID).mkdir(parents=True)
    log = sessions / SESSION_ID / "log.jsonl"
    start = time.perf_counter()
    write_log(log, events)
    made = time.perf_counter() - start
    workspace = Workspace(root, load_config(root, {}))
    start = time.perf_counter()
    agent = workspace.open_session(SESSION_ID)
    opened = time.perf_counter() - start
    print(f"-- {events:,} events ({log.stat().st_size / 1e6:.1f} MB, written in {made:.1f} s; opened in {opened:.2f} s)")
    old = await measure_old(agent, limit)
    gc.collect()
    new = await measure_new(agent, limit)
    gc.collect()
    rows = [
        (f"first page of {limit}", "first"),
        ("request behind it waits", "behind"),
        ("whole build", "build"),
        (f"page k (afterSeq {events // 2:,})", "page_k"),
    ]
    for label, key in rows:
        print(f"  {label:30} new {ms(new[key])}   old {ms(old[key])}   old/new {old[key] / max(new[key], 1e-9):8.1f}x")
    print(f"  {'longest loop stall (new)':30}     {ms(new['stall'])}   (CPU time in it {ms(new['cpu_stall']).strip()}; longest gc pause {ms(new['gc']).strip()})")
    await workspace.shutdown()


async def main_async(sizes: list[int], limit: int) -> None:
    for events in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="dshd-bench-pages-"))
        try:
            await bench_size(tmp, events, limit)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            gc.collect()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--limit", type=int, default=200)
    args = ap.parse_args(argv)
    asyncio.run(main_async([int(s) for s in args.sizes.split(",")], args.limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
