"""The goal status a person reads (dshd.api.words.goal_status) against the shared fixture
tests/fixtures/status/goal-status.json, which the Neovim and VS Code status formatters
are checked against too: the same words in every client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshd.api.words import goal_actions, goal_status
from dshd_protocol import from_wire
from dshd_protocol import types as T

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "status" / "goal-status.json").read_text(encoding="utf-8"))
CASES = FIXTURE["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_goal_status_matches_the_fixture(case):
    assert goal_status(case["goal"]) == case["expect"]


def test_fixture_goals_are_wire_goal_views_and_the_words_follow_the_issue():
    texts = {c["name"]: c["expect"] for c in CASES}
    for case in CASES:
        if case["goal"] is not None:
            # Every goal is a wire GoalView; the one from a daemon that predates token
            # counting lacks tokensUsed (clients must still show it), so 0 stands in for it.
            from_wire(T.GoalView, {"tokensUsed": 0, **case["goal"]})
        expect = case["expect"]
        assert "disarmed" not in expect["text"] and "revision" not in " ".join(expect["tooltip"]).lower()
        assert expect["severity"] in ("none", "hint", "warning")
        assert expect["tooltip"][-1] == "Actions: " + ", ".join(expect["actions"])
    assert texts["active, rounds running on their own"]["text"] == "3/40 · 12.4k tok · active"
    assert texts["active after a load: nothing runs until the person resumes"]["text"].endswith("waiting for you to resume")
    assert texts["blocked by the agent"]["severity"] == "warning"
    assert "resume" not in texts["complete: no resume offered"]["actions"]
    assert "resume" not in texts["blocked: the round budget is spent (no resume until the budget is raised)"]["actions"]


def test_actions_per_phase():
    def view(phase, activation="disarmed", left=3):
        return {"phase": phase, "activation": activation, "roundsLeft": left}

    assert goal_actions(None) == ["create"]
    assert goal_actions(view("active", "armed")) == ["edit", "pause", "complete", "block", "clear"]
    assert goal_actions(view("active")) == ["edit", "pause", "resume", "complete", "block", "clear"]
    assert goal_actions(view("paused", left=0)) == ["edit", "complete", "block", "clear"]
    assert goal_actions(view("blocked")) == ["edit", "resume", "complete", "clear"]
    assert goal_actions(view("complete")) == ["create", "clear"]
