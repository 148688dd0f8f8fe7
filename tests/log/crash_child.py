"""Child process for tests/log/test_crash.py (not a test module).

    crash_child.py append SESSIONS_DIR SESSION_ID   goal edits forever; prints "ack <seq> <revision>" after each commit
    crash_child.py hold SESSIONS_DIR SESSION_ID     open the session, print "ready", hold it until stdin closes
    crash_child.py try-open SESSIONS_DIR SESSION_ID print one JSON line: {"ok"} or {"kind", "pid"}
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dshd.errors import DshError
from dshd.formats import utc_now
from dshd.services.store import SessionStore


# Big writes are what SIGKILL can cut part-way (the kernel stops copying between pages).
BIG_BYTES = int(os.environ.get("CRASH_BIG_BYTES", "200000"))
BIG_EVERY = int(os.environ.get("CRASH_BIG_EVERY", "10"))


def append(store: SessionStore) -> None:
    print(f"ready {store.state.seq}", flush=True)
    n = 0
    while True:
        n += 1
        goal = store.state.goal
        snap = goal.goal
        objective = f"objective {n} " + ("x" * BIG_BYTES if n % BIG_EVERY == 0 else "")
        data = {
            "version": 1,
            "op": "edit",
            "goal": {"id": snap.id, "revision": snap.revision + 1, "objective": objective, "phase": snap.phase,
                     "maxRounds": snap.maxRounds},
            "roundsStarted": goal.rounds_started,
            "createdAt": goal.created_at,
            "updatedAt": utc_now(),
        }
        event = store.commit("goal/change", data, writer="goals")
        sys.stdout.write(f"ack {event.seq} {event.data.goal.revision}\n")
        sys.stdout.flush()


def main() -> int:
    mode, sessions, sid = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if mode == "try-open":
        try:
            store = SessionStore.open(sessions, sid)
        except DshError as exc:
            print(json.dumps({"kind": exc.kind, **exc.data}), flush=True)
            return 3
        store.commit("plan/mode", {"active": not store.state.plan.active}, writer="plan")
        store.close()
        print(json.dumps({"ok": True, "pid": os.getpid()}), flush=True)
        return 0
    store = SessionStore.open(sessions, sid)
    if mode == "append":
        append(store)
    elif mode == "hold":
        print("ready", flush=True)
        sys.stdin.read()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
