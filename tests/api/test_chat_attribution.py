"""Who did what in the chat items (dshd.api.chat, dshd.api.words): one log, projected for
the client that made each act ("You") and for another client (its name); a log that names
no client reads as before; a hostile name is escaped and cut; a name logged for the model's
acts is never said."""

from __future__ import annotations

from dshd.api import words
from dshd.api.chat import project

A, B = "Neovim (pid 4242)", "VS Code — ws-a"


def log() -> list[dict]:
    at = "2026-12-07T18:00:00.000Z"
    events = [
        ("session/start", None, {"sessionId": "s-1"}),
        ("turn/open", 1, {"turn": 1, "cause": "prompt"}),
        ("user/message", 1, {"text": "edit it", "source": "user", "client": A}),
        ("request/header", 1, {"step": 1, "sections": [], "tools": ["edit_file"]}),
        ("tool/call", 1, {"callId": "c1", "name": "edit_file", "arguments": {"path": "a.py"}}),
        ("permission/decision", 1, {"callId": "c1", "tool": "edit_file", "outcome": "allow-once", "by": "person", "client": B}),
        ("tool/result", 1, {"callId": "c1", "ok": True, "content": "done"}),
        ("turn/close", 1, {"turn": 1, "stopReason": "cancelled", "client": B}),
        ("goal/change", None, {"version": 1, "op": "create", "goal": {"id": "g1", "revision": 1, "objective": "ship", "phase": "active", "maxRounds": 3},
                               "roundsStarted": 0, "tokensUsed": 0, "createdAt": at, "updatedAt": at, "client": A}),
    ]
    out = []
    for seq, (kind, turn, data) in enumerate(events, 1):
        event = {"type": kind, "seq": seq, "at": at, "data": data}
        if turn is not None:
            event["turn"] = turn
        out.append(event)
    return out


def by_kind(items) -> dict:
    return {item.kind: item for item in items}


def test_each_client_reads_you_for_its_own_acts_and_the_other_name_for_the_rest():
    as_a, as_b = by_kind(project(log(), me=A)), by_kind(project(log(), me=B))
    assert (as_a["user-message"].label, as_a["user-message"].from_client) == ("You", None)
    assert (as_b["user-message"].label, as_b["user-message"].from_client) == (f"From {A}", A)
    assert as_a["permission"].text == f"edit_file allowed once, approved in {B}" and as_a["permission"].from_client == B
    assert as_b["permission"].text == "You allowed edit_file once" and as_b["permission"].from_client is None
    assert as_a["turn-end"].text == f"Turn 1 stopped in {B}" and as_b["turn-end"].text == "Turn 1 stopped"
    assert as_b["goal"].text.endswith(f"— from {A}") and "from" not in as_a["goal"].text


def test_a_log_without_clients_reads_as_before():
    events = log()
    for event in events:
        event["data"].pop("client", None)
    items = by_kind(project(events, me=A))
    assert items["user-message"].label == "You" and items["permission"].text == "You allowed edit_file once"
    assert items["turn-end"].text == "Turn 1 stopped" and items["goal"].from_client is None


def test_a_hostile_name_is_escaped_and_cut():
    name = "Evil\x1b[2J\u202e" + "x" * 200
    shown = words.other_client(name, A)
    assert "\x1b" not in shown and "\u202e" not in shown and len(shown) <= words.CLIENT_NAME_WIDTH
    assert words.other_client(A, A) is None and words.other_client("  ", A) is None and words.other_client(7, A) is None


def test_a_client_on_an_act_that_is_nobodys_is_not_said():
    events = log()
    events[7]["data"] = {"turn": 1, "stopReason": "end-turn", "client": B}  # not a cancel: nobody stopped it
    assert by_kind(project(events, me=A))["turn-end"].text == "Turn 1 finished"


def test_the_late_answer_names_the_winner():
    assert words.late_answer_text("approval", B, "allow-once") == (
        f"Your answer to the approval changed nothing: answered in {B} first (allowed once).")
    assert words.late_answer_text("plan review", None, None).endswith("the question had already closed.")
