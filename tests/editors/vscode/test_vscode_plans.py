"""Plans of record, goals from plans and spend you can see, in a real VS Code against the real dshd
and a loopback HTTP model peer (editors/vscode/test/integration/plans.ts): a plan sent back with a
line comment and feedback, its revision reviewed beside them (card, compare view); "Approve and
start a goal" (budgets asked, approve, then a goal naming the plan); a goal round waiting for an
approval ("waiting for you", one notice); the round budget spent, raised and resumed; the rounds
timeline in the chat header; the plan picker (diff to the plan before, comments and feedback); a
second goal's round waiting for a plan review (a new spell, one more notice).
Screenshots in artifacts/vscode/plans."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

from .test_vscode import ARTIFACTS, MODEL_KEY_ENV, OWN_DAEMON, built, pytestmark as toolchain, run_real_vscode, write_settings  # noqa: F401

pytestmark = [toolchain, pytest.mark.slow]

PLAN_RETRIES = "# Plan: retries\n\n1. Add a RetryPolicy.\n2. Wrap send() in it.\n3. Retry on every exception.\n4. Add tests for the policy.\n"
PLAN_DOCS = "# Plan: docs\n\n1. Document the retry policy in docs/http.md.\n"
PLAN_RETRIES_REVISED = (
    "# Plan: retries (revised)\n\n1. Add a RetryPolicy with backoff capped at 30 seconds.\n"
    "2. Wrap send() in it.\n3. Retry only connection errors and 502/503/504, never a 404.\n4. Add tests for the policy.\n"
)


@pytest.mark.timeout(480)
def test_real_vscode_plans_goals_timeline(built, tmp_path: Path) -> None:
    from loopback_models import Call, LoopbackModelServer, Reply

    key = "sk-vscode-" + secrets.token_hex(16)
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(text="Here is my plan.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN_RETRIES})]),
            Reply(tool_calls=[Call("exit_plan_mode", {"plan": PLAN_RETRIES_REVISED})]),
            Reply(text="Approved: starting with the RetryPolicy.", usage=(900, 30)),
            # Goal round 1: a command that needs the person's yes (the round waits), then its reply.
            Reply(text="I will write the marker file.", tool_calls=[Call("run_command", {"command": "echo hi > marker.txt"})], usage=(1400, 60)),
            Reply(text="Wrote marker.txt.", usage=(1500, 20)),
            # Round 2: no completion; the round budget (2) is spent.
            Reply(text="The policy class is drafted.", usage=(1700, 80)),
            # Round 3, after the budget was raised to 3 and the goal resumed.
            Reply(tool_calls=[Call("goal_complete", {})], usage=(1900, 15)),
            Reply(text="Retries are in, with tests.", usage=(2000, 10)),
            # A second goal, in plan mode: its round waits for a plan review, then completes.
            Reply(text="Let me plan the docs.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN_DOCS})], usage=(800, 40)),
            Reply(tool_calls=[Call("goal_complete", {})], usage=(900, 10)),
            Reply(text="The docs are planned and written.", usage=(950, 10)),
        )
        (tmp_path / ".dsh").mkdir()
        (tmp_path / ".dsh" / "config.toml").write_text(
            'plugins = ["plan", "goals", "tools"]\n\n[goals]\nmaxRounds = 40\n\n[tools]\napprove = ["exec"]\n'
        )
        write_settings(tmp_path, **{
            "dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON,
            "dsh.model.provider": "openai", "dsh.model.name": "loopback-model",
            "dsh.model.baseUrl": server.base_url, "dsh.model.apiKeyEnv": MODEL_KEY_ENV,
        })
        results = run_real_vscode(tmp_path, "out/integration/plans.js", ARTIFACTS / "plans", 400, env={MODEL_KEY_ENV: key})
        assert results["passed"] == 7
    for shot in ("plan-picker", "plan-picker-diff", "timeline", "timeline-header", "waiting-for-you", "waiting-for-you-plan-review", "review-previous-asked-compare"):
        assert (ARTIFACTS / "plans" / f"{shot}.png").is_file(), shot
