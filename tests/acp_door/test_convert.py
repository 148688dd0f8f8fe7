"""The ACP door's pure parts, without a process: field paths, and the translation of committed events and live deltas into updates
(streamed text is never sent twice)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from acp.schema import SessionNotification
from acp.utils import serialize_params

from dshd.acp.errors import field_path
from dshd.acp.updates import UpdateTranslator
from dshd.agent.deltas import AgentDelta
from dshd.folds.events import EVENT_CLASSES

ROOT = Path("/work/project")


def event(kind: str, data: dict, seq: int = 2, turn: int | None = 1) -> dict:
    """A committed event as the hub hands it over (checked against the log's own types)."""
    raw = {"seq": seq, "at": "2026-01-01T00:00:00.000Z", "turn": turn, "type": kind, "data": data}
    return msgspec.to_builtins(msgspec.convert(raw, EVENT_CLASSES[kind]))


def wire(updates) -> list[dict]:
    """As the client receives them (and valid: SessionNotification checks each)."""
    return [serialize_params(SessionNotification(session_id="s", update=u))["update"] for u in updates]


@pytest.mark.parametrize(
    "loc, path",
    [((), "params"), (("cwd",), "cwd"), (("prompt", 0, "text"), "prompt[0].text"), (("ref", "revision"), "ref.revision")],
)
def test_field_paths(loc, path):
    assert field_path(loc) == path


def test_streamed_text_is_not_sent_again_when_the_reply_commits():
    t = UpdateTranslator(ROOT, live=True)
    assert t.event(event("request/header", {"step": 1, "planActive": False, "sections": [], "tools": []})) == []
    chunks = wire(t.delta(AgentDelta(turn=1, step=1, kind="text", text="Hel")) + t.delta(AgentDelta(turn=1, step=1, kind="text", text="lo")))
    assert [c["content"]["text"] for c in chunks] == ["Hel", "lo"]
    # The committed reply adds only what the deltas had not carried.
    assert [c["content"]["text"] for c in wire(t.event(event("assistant/message", {"text": "Hello!"})))] == ["!"]
    # A reply whose text no delta carried is sent whole.
    t.event(event("request/header", {"step": 2, "planActive": False, "sections": [], "tools": []}))
    assert [c["content"]["text"] for c in wire(t.event(event("assistant/message", {"text": "Whole"})))] == ["Whole"]


def test_a_tool_call_announced_by_its_arguments_is_completed_by_its_event():
    t = UpdateTranslator(ROOT, live=True)
    [start] = wire(t.delta(AgentDelta(turn=1, step=1, kind="tool-arguments", text='{"pa', call_id="c1", name="edit_file")))
    assert (start["sessionUpdate"], start["toolCallId"], start["kind"], start["status"]) == ("tool_call", "c1", "edit", "pending")
    assert t.delta(AgentDelta(turn=1, step=1, kind="tool-arguments", text='th"', call_id="c1", name="edit_file")) == []
    args = {"path": "src/a.py", "oldText": "x = 1", "newText": "x = 2"}
    [details] = wire(t.event(event("tool/call", {"callId": "c1", "name": "edit_file", "arguments": args})))
    assert details["sessionUpdate"] == "tool_call_update" and details["title"] == "Edit src/a.py"
    assert details["locations"] == [{"path": "/work/project/src/a.py"}]
    assert details["content"] == [{"type": "diff", "path": "/work/project/src/a.py", "oldText": "x = 1", "newText": "x = 2"}]
    [done] = wire(t.event(event("tool/result", {"callId": "c1", "ok": True, "content": "--- a/src/a.py\n+++ b/src/a.py"})))
    assert done["status"] == "completed" and done["content"][0]["type"] == "diff"


@pytest.mark.parametrize(
    "name, arguments, kind, title",
    [
        ("read_file", {"path": "README.md", "offset": 10}, "read", "Read README.md"),
        ("list_files", {"path": "src", "pattern": "*.py"}, "search", "List files in src matching *.py"),
        ("search", {"pattern": "TODO", "path": "src"}, "search", "Search for TODO in src"),
        ("write_file", {"path": "new.txt", "content": "hi"}, "edit", "Write new.txt"),
        ("run_command", {"command": "make test"}, "execute", "Run `make test`"),
        ("exit_plan_mode", {"plan": "# Plan: x\n1. y"}, "switch_mode", "Plan: x"),
        ("goal_block", {"code": "stuck", "message": "m"}, "other", "Report the goal blocked (stuck)"),
        ("mystery_tool", {"path": 5}, "other", "mystery_tool path=5"),
    ],
)
def test_tool_calls_have_kinds_titles_and_locations(name, arguments, kind, title):
    t = UpdateTranslator(ROOT, live=False)
    [call] = wire(t.event(event("tool/call", {"callId": "c9", "name": name, "arguments": arguments})))
    assert (call["kind"], call["title"], call["rawInput"]) == (kind, title, arguments)
    if name == "read_file":
        assert call["locations"] == [{"path": "/work/project/README.md", "line": 10}]
    [failed] = wire(t.event(event("tool/result", {"callId": "c9", "ok": False, "content": "no such file"})))
    assert failed["status"] == "failed"
    assert failed["content"] == [{"type": "content", "content": {"type": "text", "text": "no such file"}}]


def test_live_skips_the_persons_own_words_replay_does_not():
    message = event("user/message", {"text": "hi", "source": "user"})
    assert UpdateTranslator(ROOT, live=True).event(message) == []
    assert wire(UpdateTranslator(ROOT, live=False).event(message))[0]["content"]["text"] == "hi"
    round_message = event(
        "user/message",
        {"text": "Continue", "source": "plugin", "plugin": "goals", "goalRound": {"goalId": "g-1", "round": 2, "revision": 3}},
    )
    [told] = wire(UpdateTranslator(ROOT, live=True).event(round_message))
    assert told["_meta"]["dsh"] == {"source": "plugin", "plugin": "goals", "goalRound": {"goalId": "g-1", "round": 2, "revision": 3}}


def test_usage_says_how_full_the_context_is_when_the_window_is_known():
    reply = {"text": "done", "usage": {"inputTokens": 1200, "outputTokens": 80}}
    with_window = UpdateTranslator(ROOT, live=False, context_window=8000)
    text, usage = wire(with_window.event({"seq": 5, "type": "assistant/message", "data": reply}))
    assert text["content"]["text"] == "done"
    assert usage == {
        "sessionUpdate": "usage_update", "used": 1280, "size": 8000,
        "_meta": {"dsh": {"inputTokens": 1200, "outputTokens": 80}},
    }  # fmt: skip
    # Cached input and an estimate are said in _meta.dsh (ACP's usage_update has no field for them).
    estimated = {"text": "more", "usage": {"inputTokens": 900, "cachedInputTokens": 700, "outputTokens": 9, "estimated": True}}
    [_, told] = wire(with_window.event({"seq": 7, "type": "assistant/message", "data": estimated}))
    assert told["used"] == 909
    assert told["_meta"]["dsh"] == {"inputTokens": 900, "cachedInputTokens": 700, "outputTokens": 9, "estimated": True}
    # Without a window there is no size to report; without usage, nothing to report.
    assert len(UpdateTranslator(ROOT, live=False).event({"seq": 5, "type": "assistant/message", "data": reply})) == 1
    assert len(with_window.event({"seq": 6, "type": "assistant/message", "data": {"text": "x"}})) == 1


def test_a_reply_that_writes_a_tool_call_as_text_gets_a_note_after_it():
    translator = UpdateTranslator(ROOT, live=True)
    header = {"seq": 4, "type": "request/header", "turn": 1, "data": {"step": 1, "tools": ["read_file", "write_file"]}}
    assert translator.event(header) == []
    written = '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```'
    reply, note = wire(translator.event({"seq": 5, "type": "assistant/message", "turn": 1, "data": {"text": written}}))
    assert reply["content"]["text"] == written  # shown as the model wrote it
    assert note["messageId"] == reply["messageId"] == "assistant-1.1"
    assert "call of the read_file tool written as text" in note["content"]["text"]
    # The control: JSON that names no tool the request offered is only a reply.
    other = '{"name": "retries", "arguments": {"max": 3}}'
    assert len(translator.event({"seq": 6, "type": "assistant/message", "turn": 1, "data": {"text": other}})) == 1
