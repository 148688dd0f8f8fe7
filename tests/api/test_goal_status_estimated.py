"""G-25 in the words: a goal whose tokens are partly estimated (characters/4, the provider
reported no usage) writes its figure as ``~12k`` everywhere people read it."""

from __future__ import annotations

from dshd.api.words import goal_status
from dshd.services.goals import GoalView

AT = "2026-11-29T18:40:18.123Z"


def view(**kw) -> GoalView:
    fields = dict(
        id="g-1", revision=2, objective="Ship it", phase="active", max_rounds=40, rounds_started=3, rounds_left=37,
        tokens_used=12_400, created_at=AT, updated_at=AT, activation="armed", max_tokens=100_000,
    )  # fmt: skip
    fields.update(kw)
    return GoalView(**fields)


def test_estimated_tokens_are_written_with_a_tilde():
    status = goal_status(view(tokens_estimated=True))
    assert status["text"] == "3/40 · ~12.4k/100k tok · active"
    assert status["usage"] == "3 of 40 rounds used, ~12.4k of 100k tokens"
    assert "Tokens: ~12.4k of 100k used" in status["detail"]
    assert any("Estimated" in line for line in status["detail"])
    # Control: the same goal with reported usage has no tilde and no note.
    plain = goal_status(view())
    assert plain["text"] == "3/40 · 12.4k/100k tok · active"
    assert not any("~" in line or "Estimated" in line for line in plain["detail"])


def test_estimated_without_a_budget():
    status = goal_status(view(tokens_estimated=True, max_tokens=None, tokens_used=950))
    assert status["text"] == "3/40 · ~950 tok · active"
