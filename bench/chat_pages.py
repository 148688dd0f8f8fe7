"""Chat pages of long sessions: what a first dsh/chat/get of the newest page, and of a
page k, costs and what it makes the connection's other requests wait, the new way (chat
marks) beside the old way (the whole log projected at once), in the same run.

    .venv/bin/python bench/chat_pages.py [--sizes 1000,100000,1000000] [--limit 200]

For each size it writes a sound log from byte templates (turns of tool calls, results and
replies; plan mode toggles), opens it in a real Workspace (an Agent on a SessionStore: a
strict replay, which also checks the log) and measures, through api/hub.py:

  newest page, first look   dsh/chat/get {beforeSeq: 2^53-1, limit} on a session no one
                 ever looked at (no chat marks yet): new = Hub.chat_page, the log read from
                 the start in slices (it records the marks); old = Hub.chat, the whole log
                 projected at once (what the daemon did before), then the page
  newest page, reopened     the same get in a new Workspace on the same session (a new
                 daemon: the marks kept by the first look): new reads the log after the last
                 mark; old again projects the whole log
  behind newest (reopened)  how long a request sent right behind that get waits for the
                 event loop (a dsh/plan/get is answered as soon as it runs)
  longest stall             the longest the loop was held at once during that get
  page k back / forward     a first get of the page before / after seq = half the log, on a
                 fresh connection of the reopened session: new = the segments between
                 marks around k; old = the whole log projected, then the page
  page k in memory          the page after half the log from a projection already built:
                 new = the bisect; old = the scan from the first item

Ratios are old / new (above 1: the new way is faster or waits less). The CPU time of a
new get is printed beside its wall time: on a loaded machine the wall time is mostly the
OS running other work.
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
from dshd.api.chat import ChatProjection, page_after_list  # noqa: E402
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


NEWEST = 2**53 - 1


class Door:
    """A door that takes everything and sends nothing (the wire is not what is measured)."""

    def __getattr__(self, name):
        return lambda *args: None


def scan_page(projection: ChatProjection, after_seq: int, limit: int):
    """The old ChatProjection.page: a scan from the first item."""
    return page_after_list(projection.items(), after_seq, limit)


async def request_behind(started: float) -> float:
    """A request that arrives right behind the get: the reader hands it to the
    dispatcher, which starts its handler (a few loop turns); the wait until it runs."""
    for _ in range(3):
        await asyncio.sleep(0)
    return time.perf_counter() - started


async def timed_get(get) -> dict[str, float]:
    """Run one get (a coroutine factory) with a request behind it and a loop ticker."""
    stall = 0.0
    done = False

    async def ticker():
        nonlocal stall
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now

    start, cpu = time.perf_counter(), time.process_time()
    task = asyncio.ensure_future(get())
    behind = asyncio.ensure_future(request_behind(time.perf_counter()))
    ticking = asyncio.ensure_future(ticker())
    items, _next = await task
    [to_json(i) for i in items]
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    waited = await behind
    done = True
    await ticking
    return {"took": took, "cpu": cpu, "behind": waited, "stall": stall, "items": items}


def old_get(agent, page) -> dict[str, float]:
    """The old way: the whole log projected at once on the loop (a request behind it waits all of it)."""
    start = time.perf_counter()
    hub = Hub(Door())
    hub.chat(agent)
    items = page(hub._feeds[agent.agent_id].chat)[0]
    [to_json(i) for i in items]
    took = time.perf_counter() - start
    return {"took": took, "behind": took, "stall": took, "items": items}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def same(a, b) -> None:
    assert [to_json(i) for i in a] == [to_json(i) for i in b], "the new page differs from the old"


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
    newest = lambda projection: projection.page_before(NEWEST, limit)[:2]  # noqa: E731
    half = events // 2
    back = lambda projection: projection.page_before(half, limit)[:2]  # noqa: E731
    forward = lambda projection: projection.page(half, limit)  # noqa: E731
    rows = []

    gc.collect()
    first_new = await timed_get(lambda: Hub(Door()).chat_page(agent, before_seq=NEWEST, limit=limit))
    gc.collect()
    first_old = old_get(agent, newest)
    same(first_new["items"], first_old["items"])
    rows.append((f"newest page of {limit}, first look", first_new, first_old, "took"))
    built = Hub(Door())
    built.chat(agent)
    projection = built._feeds[agent.agent_id].chat
    reps = 200
    start = time.perf_counter()
    for _ in range(reps):
        paged = projection.page(half, limit)
    in_memory_new = (time.perf_counter() - start) / reps
    start = time.perf_counter()
    for _ in range(20):
        scanned = scan_page(projection, half, limit)
    in_memory_old = (time.perf_counter() - start) / 20
    same(paged[0], scanned[0])
    del built, projection
    await workspace.shutdown()

    gc.collect()
    workspace = Workspace(root, load_config(root, {}))
    start = time.perf_counter()
    agent = workspace.open_session(SESSION_ID)
    reopened = time.perf_counter() - start
    gc.collect()
    again_new = await timed_get(lambda: Hub(Door()).chat_page(agent, before_seq=NEWEST, limit=limit))
    gc.collect()
    again_old = old_get(agent, newest)
    same(again_new["items"], again_old["items"])
    rows.append((f"newest page, reopened", again_new, again_old, "took"))
    rows.append(("request behind it waits", again_new, again_old, "behind"))
    rows.append(("longest loop stall in it", again_new, again_old, "stall"))
    for label, kwargs, page in (
        (f"page k back (beforeSeq {half:,})", {"before_seq": half}, back),
        (f"page k forward (afterSeq {half:,})", {"after_seq": half}, forward),
    ):
        gc.collect()
        new = await timed_get(lambda: Hub(Door()).chat_page(agent, limit=limit, **kwargs))
        gc.collect()
        old = old_get(agent, page)
        same(new["items"], old["items"])
        rows.append((label, new, old, "took"))
    await workspace.shutdown()
    print(f"  (reopened in {reopened:.2f} s, from the checkpoint; first look's longest loop stall {ms(first_new['stall']).strip()})")
    for label, new, old, key in rows:
        cpu = f"   (new's CPU {ms(new['cpu']).strip()})" if key == "took" else ""
        print(f"  {label:36} new {ms(new[key])}   old {ms(old[key])}   old/new {old[key] / max(new[key], 1e-9):8.1f}x{cpu}")
    print(f"  {'page k in memory (bisect vs scan)':36} new {ms(in_memory_new)}   old {ms(in_memory_old)}   old/new {in_memory_old / max(in_memory_new, 1e-9):8.1f}x")


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
