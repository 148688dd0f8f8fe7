"""`dsh/goal/rounds` and `dsh/plan/history` on a 256-round goal with 40 plans, in one run.

    .venv/bin/python bench/plans_rounds.py [--rounds 256] [--plans 40] [--repeat 30] [--svg FILE]

Seeds a session through the real store (SessionStore.copy_events: every event checked by
the fold, times set as a real goal's would be): a goal of 256 rounds, each a turn with
two model replies (usage with cached input), an edit the person approves and a file
read, 40 of them with a plan review (a ~2 KB plan, its outcome and comments). Then:

  read the lines      the log's lines read from disk (dshd.log.iter_records), in process:
                      what any fold of the whole log pays first
  decode every line   the lines decoded into typed events (msgspec), in process
  goal_rounds         dshd.folds.rounds over the decoded events, in process (the fold alone)
  goal_rounds, lines  the same fold over the raw lines, decoding only the lines and fields
                      it reads (what the daemon does), in process
  over the wire       `dshd serve` over stdio, the session opened: dsh/plan/get (the cost
                      of any request: the floor), dsh/goal/rounds, dsh/plan/history: the
                      first call (the whole log folded), then the p50, best and worst of
                      --repeat more (only the events committed since are folded)

Target (issue 20): dsh/goal/rounds and dsh/plan/history at most 20 ms each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec

from dshd.agent.workspace import new_session_id
from dshd.folds import events as ev
from dshd.folds.rounds import goal_rounds, goal_rounds_of_lines
from dshd.log import iter_records
from dshd.services.store import SessionStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import Client, dshd_argv  # noqa: E402  (bench/rpc.py: the minimal stdio client)

T0 = datetime(2026, 11, 29, 18, 0, tzinfo=timezone.utc)
PLAN = "# Plan: speed up the parser\n\n" + "".join(f"{i}. Step {i}: change module {i} and test it.\n" for i in range(1, 60))
SOURCE = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(120))  # a ~3 KB file read


class Seeder:
    """Events of one session with a clock that moves as a real goal's would."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: list[ev.Event] = []
        self.clock = T0
        self.turn = 0
        self.goal = {"id": "g-bench", "revision": 1, "objective": "Speed up the parser", "phase": "active", "maxRounds": 256}

    def add(self, type_: str, data: dict, *, turn: int | None = None, after_ms: int = 5) -> None:
        self.clock += timedelta(milliseconds=after_ms)
        at = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        self.events.append(msgspec.convert({"type": type_, "seq": 1, "at": at, "turn": turn, "data": data}, ev.Event))

    def seed(self, rounds: int, plans: int) -> int:
        self.goal["maxRounds"] = rounds
        self.add("goal/change", {"version": 1, "op": "create", "goal": self.goal, "roundsStarted": 0, "tokensUsed": 0,
                                 "createdAt": "2026-11-29T18:00:00.000Z", "updatedAt": "2026-11-29T18:00:00.000Z"})  # fmt: skip
        plan_every = max(1, rounds // plans) if plans else 0
        plans_made = 0
        for n in range(1, rounds + 1):
            self.turn += 1
            t = self.turn
            self.add("turn/open", {"turn": t, "cause": "continuation"}, turn=t, after_ms=40)
            goal_round = {"goalId": self.goal["id"], "round": n, "revision": 1}
            self.add("user/message", {"text": "Continue working on the goal.", "source": "plugin", "plugin": "goals",
                                      "goalRound": goal_round}, turn=t)  # fmt: skip
            step = 0
            if plan_every and n % plan_every == 0 and plans_made < plans:
                plans_made += 1
                step += 1
                self._header(t, step)
                self._reply(t, "Here is the plan.", 9000 + 30 * n, 8000 + 30 * n, 700)
                call = f"call-plan-{n}"
                self.add("tool/call", {"callId": call, "name": "exit_plan_mode", "arguments": {"plan": PLAN + f"\nRound {n}.\n"}}, turn=t)
                review = {"outcome": "revise", "feedback": "Add a benchmark first.", "comments": [{"line": 3, "text": "why?"}]}
                if plans_made % 3 == 0:
                    review = {"outcome": "approved"}
                self.add("tool/result", {"callId": call, "ok": True, "content": "The person reviewed the plan.",
                                         "review": review}, turn=t, after_ms=45_000)  # fmt: skip
            step += 1
            self._header(t, step)
            self._reply(t, "", 10_000 + 40 * n, 9_500 + 40 * n, 180)
            read, edit = f"call-r{n}", f"call-e{n}"
            self.add("tool/call", {"callId": read, "name": "read_file", "arguments": {"path": f"src/mod{n % 17}.py"}}, turn=t)
            self.add("tool/call", {"callId": edit, "name": "edit_file", "arguments": {
                "path": f"src/mod{n % 17}.py", "oldText": "return x * 3", "newText": "return x * 3  # faster"}}, turn=t)  # fmt: skip
            self.add("tool/result", {"callId": read, "ok": True, "content": SOURCE}, turn=t, after_ms=3)
            self.add("permission/decision", {"callId": edit, "tool": "edit_file", "outcome": "allow-once", "by": "person"},
                     turn=t, after_ms=2_500)  # fmt: skip
            self.add("tool/result", {"callId": edit, "ok": True, "content": "Edited src/mod.py\n" + "+    return x * 3  # faster\n"}, turn=t)
            step += 1
            self._header(t, step)
            self._reply(t, f"Round {n}: changed one function; the tests pass.", 11_000 + 40 * n, 10_800 + 40 * n, 90)
            self.add("turn/close", {"turn": t, "stopReason": "end-turn"}, turn=t)
        return plans_made

    def _header(self, turn: int, step: int) -> None:
        self.add("request/header", {"step": step, "planActive": False, "sections": ["goal:status"],
                                    "tools": ["read_file", "edit_file", "exit_plan_mode", "goal_complete"]}, turn=turn)  # fmt: skip

    def _reply(self, turn: int, text: str, inp: int, cached: int, out: int) -> None:
        usage: dict = {"inputTokens": inp, "outputTokens": out}
        if "cachedInputTokens" in {f.name for f in msgspec.structs.fields(ev.Usage)}:
            usage["cachedInputTokens"] = cached  # the log format's optional field, when it has it
        self.add("assistant/message", {"text": text, "usage": usage}, turn=turn, after_ms=1_200)


def seed(root: Path, rounds: int, plans: int) -> tuple[str, int, int]:
    session_id = new_session_id()
    saved = os.fsync, os.fdatasync
    os.fsync = os.fdatasync = lambda fd: None  # seeding only: no wait for the disk
    try:
        seeder = Seeder(session_id)
        made = seeder.seed(rounds, plans)
        with SessionStore.create(root / ".dsh" / "sessions", session_id) as store:
            store.copy_events(seeder.events)
            events = store.state.seq
    finally:
        os.fsync, os.fdatasync = saved
    return session_id, events, made


def median_of(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def over_the_wire(root: Path, session_id: str, repeat: int) -> dict[str, list[float]]:
    env = {**os.environ, "DSHD_LOG_LEVEL": "WARNING"}
    client = Client(dshd_argv(), env=env, cwd=str(root))
    out: dict[str, list[float]] = {}
    try:
        client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        agent = client.request("dsh/session/open", {"sessionId": session_id})["agentId"]
        for method in ("dsh/plan/get", "dsh/goal/rounds", "dsh/plan/history"):
            samples = []
            for _ in range(repeat + 1):
                t0 = time.perf_counter()
                result = client.request(method, {"agentId": agent})
                samples.append(time.perf_counter() - t0)
            # The first call folds the whole log; the later ones only what was committed since.
            out[method + " first"], out[method] = [samples[0]], samples[1:]
            out[method + " result"] = result  # type: ignore[assignment]
        client.request("shutdown", None)
        client.send({"jsonrpc": "2.0", "method": "exit"})
    finally:
        client.close()
    return out


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=256)
    ap.add_argument("--plans", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--svg", type=Path, help="also write the rounds' picture (dshd log show --svg) here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".dsh").mkdir()
        (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n[model]\nprovider = "scripted"\n')
        session_id, events, plans = seed(root, args.rounds, args.plans)
        log = root / ".dsh" / "sessions" / session_id / "log.jsonl"
        size = log.stat().st_size

        def read_lines() -> int:
            return sum(1 for _ in iter_records(log))

        def decode_all() -> list:
            return [ev.decode_line(line) for _n, _o, line in iter_records(log)]

        decoded = decode_all()
        read = median_of(read_lines, args.repeat)
        decode = median_of(decode_all, args.repeat)
        fold = median_of(lambda: goal_rounds(decoded), args.repeat)
        of_lines = median_of(lambda: goal_rounds_of_lines(line for _n, _o, line in iter_records(log)), args.repeat)
        assert goal_rounds_of_lines(line for _n, _o, line in iter_records(log)) == goal_rounds(decoded)
        wire = over_the_wire(root, session_id, args.repeat)
        if args.svg is not None:
            from dshd.api import timeline

            args.svg.write_text(timeline.svg(goal_rounds(decoded)), encoding="utf-8")
    rounds_result, history_result = wire["dsh/goal/rounds result"], wire["dsh/plan/history result"]
    floor = statistics.median(wire["dsh/plan/get"])
    print(f"plans and rounds: a goal of {len(rounds_result['rounds'])} rounds with {len(history_result['plans'])} plans "
          f"({plans} seeded), {events} events, {size / 1e6:.1f} MB log")  # fmt: skip
    print(f"  read the lines (in process)      {ms(read)}")
    print(f"  decode every line (in process)   {ms(decode)}   {decode / read:5.1f}x reading")
    print(f"  goal_rounds fold (in process)    {ms(fold)}   {fold / read:5.1f}x reading")
    print(f"  goal_rounds of the lines         {ms(of_lines)}   {of_lines / read:5.1f}x reading (read included)")
    print(f"  dsh/plan/get over the wire       {ms(floor)}   (any request's floor)")
    for method in ("dsh/goal/rounds", "dsh/plan/history"):
        samples = wire[method]
        p50 = statistics.median(samples)
        first = wire[method + " first"][0]
        print(f"  {method:<16} first call     {ms(first)}   {first / read:5.1f}x reading, target <= 20 ms")
        print(f"  {method:<16} later calls    {ms(p50)}   {p50 / read:5.1f}x reading, best {ms(min(samples))}, "
              f"worst {ms(max(samples))}, target <= 20 ms")  # fmt: skip


if __name__ == "__main__":
    main()
