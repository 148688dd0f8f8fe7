"""G-25 in the fold: usage marked ``estimated`` counts toward the goal's tokens like any
other, and marks them estimated; the hot replay (fold_file) and the reference (apply,
fold_lines) agree on it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from dshd.folds import fold_goal
from dshd.folds.replay import fold_file, fold_lines

from .test_fold_goal import active, change, clear, fold, reply, round_msg

AT = "2026-11-29T18:00:00.000Z"


def estimated_reply(turn, input_tokens=100, output_tokens=20):
    event = reply(turn, input_tokens, output_tokens)
    usage = msgspec.structs.replace(event.data.usage, estimated=True)
    return msgspec.structs.replace(event, data=msgspec.structs.replace(event.data, usage=usage))


def test_estimated_usage_counts_and_marks_the_goals_tokens():
    s = fold(round_msg(1, turn=4), state=active())
    s = fold_goal(s, reply(4))
    assert (s.tokens_used, s.tokens_estimated) == (120, False)  # control: reported usage
    s = fold_goal(s, estimated_reply(4, 50, 10))
    assert (s.tokens_used, s.tokens_estimated) == (180, True)
    s = fold_goal(s, reply(4))
    assert (s.tokens_used, s.tokens_estimated) == (300, True)  # once estimated, it stays so
    # An edit keeps the count and the mark; a clear or a new goal starts over.
    edited = fold_goal(s, change("edit", rev=2, rounds=1, tokensUsed=300))
    assert (edited.tokens_used, edited.tokens_estimated) == (300, True)
    cleared = fold_goal(s, clear())
    assert (cleared.tokens_used, cleared.tokens_estimated) == (0, False)


def test_estimated_usage_outside_a_round_does_not_mark():
    s = fold_goal(active(), estimated_reply(7))
    assert (s.tokens_used, s.tokens_estimated) == (0, False)


def _log(tmp_path: Path, estimated_at: set[int]) -> tuple[Path, list[bytes]]:
    lines = []

    def add(type_, data, turn=None):
        event = {"type": type_, "seq": len(lines) + 1, "at": AT, "data": data}
        if turn is not None:
            event["turn"] = turn
        lines.append(json.dumps(event).encode() + b"\n")

    add("session/start", {"sessionId": "s1", "formatVersion": 1})
    goal = {"id": "g1", "revision": 1, "objective": "ship it", "phase": "active", "maxRounds": 9}
    add("goal/change", {"version": 1, "op": "create", "goal": goal, "roundsStarted": 0, "tokensUsed": 0, "createdAt": AT, "updatedAt": AT})
    for turn in (1, 2, 3):
        add("turn/open", {"turn": turn, "cause": "continuation"}, turn)
        add("user/message", {"text": "go on", "source": "plugin", "plugin": "goals",
                             "goalRound": {"goalId": "g1", "round": turn, "revision": 1}}, turn)  # fmt: skip
        for step in (1, 2):
            usage = {"inputTokens": 100, "outputTokens": 10}
            if (turn, step) in estimated_at:
                usage["estimated"] = True
            add("assistant/message", {"text": "ok", "usage": usage}, turn)
        add("turn/close", {"turn": turn, "stopReason": "end-turn"}, turn)
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(lines))
    return path, lines


def test_replay_fast_path_and_reference_agree_on_estimated(tmp_path):
    for estimated_at, expected in (((), False), ({(2, 2)}, True), ({(1, 1), (3, 2)}, True)):
        path, lines = _log(tmp_path, set(estimated_at))
        fast, count, _ = fold_file(None, path, 0, 1, path.stat().st_size)
        reference, *_ = fold_lines(None, ((n + 1, 0, line) for n, line in enumerate(lines)))
        assert count == len(lines)
        assert fast.goal == reference.goal
        assert (fast.goal.tokens_used, fast.goal.tokens_estimated) == (660, expected)
