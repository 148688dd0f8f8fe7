"""Prompt-cache reuse on a real model: how much of each goal round's prompt llama.cpp's
server read from its cache, with the goal's changing counts after the history (as dshd
sends them, G-24) and, in the same run, in the system text (the order before).

    .venv/bin/python bench/cache.py [--rounds 3] [--provider openai|anthropic]

Each order runs a fresh server (llama.cpp's own, the `xllamacpp` wheel, one thread) on
Qwen2.5-Coder-0.5B-Instruct (tests/real_model_support.py; `./run setup` installs both), a
fresh in-process workspace with every plugin and the real provider (its official SDK),
and a goal of ``--rounds`` rounds. For each round it prints the prompt's tokens, the part
the server said it read from its cache (the usage the provider reported, as logged in
assistant/message.usage) and the round's time (turn/open to turn/close in the log).
Target: rounds 2 and 3 reuse at least 0.9 of their prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from real_model_support import MODEL_NAME, RealServer, missing  # noqa: E402

from dshd.agent import Workspace, load_config  # noqa: E402
from dshd.services.goals import GoalService  # noqa: E402

KEY_ENV = "DSHD_BENCH_MODEL_KEY"
OBJECTIVE = "Write one short sentence about tidy code. Answer in plain text; call no tools."


def seconds_between(start: str, end: str) -> float:
    parse = lambda at: datetime.fromisoformat(at.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


async def settle(agent) -> None:
    """Until the goal's continuation driver has stopped and no turn runs."""
    driver = agent.plugins.get("goals").driver
    while True:
        if driver.task is not None and not driver.task.done():
            await asyncio.wait({driver.task})
        await agent.wait_idle()
        if not agent.turn_running and (driver.task is None or driver.task.done()):
            return


async def goal_rounds(server: RealServer, provider: str, rounds: int, old_order: bool) -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="dshd-bench-cache-"))
    (root / ".dsh").mkdir()
    base = f"{server.base}/v1" if provider == "openai" else server.base
    model = {"provider": provider, "model": MODEL_NAME, "baseUrl": base, "apiKeyEnv": KEY_ENV,
             "maxOutputTokens": 48, "timeoutS": 600, "maxRetries": 0}  # fmt: skip
    ws = Workspace(root, load_config(root, {"model": model, "plugins": ["plan", "goals", "tools"]}))
    agent = ws.create_session()
    if old_order:  # every section in the system text: what dshd sent before G-24
        for section_id in agent.sections.ids():
            agent.sections.replace(attrs.evolve(agent.sections.get(section_id), volatile=False))
    agent.features.get(GoalService).create(OBJECTIVE, rounds)
    await settle(agent)
    with agent.store.path.open() as log:  # the log: what the rounds recorded
        events = [json.loads(line) for line in log]
    ws.close(agent.agent_id)
    opens = {e["turn"]: e for e in events if e["type"] == "turn/open" and e["data"].get("cause") == "continuation"}
    closes = {e["turn"]: e for e in events if e["type"] == "turn/close"}
    usage = {e["turn"]: e["data"]["usage"] for e in events if e["type"] == "assistant/message" and "usage" in e["data"]}
    out = []
    for number, turn in enumerate(sorted(opens), 1):
        u = usage.get(turn, {})
        out.append({
            "round": number,
            "input": u.get("inputTokens", 0),
            "cached": u.get("cachedInputTokens", 0),
            "seconds": seconds_between(opens[turn]["at"], closes[turn]["at"]),
            "stop": closes[turn]["data"]["stopReason"],
        })  # fmt: skip
    return out


def show(name: str, rows: list[dict]) -> None:
    for r in rows:
        fraction = r["cached"] / r["input"] if r["input"] else 0.0
        print(f"  {name:<22} round {r['round']}: {r['input']:5d} prompt tokens, {r['cached']:5d} from the cache "
              f"({fraction:4.2f}), {r['seconds']:6.1f} s, {r['stop']}")


def later_fraction(rows: list[dict]) -> float:
    later = [r["cached"] / r["input"] for r in rows[1:] if r["input"]]
    return min(later) if later else 0.0


async def run(args: argparse.Namespace) -> int:
    why = missing()
    if why is not None:
        print(f"the real model is not installed: {why}; run ./run real-model", file=sys.stderr)
        return 1
    os.environ[KEY_ENV] = "sk-local"  # llama.cpp's server checks no key; the SDKs want one
    results = {}
    for name, old in (("before G-24 (in system)", True), ("dshd (after history)", False)):
        with RealServer() as server:  # a fresh server: both orders start from a cold cache
            results[name] = await goal_rounds(server, args.provider, args.rounds, old)
        show(name, results[name])
    old_rows, new_rows = results["before G-24 (in system)"], results["dshd (after history)"]
    old_f, new_f = later_fraction(old_rows), later_fraction(new_rows)
    old_s = statistics.mean(r["seconds"] for r in old_rows[1:])
    new_s = statistics.mean(r["seconds"] for r in new_rows[1:])
    print(f"rounds 2-{args.rounds}, {args.provider}: cached fraction (lowest) {new_f:.2f} (before: {old_f:.2f}), "
          f"mean round {new_s:.1f} s (before: {old_s:.1f} s, {old_s / new_s:.1f}x); target >= 0.9 -> "
          f"{'met' if new_f >= 0.9 else 'NOT met'}")
    return 0  # a figure, not a test: tests/e2e/test_real_model.py holds the target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
