"""`dshd demo` (the README's main job) runs the whole scenario against the real daemon
and prints what a person would see."""

from __future__ import annotations

import pytest

import subprocess
import sys
from pathlib import Path

from dshd.folds import replay


@pytest.mark.slow
def test_demo_walks_the_scenario_and_keeps_a_sound_log(tmp_path: Path) -> None:
    dshd = Path(sys.executable).with_name("dshd")
    proc = subprocess.run(
        [str(dshd), "demo", "--workspace", str(tmp_path / "ws")],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [
        "[you]    /plan",
        "plan review #1 opens in the editor",
        "[you]    Keep planning:",
        "comment on line 5",
        "[review] sent back with feedback",
        "plan review #2 opens in the editor",
        "[you]    Approve",
        "[review] approved",
        "[plan]   Plan mode off",
        "[turn]   Turn 1 finished",
        "plan mode off",
        "◎ 0/40 · 0/100k tok · active",
        "[goal]   Goal round 1 of 40",
        "◎ 3/40 · 11.8k/100k tok · blocked: dependency-conflict",
        "goal/changed resume",
        "daemon exited with code 0",
        "◎ 5/40 · 20.9k/100k tok · waiting for you to resume",
        "closed on load: interrupted",
        "nothing runs by itself: 0 events",
        "goal/changed arm",
        "[goal]   Goal complete (6/40 rounds used, 25.9k tokens)",
        "◎ 6/40 · 25.9k/100k tok · complete",
        "done: daemon exited with code 0",
    ]
    position = 0
    for step in steps:  # in this order
        found = out.find(step, position)
        assert found >= 0, f"missing (in order): {step!r}\n{out}"
        position = found
    # The session it leaves behind replays strictly, ending with the goal complete.
    (log,) = (tmp_path / "ws" / ".dsh" / "sessions").glob("*/log.jsonl")
    state = replay(log, use_checkpoint=False).state
    assert state.goal.goal.phase == "complete" and state.plan.active is False
    # Rounds spend the tokens their replies report (the whole round turn counts, the reply
    # after goal_complete too); the person's own turn 1 spends none.
    assert (state.goal.tokens_used, state.goal.goal.maxTokens) == (31037, 100000)
