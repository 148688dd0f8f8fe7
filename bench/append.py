"""Append benchmark: one durable goal write through SessionStore.commit vs raw write + fdatasync.

    .venv/bin/python bench/append.py [--writes 400] [--rounds 5]

Both sides append the same bytes (a goal/change edit, ~300 B) to a file in the same
directory, one fdatasync per write. The store side does everything a goal write does
(envelope, payload validation, strict fold, durable append, state swap, listeners);
GoalService is not involved. Measured in interleaved rounds so machine noise hits both
alike. Target: store median within 1.5x of the raw median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from dshd.formats import utc_now
from dshd.services.store import SessionStore

CREATED = "2026-11-29T18:00:00.000Z"


def goal_edit(revision: int) -> dict:
    return {
        "version": 1,
        "op": "edit",
        "goal": {"id": "g-bench", "revision": revision, "objective": f"Keep the parser tests green ({revision})",
                 "phase": "active", "maxRounds": 256},
        "roundsStarted": 0,
        "createdAt": CREATED,
        "updatedAt": utc_now(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dshd-bench-append-"))
    try:
        store = SessionStore.create(tmp, "bench")
        created = goal_edit(1)
        created.update(op="create", createdAt=CREATED)
        store.commit("goal/change", created, writer="goals")
        store.add_listener(lambda event: None)  # a goal write notifies; count the call
        raw_fd = os.open(tmp / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        sample_line = store.events(after_seq=1)[0]
        from dshd.folds.events import encode_event

        line = encode_event(sample_line)
        store_per_write: list[float] = []
        raw_per_write: list[float] = []
        revision = 1
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(args.writes):
                os.write(raw_fd, line)
                os.fdatasync(raw_fd)
            raw_per_write.append((time.perf_counter() - t0) / args.writes)

            t0 = time.perf_counter()
            for _ in range(args.writes):
                revision += 1
                store.commit("goal/change", goal_edit(revision), writer="goals")
            store_per_write.append((time.perf_counter() - t0) / args.writes)

        # CPU cost of the commit path alone (no fsync), to show what the store adds.
        t0 = time.perf_counter()
        n = 2000
        orig = os.fdatasync
        os.fdatasync = lambda fd: None  # measurement only: this process's store, not the product
        try:
            for _ in range(n):
                revision += 1
                store.commit("goal/change", goal_edit(revision), writer="goals")
        finally:
            os.fdatasync = orig
        cpu_us = (time.perf_counter() - t0) / n * 1e6
        store.close()
        os.close(raw_fd)

        raw = statistics.median(raw_per_write) * 1e6
        durable = statistics.median(store_per_write) * 1e6
        print(f"line: {len(line)} B, {args.writes} writes x {args.rounds} interleaved rounds")
        print(f"raw write + fdatasync (baseline):            {raw:7.1f} us/write  (rounds: {', '.join(f'{x * 1e6:.0f}' for x in raw_per_write)})")
        print(f"SessionStore.commit goal/change (durable):   {durable:7.1f} us/write  (rounds: {', '.join(f'{x * 1e6:.0f}' for x in store_per_write)})")
        print(f"  ratio = {durable / raw:.2f}x  (target <= 1.5x)")
        print(f"  commit path without the fdatasync: {cpu_us:.1f} us/write (envelope, validate, fold, write, listeners)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
