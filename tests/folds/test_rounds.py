"""goal_rounds: the rounds of the current goal folded from a log written by the real
store (its times kept, as a fork copies them): turns, times, tokens, tool calls, the
waits for a person (plan reviews and approvals, never another call's run), outcomes, and
what a create or a clear does to the list."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from dshd.folds import events as ev
from dshd.folds.rounds import GoalRoundRecord, RoundTokens, goal_rounds
from dshd.services.store import SessionStore
from rounds_log import SESSION, Log, at


@pytest.fixture
def log(tmp_path: Path):
    built = Log(tmp_path / "sessions")
    yield built
    built.store.close()


def test_no_goal_means_no_rounds_and_a_person_turn_is_no_round(log) -> None:
    assert log.rounds_now() == msgspec.convert({"goal_id": None, "rounds": []}, type(log.rounds_now()))
    log.prompt(1)
    log.reply(2, 500, 50, counts=False)
    log.close(3)
    result = log.rounds_now()
    assert result.goal_id is None and result.rounds == []


def test_one_round_per_round_turn_with_its_times_tokens_and_outcome(log) -> None:
    log.goal_change("create", 0)
    turn = log.round(1.0)
    log.reply(2.0, 1000, 40)
    log.call(2.0, "c1", "read_file")
    log.result(2.1, "c1")
    log.reply(3.0, 1200, 30)
    log.close(3.5)
    log.round(4.0)
    log.reply(5.0, 300, 10)
    log.close(6.0, "model-error")
    first, second = log.rounds_now().rounds
    assert first == GoalRoundRecord(
        round=1, revision=1, turn=turn, started_at=at(1.0), ended_at=at(3.5), tokens=RoundTokens(2200, 0, 70),
        estimated=False, tool_calls=1, waited_ms=0, outcome="end-turn",
    )  # fmt: skip
    assert second.round == 2 and second.outcome == "model-error" and second.tokens == RoundTokens(300, 0, 10)
    # The rounds' tokens are what the goal's budget counted.
    assert sum(r.tokens.input + r.tokens.output for r in (first, second)) == log.store.state.goal.tokens_used


def test_an_open_round_is_running_with_no_end(log) -> None:
    log.goal_change("create", 0)
    log.round(1.0)
    log.reply(2.0, 100, 5)
    [record] = log.rounds_now().rounds
    assert record.outcome == "running" and record.ended_at is None and record.tokens.input == 100


def test_a_plan_review_waits_until_its_result(log) -> None:
    log.goal_change("create", 0)
    log.round(1.0)
    log.call(2.0, "p1", "exit_plan_mode", {"plan": "# Plan\n"})
    log.result(32.5, "p1", review={"outcome": "approved"})  # the person read for 30.5 s
    log.close(33.0)
    [record] = log.rounds_now().rounds
    assert record.waited_ms == 30_500 and record.tool_calls == 1


def test_approvals_wait_from_when_each_was_asked_never_counting_another_calls_run(log) -> None:
    """Both calls of one reply are written first, then run in turn: the second is asked
    about only after the first finished (here a 10 s run), so its wait starts there."""
    log.goal_change("create", 0)
    log.round(1.0)
    log.call(2.0, "c1")
    log.call(2.0, "c2")
    log.decision(4.0, "c1")  # asked at 2.0: 2 s
    log.result(14.0, "c1")  # ran 10 s: not waiting
    log.decision(17.0, "c2")  # asked at 14.0: 3 s
    log.result(17.5, "c2")
    # Decisions nobody was asked for are no wait; a timeout after asking is.
    log.call(20.0, "c3")
    log.decision(20.0, "c3", by="policy")
    log.result(20.2, "c3")
    log.call(21.0, "c4")
    log.decision(26.0, "c4", by="fail-closed")  # asked at 21.0, timed out: 5 s
    log.result(26.0, "c4")
    log.close(27.0)
    [record] = log.rounds_now().rounds
    assert record.waited_ms == 2_000 + 3_000 + 5_000 and record.tool_calls == 4


def test_a_new_goal_starts_a_new_list_and_a_clear_empties_it(log) -> None:
    log.goal_change("create", 0)
    log.round(1.0)
    log.close(2.0)
    log.goal_change("complete", 3.0)
    # A complete goal is still the current one: its rounds stay.
    assert [r.round for r in log.rounds_now().rounds] == [1]
    log.goal_change("create", 4.0, gid="g2")
    log.round(5.0)
    log.close(6.0)
    log.round(7.0)
    log.close(8.0, "cancelled")
    result = log.rounds_now()
    assert result.goal_id == "g2" and [(r.round, r.outcome) for r in result.rounds] == [(1, "end-turn"), (2, "cancelled")]
    log.goal_change("clear", 9.0)
    assert log.rounds_now().goal_id is None and log.rounds_now().rounds == []


def test_a_pause_mid_round_keeps_the_rest_of_the_turn_in_the_round(log) -> None:
    """As the goal's token count does: a round's turn counts to its end."""
    log.goal_change("create", 0)
    log.round(1.0)
    log.reply(2.0, 100, 10)
    log.goal_change("pause", 2.5)
    log.reply(3.0, 50, 5)
    log.close(4.0)
    [record] = log.rounds_now().rounds
    assert record.tokens == RoundTokens(150, 0, 15) and record.revision == 1


def test_cached_and_estimated_usage_when_the_log_carries_it(log) -> None:
    """cachedInputTokens and estimated are optional usage fields: absent counts 0 and
    reported (the fold reads them when the log format has them)."""
    fields = {f.name for f in msgspec.structs.fields(ev.Usage)}
    if not {"cachedInputTokens", "estimated"} <= fields:
        pytest.skip("the log format has no cachedInputTokens / estimated yet")
    log.goal_change("create", 0)
    log.round(1.0)
    usage = {"inputTokens": 1000, "outputTokens": 40, "cachedInputTokens": 900}
    log.add("assistant/message", {"text": "ok", "usage": usage}, 2.0, log.turn)
    log.add("assistant/message", {"text": "ok", "usage": {"inputTokens": 200, "outputTokens": 20, "estimated": True}}, 3.0, log.turn)
    log.close(4.0)
    [record] = log.rounds_now().rounds
    assert record.tokens == RoundTokens(1200, 900, 60) and record.estimated is True


def test_the_same_records_after_reopening_the_log(log, tmp_path: Path) -> None:
    log.goal_change("create", 0)
    log.round(1.0)
    log.reply(2.0, 100, 10)
    log.close(3.0)
    before = log.rounds_now()
    log.store.close()
    reopened = SessionStore.open(tmp_path / "sessions", SESSION)
    try:
        assert goal_rounds(reopened.events()) == before
    finally:
        reopened.close()
    log.store = SessionStore.open(tmp_path / "sessions", SESSION)
