"""`dshd log verify` and `log show` with G-25's usage: cached input tokens and estimated
counts (a provider that reported none) are said, never passed off as reported."""

from __future__ import annotations

import json

from dshd.services.store import SessionStore

from .test_cli_log import run


def test_log_show_and_verify_say_cached_and_estimated(tmp_path):
    from log.test_log_sample import Session, snapshot

    with SessionStore.create(tmp_path, "usage") as store:
        s = Session(store)
        s.goal(snapshot("create", "g1", 1, "active", tokens=0, max_tokens=5000))
        s.turn("round 1", cause="continuation", goal_round={"goalId": "g1", "round": 1, "revision": 1})
        store.commit("turn/open", {"turn": 2, "cause": "continuation"}, turn=2)
        round_2 = {"goalId": "g1", "round": 2, "revision": 1}
        store.commit("user/message", {"text": "go on", "source": "plugin", "plugin": "goals", "goalRound": round_2}, turn=2)
        store.commit("assistant/message", {"text": "cached", "usage": {"inputTokens": 900, "outputTokens": 10, "cachedInputTokens": 800}}, turn=2)
        store.commit("assistant/message", {"text": "guessed", "usage": {"inputTokens": 300, "outputTokens": 40, "estimated": True}}, turn=2)
        store.commit("turn/close", {"turn": 2, "stopReason": "end-turn"}, turn=2)
    path = tmp_path / "usage" / "log.jsonl"
    shown = run("log", "show", str(path))
    assert shown.returncode == 0
    assert "[assistant] cached  (900 in, 800 of them cached + 10 out tokens)" in shown.stdout
    assert "[assistant] guessed  (~300 in + ~40 out tokens)" in shown.stdout
    verified = run("log", "verify", str(path), "--json")
    goal = json.loads(verified.stdout)["goal"]
    assert verified.returncode == 0 and (goal["tokensUsed"], goal["tokensEstimated"]) == (1250, True)
    assert "2/3 rounds, ~1250/5000 tokens" in run("log", "verify", str(path)).stdout
