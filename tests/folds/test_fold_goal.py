"""fold_goal: every G-3..G-8 rule, the token count of round turns, and each exact reason
text (docs/log-format.md)."""

from __future__ import annotations

import msgspec
import pytest

from dshd.folds import FoldError, GoalState, fold_goal
from dshd.folds.events import AssistantMessage, GoalChange, UserMessage

T0 = "2026-11-29T18:00:00.000Z"
T1 = "2026-11-29T18:05:00.000Z"


def change(op, gid="g1", rev=1, phase="active", *, rounds=0, max_rounds=3, created=T0, blocked=None,
           max_tokens=None, **extra):
    goal = {"id": gid, "revision": rev, "objective": "ship it", "phase": phase, "maxRounds": max_rounds}
    if max_tokens is not None:
        goal["maxTokens"] = max_tokens
    if blocked is not None:
        goal["blockedReason"] = {"code": blocked[0], "message": blocked[1]}
    data = {"version": 1, "op": op, "goal": goal, "roundsStarted": rounds, "createdAt": created, "updatedAt": T1}
    data.update(extra)
    return msgspec.convert({"seq": 9, "at": T1, "data": data}, GoalChange)


def clear(gid="g1", rev=1, **extra):
    data = {"version": 1, "op": "clear", "cleared": {"id": gid, "revision": rev}, "clearedAt": T1}
    data.update(extra)
    return msgspec.convert({"seq": 9, "at": T1, "data": data}, GoalChange)


def round_msg(n, gid="g1", rev=1, turn=1):
    data = {"text": "continue", "source": "plugin", "plugin": "goals", "goalRound": {"goalId": gid, "round": n, "revision": rev}}
    return msgspec.convert({"seq": 9, "at": T1, "turn": turn, "data": data}, UserMessage)


def reply(turn, input_tokens=100, output_tokens=20):
    """An assistant message of ``turn`` whose provider reported usage (None: no usage)."""
    data = {"text": "done"}
    if input_tokens is not None:
        data["usage"] = {"inputTokens": input_tokens, "outputTokens": output_tokens}
    return msgspec.convert({"seq": 9, "at": T1, "turn": turn, "data": data}, AssistantMessage)


def fold(*events, state=None):
    state = GoalState() if state is None else state
    for e in events:
        state = fold_goal(state, e)
    return state


def rejects(state, event) -> str:
    with pytest.raises(FoldError) as info:
        fold_goal(state, event)
    return info.value.reason


def active(max_rounds=3, rounds=0):
    """A state with goal g1 at revision 1, active, having started `rounds` rounds."""
    s = fold(change("create", max_rounds=max_rounds))
    for n in range(1, rounds + 1):
        s = fold(round_msg(n), state=s)
    return s


# ---- create -------------------------------------------------------------------------------


def test_g06_create_sets_snapshot_and_remembers_id():
    s = active()
    assert s.goal.id == "g1" and s.goal.revision == 1 and s.goal.phase == "active"
    assert s.rounds_started == 0 and s.created_at == T0 and s.updated_at == T1
    assert s.used_ids == frozenset({"g1"}) and s.cleared is None


@pytest.mark.parametrize("setup", ["active", "paused", "blocked"])
def test_g06_create_while_current_goal_not_complete_rejected(setup):
    s = active()
    if setup == "paused":
        s = fold(change("pause", rev=2, phase="paused"), state=s)
    if setup == "blocked":
        s = fold(change("block", rev=2, phase="blocked", blocked=("stuck", "why")), state=s)
    assert rejects(s, change("create", gid="g2")) == f"create while goal g1 is {setup}"


def test_g06_create_after_complete_and_after_clear_allowed():
    s = fold(change("complete", rev=2, phase="complete"), state=active())
    s = fold(change("create", gid="g2"), state=s)
    assert s.goal.id == "g2" and s.used_ids == {"g1", "g2"}
    s = fold(clear("g2", 1), change("create", gid="g3"), state=s)
    assert s.goal.id == "g3" and s.cleared is None


def test_g03_create_revision_must_be_1():
    assert rejects(GoalState(), change("create", rev=2)) == "revision 2 is not previous+1: expected 1"


def test_g06_create_must_be_active():
    assert rejects(GoalState(), change("create", phase="paused")) == "invalid transition create to paused"


def test_g05_create_rounds_started_must_be_0():
    assert rejects(GoalState(), change("create", rounds=1)) == "roundsStarted 1 disagrees with rounds counted 0"


def test_g09_max_rounds_at_least_1():
    assert rejects(GoalState(), change("create", max_rounds=0)) == "maxRounds 0 is below 1"


@pytest.mark.parametrize("how", ["complete", "clear"])
def test_g05_reused_id_rejected(how):
    s = active()
    s = fold(change("complete", rev=2, phase="complete") if how == "complete" else clear("g1", 1), state=s)
    assert rejects(s, change("create", gid="g1")) == "reused goal id g1"


# ---- snapshot ops -------------------------------------------------------------------------


def test_g06_edit_keeps_phase_and_bumps_revision():
    s = fold(change("edit", rev=2, max_rounds=9), state=active())
    assert s.goal.revision == 2 and s.goal.maxRounds == 9 and s.goal.phase == "active"
    assert s.created_at == T0


def test_g06_edit_may_not_change_phase():
    assert rejects(active(), change("edit", rev=2, phase="paused")) == "invalid transition edit from active to paused"


def test_g06_edit_max_rounds_below_rounds_started_rejected():
    s = active(rounds=2)
    assert rejects(s, change("edit", rev=2, rounds=2, max_rounds=1)) == "maxRounds 1 is below roundsStarted 2"
    assert fold(change("edit", rev=2, rounds=2, max_rounds=2), state=s).goal.maxRounds == 2


@pytest.mark.parametrize(
    "from_phase, op, to_phase, ok",
    [
        ("active", "pause", "paused", True),
        ("paused", "pause", "paused", False),
        ("blocked", "pause", "paused", False),
        ("paused", "resume", "active", True),
        ("blocked", "resume", "active", True),
        ("active", "resume", "active", False),
        ("active", "complete", "complete", True),
        ("paused", "complete", "complete", True),
        ("blocked", "complete", "complete", True),
        ("active", "block", "blocked", True),
        ("paused", "block", "blocked", True),
        ("blocked", "block", "blocked", False),
        ("paused", "edit", "paused", True),
        ("blocked", "edit", "blocked", True),
    ],
)
def test_g06_transition_table(from_phase, op, to_phase, ok):
    s = active()
    rev = 1
    if from_phase == "paused":
        s, rev = fold(change("pause", rev=2, phase="paused"), state=s), 2
    elif from_phase == "blocked":
        s, rev = fold(change("block", rev=2, phase="blocked", blocked=("stuck", "why")), state=s), 2
    blocked = ("stuck", "why") if to_phase == "blocked" else None
    event = change(op, rev=rev + 1, phase=to_phase, blocked=blocked)
    if ok:
        after = fold(event, state=s)
        assert after.goal.phase == to_phase and after.goal.revision == rev + 1
    else:
        assert rejects(s, event) == f"invalid transition {op} from {from_phase}"


def test_g06_op_must_lead_to_its_phase():
    assert rejects(active(), change("pause", rev=2, phase="complete")) == "invalid transition pause from active to complete"


def test_g06_resume_needs_rounds_left():
    s = active(max_rounds=2, rounds=2)
    s = fold(change("pause", rev=2, phase="paused", rounds=2, max_rounds=2), state=s)
    assert rejects(s, change("resume", rev=3, rounds=2, max_rounds=2)) == "resume with no rounds left (2 of 2)"
    # an edit that raises the cap makes room
    s = fold(change("edit", rev=3, phase="paused", rounds=2, max_rounds=4), state=s)
    assert fold(change("resume", rev=4, rounds=2, max_rounds=4), state=s).goal.phase == "active"


def test_g04_blocked_needs_reason():
    assert rejects(active(), change("block", rev=2, phase="blocked")) == "blocked goal without blockedReason"


def test_g04_reason_only_when_blocked():
    assert rejects(active(), change("edit", rev=2, blocked=("x", "y"))) == "blockedReason on a goal in phase active"


@pytest.mark.parametrize("code", ["Budget", "round_budget", "-x", "x-", "a--b", "", "ok code"])
def test_g04_reason_code_lowercase_kebab(code):
    reason = rejects(active(), change("block", rev=2, phase="blocked", blocked=(code, "msg")))
    assert reason == f"blockedReason code {code!r} is not lowercase-kebab-case"


@pytest.mark.parametrize("code", ["round-budget-exhausted", "stuck", "token-limit-2"])
def test_g04_reason_codes_accepted(code):
    s = fold(change("block", rev=2, phase="blocked", blocked=(code, "msg")), state=active())
    assert s.goal.blockedReason.code == code


@pytest.mark.parametrize("message", ["", "   "])
def test_g04_reason_message_non_empty(message):
    assert rejects(active(), change("block", rev=2, phase="blocked", blocked=("stuck", message))) == "blockedReason message is empty"


@pytest.mark.parametrize("op, phase", [("edit", "complete"), ("pause", "paused"), ("resume", "active"), ("complete", "complete")])
def test_g05_write_to_stopped_goal(op, phase):
    s = fold(change("complete", rev=2, phase="complete"), state=active())
    assert rejects(s, change(op, rev=3, phase=phase)) == "write to stopped goal g1"


def test_g05_write_to_cleared_goal():
    s = fold(clear("g1", 1), state=active())
    assert s.goal is None and s.cleared.id == "g1" and s.cleared.revision == 1
    assert rejects(s, change("edit", rev=2)) == "write to cleared goal g1"
    assert rejects(s, clear("g1", 1)) == "write to cleared goal g1"
    assert rejects(s, round_msg(1)) == "write to cleared goal g1"


def test_g05_write_with_no_goal():
    assert rejects(GoalState(), change("edit", rev=2)) == "edit of goal g1 but there is no current goal"
    assert rejects(GoalState(), clear("g1", 1)) == "clear of goal g1 but there is no current goal"
    assert rejects(GoalState(), round_msg(1)) == "round of goal g1 but there is no current goal"


def test_g05_write_to_other_goal():
    assert rejects(active(), change("edit", gid="g2", rev=2)) == "edit of goal g2 but the current goal is g1"


@pytest.mark.parametrize("rev", [1, 3, 0])
def test_g03_revision_must_be_previous_plus_one(rev):
    assert rejects(active(), change("edit", rev=rev)) == f"revision {rev} is not previous+1: expected 2"


def test_g02_created_at_may_not_change():
    assert rejects(active(), change("edit", rev=2, created=T1)) == f"createdAt changed from {T0} to {T1}"


def test_g05_rounds_started_must_match_counted():
    s = active(rounds=2)
    assert rejects(s, change("pause", rev=2, phase="paused", rounds=1)) == "roundsStarted 1 disagrees with rounds counted 2"
    assert rejects(s, change("pause", rev=2, phase="paused", rounds=3)) == "roundsStarted 3 disagrees with rounds counted 2"


# ---- clear --------------------------------------------------------------------------------


@pytest.mark.parametrize("phase_op", [None, ("pause", "paused"), ("complete", "complete")])
def test_g06_clear_any_current_goal(phase_op):
    s = active(rounds=1)
    rev = 1
    if phase_op:
        s, rev = fold(change(phase_op[0], rev=2, phase=phase_op[1], rounds=1), state=s), 2
    after = fold(clear("g1", rev), state=s)
    assert after.goal is None and after.rounds_started == 0 and after.cleared.revision == rev
    assert after.used_ids == {"g1"}


def test_g06_clear_must_name_current_ref():
    assert rejects(active(), clear("g2", 1)) == "clear of goal g2 but the current goal is g1"
    assert rejects(active(), clear("g1", 2)) == "clear names revision 2, the current revision is 1"


def test_g02_tombstone_and_snapshot_keys_do_not_mix():
    assert rejects(active(), clear("g1", 1, roundsStarted=0)) == "malformed goal/change: clear with snapshot keys roundsStarted"
    assert rejects(active(), change("edit", rev=2, clearedAt=T1)) == "malformed goal/change: edit with tombstone keys clearedAt"
    event = msgspec.convert({"seq": 9, "at": T1, "data": {"version": 1, "op": "clear", "clearedAt": T1}}, GoalChange)
    assert rejects(active(), event) == "malformed goal/change: clear needs cleared and clearedAt"
    event = msgspec.convert(
        {"seq": 9, "at": T1, "data": {"version": 1, "op": "edit", "goal": change("edit").data.goal, "updatedAt": T1}}, GoalChange
    )
    assert rejects(active(), event) == "malformed goal/change: edit without roundsStarted, createdAt"


# ---- rounds (G-8) -------------------------------------------------------------------------


def test_g08_rounds_advance_rounds_started_not_revision():
    s = active(rounds=2)
    assert s.rounds_started == 2 and s.goal.revision == 1
    s = fold(change("edit", rev=2, rounds=2, max_rounds=5), round_msg(3, rev=2), state=s)
    assert s.rounds_started == 3 and s.goal.revision == 2


@pytest.mark.parametrize("n", [0, -1])
def test_g05_non_positive_round(n):
    assert rejects(active(), round_msg(n)) == f"non-positive round {n}"


@pytest.mark.parametrize("n", [2, 5])
def test_g05_non_sequential_round(n):
    assert rejects(active(), round_msg(n)) == f"non-sequential round {n}: expected 1"


def test_g05_repeated_round_is_non_sequential():
    assert rejects(active(rounds=1), round_msg(1)) == "non-sequential round 1: expected 2"


def test_g05_rounds_over_the_cap():
    assert rejects(active(max_rounds=2, rounds=2), round_msg(3)) == "rounds over the cap: round 3 > maxRounds 2"


def test_g08_round_names_current_revision():
    assert rejects(active(), round_msg(1, rev=2)) == "round names revision 2, the current revision is 1"


def test_g08_round_needs_active_goal():
    s = fold(change("pause", rev=2, phase="paused"), state=active())
    assert rejects(s, round_msg(1, rev=2)) == "round of goal g1 in phase paused"
    s = fold(change("complete", rev=2, phase="complete"), state=active())
    assert rejects(s, round_msg(1, rev=2)) == "write to stopped goal g1"
    assert rejects(active(), round_msg(1, gid="g9")) == "round of goal g9 but the current goal is g1"


def test_g08_person_message_does_not_touch_goal_state():
    s = active()
    msg = msgspec.convert({"seq": 9, "at": T1, "data": {"text": "hi", "source": "user"}}, UserMessage)
    assert fold_goal(s, msg) is s


# ---- tokens (usage of round turns, token budget) -------------------------------------------


def test_usage_counts_only_in_turns_started_as_rounds_of_the_current_goal():
    s = active()
    s = fold(reply(1), state=s)  # turn 1 was never a round: active() writes no round yet
    assert s.tokens_used == 0
    s = fold(round_msg(1, turn=2), reply(2, 100, 20), reply(2, 30, 5), state=s)
    assert s.tokens_used == 155 and s.round_turn == 2
    s = fold(reply(3, 1000, 1000), reply(2, None), state=s)  # a person's turn; a reply without usage
    assert s.tokens_used == 155
    s = fold(round_msg(2, turn=4), reply(4, 1, 1), state=s)
    assert s.tokens_used == 157 and s.rounds_started == 2


def test_usage_without_a_turn_or_without_a_goal_counts_nothing():
    assert fold_goal(GoalState(), reply(1)) == GoalState()
    s = fold(round_msg(1, turn=2), state=active())
    no_turn = msgspec.convert({"seq": 9, "at": T1, "data": {"text": "x", "usage": {"inputTokens": 5, "outputTokens": 5}}},
                              AssistantMessage)
    assert fold_goal(s, no_turn) is s
    assert fold_goal(s, reply(2, None)) is s


def test_usage_of_the_round_turn_counts_after_a_pause_and_stops_with_a_clear():
    s = fold(round_msg(1, turn=2), reply(2, 10, 0), state=active())
    s = fold(change("pause", rev=2, phase="paused", rounds=1, tokensUsed=10), reply(2, 5, 0), state=s)
    assert s.tokens_used == 15  # the turn was started as a round of g1: all of it counts
    s = fold(clear("g1", 2), reply(2, 5, 0), state=s)
    assert s.tokens_used == 0 and s.goal is None
    s = fold(change("create", gid="g2", tokensUsed=0), reply(2, 5, 0), state=s)
    assert s.tokens_used == 0  # a new goal does not inherit the old goal's round turn


def test_snapshot_tokens_used_must_match_counted():
    s = fold(round_msg(1, turn=2), reply(2, 100, 20), state=active())
    assert rejects(s, change("pause", rev=2, phase="paused", rounds=1, tokensUsed=119)) == (
        "tokensUsed 119 disagrees with tokens counted 120")
    assert rejects(s, change("pause", rev=2, phase="paused", rounds=1)) == "tokensUsed absent but tokens counted 120"
    assert fold(change("pause", rev=2, phase="paused", rounds=1, tokensUsed=120), state=s).tokens_used == 120
    assert rejects(GoalState(), change("create", tokensUsed=3)) == "tokensUsed 3 disagrees with tokens counted 0"


def test_snapshots_without_tokens_used_stay_valid_while_nothing_was_counted():
    """Logs written before token budgets: no usage, no tokensUsed."""
    s = fold(change("create"), round_msg(1, turn=2), reply(2, None), change("pause", rev=2, phase="paused", rounds=1))
    assert s.goal.phase == "paused" and s.tokens_used == 0


def test_max_tokens_at_least_1():
    assert rejects(GoalState(), change("create", max_tokens=0)) == "maxTokens 0 is below 1"


def test_round_over_the_token_budget_rejected():
    s = fold(change("create", max_tokens=100, tokensUsed=0), round_msg(1, turn=2), reply(2, 90, 10))
    assert s.tokens_used == 100
    assert rejects(s, round_msg(2, turn=3)) == "tokens over the budget: round 2 starts with 100 of maxTokens 100 used"


def test_resume_needs_tokens_left():
    s = fold(change("create", max_tokens=100, tokensUsed=0), round_msg(1, turn=2), reply(2, 90, 20))
    s = fold(change("block", rev=2, phase="blocked", rounds=1, max_tokens=100, tokensUsed=110,
                    blocked=("token-budget-exhausted", "spent")), state=s)
    resume = change("resume", rev=3, rounds=1, max_tokens=100, tokensUsed=110)
    assert rejects(s, resume) == "resume with no tokens left (110 of 100)"
    s = fold(change("edit", rev=3, phase="blocked", rounds=1, max_tokens=200, tokensUsed=110,
                    blocked=("token-budget-exhausted", "spent")), state=s)
    assert fold(change("resume", rev=4, rounds=1, max_tokens=200, tokensUsed=110), state=s).goal.phase == "active"


def test_clear_may_not_carry_tokens_used():
    assert rejects(active(), clear("g1", 1, tokensUsed=0)) == "malformed goal/change: clear with snapshot keys tokensUsed"


def test_g23_only_a_complete_records_a_check():
    check = {"command": "pytest -q", "callId": "call-1"}
    done = fold(change("complete", rev=2, phase="complete", check=check), state=active())
    assert done.goal.phase == "complete"  # a complete with its check folds
    assert rejects(active(), change("pause", rev=2, phase="paused", check=check)) == (
        "malformed goal/change: pause with a check (only a complete records one)"
    )
    with pytest.raises(msgspec.ValidationError):  # a check is {command, callId}, nothing else
        change("complete", rev=2, phase="complete", check={**check, "exitCode": 0})
