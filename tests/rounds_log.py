"""A session log with a goal's rounds, written through the real store's copy path (the
fold checks every event) so that a test sets every ``at``: for the rounds fold, the
daemon's answer and ``dshd log show --goal``."""

from __future__ import annotations

from pathlib import Path

import msgspec

from dshd.folds import events as ev
from dshd.folds.rounds import goal_rounds, goal_rounds_of_lines
from dshd.services.store import SessionStore

SESSION = "s-rounds"


def at(seconds: float) -> str:
    """A log time ``seconds`` after 18:00:00.000 (milliseconds kept)."""
    ms = round(seconds * 1000)
    return f"2026-11-29T18:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"


class Log:
    """Events written through the real store's copy path (the fold checks each), so the
    test sets every ``at``."""

    def __init__(self, root: Path) -> None:
        self.store = SessionStore.create(root, SESSION)
        self.turn = 0
        self.goal: dict | None = None
        self.rounds = 0
        self.tokens = 0

    def add(self, type_: str, data: dict, t: float, turn: int | None = None) -> None:
        event = msgspec.convert({"type": type_, "seq": 1, "at": at(t), "turn": turn, "data": data}, ev.Event)
        self.store.copy_events([event])

    def goal_change(self, op: str, t: float, gid: str = "g1", max_rounds: int = 9) -> None:
        if op == "create":
            self.goal = {"id": gid, "revision": 1, "objective": "ship it", "phase": "active", "maxRounds": max_rounds}
            self.rounds = self.tokens = 0
            self.created = at(t)
        elif op == "clear":
            data = {"version": 1, "op": "clear", "cleared": {"id": self.goal["id"], "revision": self.goal["revision"]},
                    "clearedAt": at(t)}  # fmt: skip
            self.add("goal/change", data, t, self.turn if self.open else None)
            self.goal = None
            return
        else:
            phase = {"pause": "paused", "complete": "complete", "block": "blocked", "resume": "active"}.get(op)
            self.goal = {**self.goal, "revision": self.goal["revision"] + 1, "phase": phase or self.goal["phase"]}
        data = {"version": 1, "op": op, "goal": self.goal, "roundsStarted": self.rounds, "tokensUsed": self.tokens,
                "createdAt": self.created, "updatedAt": at(t)}  # fmt: skip
        self.add("goal/change", data, t)

    open = False

    def round(self, t: float) -> int:
        self.turn += 1
        self.rounds += 1
        self.add("turn/open", {"turn": self.turn, "cause": "continuation"}, t, self.turn)
        goal_round = {"goalId": self.goal["id"], "round": self.rounds, "revision": self.goal["revision"]}
        data = {"text": "continue", "source": "plugin", "plugin": "goals", "goalRound": goal_round}
        self.add("user/message", data, t + 0.005, self.turn)
        self.open = True
        return self.turn

    def prompt(self, t: float) -> int:
        self.turn += 1
        self.add("turn/open", {"turn": self.turn, "cause": "prompt"}, t, self.turn)
        self.add("user/message", {"text": "hi", "source": "user"}, t, self.turn)
        self.open = True
        return self.turn

    def reply(self, t: float, inp: int, out: int, counts: bool = True) -> None:
        self.add("assistant/message", {"text": "ok", "usage": {"inputTokens": inp, "outputTokens": out}}, t, self.turn)
        if counts:
            self.tokens += inp + out

    def call(self, t: float, call_id: str, name: str = "edit_file", arguments: dict | None = None) -> None:
        self.add("tool/call", {"callId": call_id, "name": name, "arguments": arguments or {}}, t, self.turn)

    def decision(self, t: float, call_id: str, by: str = "person", outcome: str = "allow-once", tool: str = "edit_file") -> None:
        if by == "fail-closed":
            outcome = "reject"
        self.add("permission/decision", {"callId": call_id, "tool": tool, "outcome": outcome, "by": by}, t, self.turn)

    def result(self, t: float, call_id: str, review: dict | None = None) -> None:
        data = {"callId": call_id, "ok": True, "content": "done"}
        if review is not None:
            data["review"] = review
        self.add("tool/result", data, t, self.turn)

    def close(self, t: float, stop: str = "end-turn") -> None:
        self.add("turn/close", {"turn": self.turn, "stopReason": stop}, t, self.turn)
        self.open = False

    def rounds_now(self):
        """The fold over the typed events; the same fold over the raw lines (what the
        daemon and the command read, decoding only what it needs) must agree."""
        typed = goal_rounds(self.store.events())
        lines: list[bytes] = []
        self.store.each_line(lines.append)
        assert goal_rounds_of_lines(lines) == typed
        return typed
