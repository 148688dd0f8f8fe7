"""Opening a session whose last turn was left open (a crash mid-turn) against a clean open.

    .venv/bin/python bench/open_turn.py [--events 100000 1000000] [--repeat 3]

For each size: a sound log (bench/replay.py's generator) that ends inside a turn, in the
middle of a tool batch (calls without results), and the same log closed cleanly (the
left-open turn closed once by a load, so its turn/close and "not run" results are in it).
Each open is a fresh child process: Workspace(...).open_session(id) on a copy of the log
without a checkpoint (the full strict replay, as the first open after a crash is), timed
inside the child, with its peak RSS (ru_maxrss via wait4, started by a tiny launcher so
this process's memory is not counted). Interleaved, medians; ratio left-open / clean.

Target: left-open <= 1.2x the clean open in time and memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import generate_log  # noqa: E402

SID = "s-0123456789abcdefghjkmnpqrs"  # a session id as the daemon issues them

# The child: open the session the way the daemon does, print seconds and the turn's state.
_OPEN = """
import json, sys, time
from pathlib import Path
from dshd.agent import Workspace, load_config
root, sid = Path(sys.argv[1]), sys.argv[2]
t0 = time.perf_counter()
ws = Workspace(root, load_config(root, {"plugins": []}))
agent = ws.open_session(sid)
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed, "open": agent.store.state.turn.open, "seq": agent.store.state.seq}))
agent.store.close = lambda: None  # leave the copy as it is (no checkpoint write counted)
"""

_LAUNCHER = """
import os, sys
r, w = os.pipe()
pid = os.posix_spawn(sys.executable, [sys.executable, "-c"] + sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
os.close(w)
out = b""
while chunk := os.read(r, 65536):
    out += chunk
_, status, usage = os.wait4(pid, 0)
sys.stdout.write(out.decode().strip() + " " + str(usage.ru_maxrss if os.waitstatus_to_exitcode(status) == 0 else -1) + "\\n")
"""


def open_in_child(root: Path, sid: str) -> tuple[float, float, dict]:
    out = subprocess.run(
        [sys.executable, "-S", "-c", _LAUNCHER, _OPEN, str(root), sid], capture_output=True, text=True
    )
    line = out.stdout.strip()
    body, _, kib = line.rpartition(" ")
    if out.returncode != 0 or int(kib) < 0:
        raise SystemExit(f"child failed: {out.stderr[-2000:]}")
    info = json.loads(body)
    return info["s"], int(kib) / 1024, info


def make_logs(tmp: Path, events: int) -> tuple[Path, Path]:
    """(left-open log, clean log) of one session id; the clean one is the left-open one
    after a load closed its turn."""
    sid = SID
    # generate_log cuts at exactly `events`; cut back further to the last tool/call line,
    # so the open turn ends inside a tool batch (calls the load must close).
    src = tmp / "gen.jsonl"
    generate_log(src, events, sid)
    size = src.stat().st_size
    with open(src, "rb+") as f:
        f.seek(max(0, size - 20_000))
        tail = f.read()
        lines = tail.split(b"\n")[1:-1]  # whole lines only
        end = size
        for line in reversed(lines):
            if b'"tool/call"' in line:
                break
            end -= len(line) + 1
        f.truncate(end)
    left = tmp / "left-open"
    (left / ".dsh" / "sessions" / sid).mkdir(parents=True)
    shutil.move(src, left / ".dsh" / "sessions" / sid / "log.jsonl")
    clean = tmp / "clean"
    (clean / ".dsh" / "sessions" / sid).mkdir(parents=True)
    shutil.copy(left / ".dsh" / "sessions" / sid / "log.jsonl", clean / ".dsh" / "sessions" / sid / "log.jsonl")
    # One load closes the turn (turn/close "interrupted"); then drop its checkpoint.
    subprocess.run(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from dshd.agent import Workspace, load_config; "
         "r = Path(sys.argv[1]); a = Workspace(r, load_config(r, {'plugins': []})).open_session(sys.argv[2]); "
         "assert not a.store.state.turn.open; a.close()", str(clean), sid],
        check=True,
    )
    (clean / ".dsh" / "sessions" / sid / "projection.json").unlink(missing_ok=True)
    return left, clean


def fresh_copy(src_root: Path, dst_root: Path) -> Path:
    shutil.rmtree(dst_root, ignore_errors=True)
    shutil.copytree(src_root, dst_root)
    return dst_root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("open a session: last turn left open (crash mid-turn) vs the same log closed cleanly")
    print("(each a fresh process, full strict replay, no checkpoint; medians, interleaved)")
    for events in args.events:
        tmp = Path(tempfile.mkdtemp(prefix="dshd-bench-openturn-"))
        try:
            left, clean = make_logs(tmp, events)
            samples = {"left-open": ([], []), "clean": ([], [])}
            for _ in range(args.repeat):
                for label, src in (("left-open", left), ("clean", clean)):
                    root = fresh_copy(src, tmp / "run")
                    secs, mb, info = open_in_child(root, SID)
                    assert info["open"] is False, info  # the left-open turn was closed on load
                    samples[label][0].append(secs)
                    samples[label][1].append(mb)
            (lt, lm), (ct, cm) = [(statistics.median(t), statistics.median(m)) for t, m in samples.values()]
            print(f"{events:>9,} events  left-open {lt:6.2f} s {lm:6.0f} MB   clean {ct:6.2f} s {cm:6.0f} MB   "
                  f"ratio time {lt / ct:4.2f}x, peak RSS {lm / cm:4.2f}x  (target <= 1.2x)")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
