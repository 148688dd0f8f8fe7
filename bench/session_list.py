"""`dsh/session/list` of 1,000 sessions plus an old log with a 63 MB title, in one run.

    .venv/bin/python bench/session_list.py [--sessions 1000] [--title-mb 63] [--repeat 20]

Seeds a workspace (sessions as a daemon leaves them: a turn each and a checkpoint; one
log written before titles were capped, whose line 1 holds a 63 MB title), then measures:

  baseline       what a list did before: a full replay (checkpoint + tail) of every log,
                 the huge line 1 decoded whole
  index, cold    services.listing.SessionIndex.rows on a fresh index with no saved rows
                 (the first list ever): checkpoint + tail per session, the huge line 1
                 read at its ends
  index, saved   a fresh index that finds the rows a previous daemon saved (any later
                 daemon's first list)
  index, warm    the same index again (every later list): two stat calls a session
  over the wire  `dshd serve` over stdio: the first dsh/session/list, the median of the
                 next ones, and a second daemon's first list (includes JSON-RPC encoding
                 of 1,001 rows)

Target (SPEC): a list of 1,000 sessions under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dshd.agent.workspace import is_session_id, new_session_id
from dshd.folds import replay
from dshd.services.listing import SessionIndex
from dshd.services.store import SessionStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import Client, dshd_argv  # noqa: E402  (bench/rpc.py: the minimal stdio client)


def seed(root: Path, sessions: int, title_mb: int) -> None:
    saved = os.fsync, os.fdatasync
    os.fsync = os.fdatasync = lambda fd: None  # seeding only: no wait for the disk
    try:
        for i in range(sessions):
            with SessionStore.create(root / ".dsh" / "sessions", new_session_id(), title=f"session {i}") as store:
                store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
                store.commit("user/message", {"text": f"hello {i}", "source": "user"}, turn=1)
                store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    finally:
        os.fsync, os.fdatasync = saved
    big = new_session_id()
    folder = root / ".dsh" / "sessions" / big
    folder.mkdir()
    start = {"seq": 1, "type": "session/start", "at": "2026-11-29T18:40:18.123Z",
             "data": {"sessionId": big, "formatVersion": 1, "title": "t" * (title_mb * 1024 * 1024)}}
    (folder / "log.jsonl").write_text(json.dumps(start, separators=(",", ":")) + "\n")


def baseline(root: Path) -> float:
    t0 = time.perf_counter()
    for folder in sorted((root / ".dsh" / "sessions").iterdir()):
        replay(folder / "log.jsonl")
    return time.perf_counter() - t0


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def over_the_wire(root: Path, cache: Path, repeat: int) -> tuple[float, float]:
    env = {**os.environ, "DSHD_LOG_LEVEL": "WARNING", "XDG_CACHE_HOME": str(cache)}
    client = Client(dshd_argv(), env=env, cwd=str(root))
    try:
        client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        first = timed(lambda: client.request("dsh/session/list", {}))
        later = statistics.median(timed(lambda: client.request("dsh/session/list", {})) for _ in range(repeat))
        client.request("shutdown", None)
        client.send({"jsonrpc": "2.0", "method": "exit"})
    finally:
        client.close()
    return first, later


def cold_index(root: Path, saved: Path) -> float:
    saved.unlink(missing_ok=True)
    index = SessionIndex(root, is_session_id, saved=saved)
    return timed(lambda: index.rows(lambda s: None))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--title-mb", type=int, default=63)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed(root, args.sessions, args.title_mb)
        (root / ".dsh" / "config.toml").write_text('[model]\nprovider = "scripted"\n')
        base = baseline(root)
        saved = root / "saved-rows.json"
        cold = statistics.median(cold_index(root, saved) for _ in range(3))
        from_saved = statistics.median(
            timed(lambda: SessionIndex(root, is_session_id, saved=saved).rows(lambda s: None)) for _ in range(3)
        )
        index = SessionIndex(root, is_session_id, saved=saved)
        index.rows(lambda s: None)
        warm = statistics.median(timed(lambda: index.rows(lambda s: None)) for _ in range(args.repeat))
        cache = root / "cache"
        wire_first, wire_later = over_the_wire(root, cache, args.repeat)
        second_daemon, _ = over_the_wire(root, cache, 1)
    n = args.sessions + 1
    print(f"session list: {args.sessions} sessions + 1 old log with a {args.title_mb} MB title ({n} rows)")
    print(f"  baseline (replay every log)  {ms(base)}")
    print(f"  index, cold (first list)     {ms(cold)}   {base / cold:6.1f}x faster")
    print(f"  index, saved rows            {ms(from_saved)}   {base / from_saved:6.1f}x faster")
    print(f"  index, warm (later lists)    {ms(warm)}   {base / warm:6.1f}x faster")
    print(f"  over the wire, first ever    {ms(wire_first)}")
    print(f"  over the wire, later (p50)   {ms(wire_later)}   target < 50 ms")
    print(f"  over the wire, next daemon   {ms(second_daemon)}   target < 50 ms")


if __name__ == "__main__":
    main()
