"""A reply that looks like a tool call written as text (dshd.api.written_calls) and the
chat's ``notice`` item after it (dshd.api.chat): the shapes small local models write, and
replies that only show some JSON, which get no notice."""

from __future__ import annotations

import pytest

from dshd.api.chat import NoticeItem, project
from dshd.api.written_calls import written_tool_call

OFFERED = {"read_file", "write_file", "run_command", "list_files"}


@pytest.mark.parametrize(
    "text, tool",
    [
        ('```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```', "read_file"),
        ('{"name": "run_command", "arguments": {"command": "ls"}}', "run_command"),
        ('I will look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>', "read_file"),
        ('{"tool": "write_file", "parameters": {"path": "b", "content": "x"}}', "write_file"),
        ('{"type": "function", "function": {"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}}', "read_file"),
        ('[{"name": "list_files", "arguments": {}}]', "list_files"),
        ('Text first { not json } then {"name": "read_file", "args": {"path": "x"}}', "read_file"),
    ],
    ids=["fenced", "bare", "tool_call-tags", "tool-parameters", "openai-function", "a-list", "after-a-stray-brace"],
)
def test_a_call_written_as_text_names_its_tool(text, tool):
    assert written_tool_call(text, OFFERED) == tool


@pytest.mark.parametrize(
    "text",
    [
        "Done: the parser handles empty input now.",
        '{"name": "retries", "arguments": {"max": 3}}',  # not a tool it was offered
        '{"name": "read_file"',  # not a whole object
        '{"path": "a.py", "content": "x"}',  # arguments alone name no tool
        '{"name": "read_file", "note": 3}',  # a name, but no arguments beside it
    ],
    ids=["prose", "unknown-name", "cut-json", "no-name", "no-arguments"],
)
def test_other_replies_are_no_call(text):
    assert written_tool_call(text, OFFERED) is None
    # The control: the same check finds a real one.
    assert written_tool_call('{"name": "read_file", "arguments": {}}', OFFERED) == "read_file"


def test_a_long_reply_is_looked_at_only_so_far():
    text = "{}" * 40_000 + '{"name": "read_file", "arguments": {}}'
    assert written_tool_call(text, OFFERED) is None
    assert written_tool_call('{"name": "read_file", "arguments": {}}' + "{}" * 40_000, OFFERED) == "read_file"


def _events(reply: str, tools: list[str]) -> list[dict]:
    at = "2026-12-01T21:00:00.000Z"
    return [
        {"seq": 1, "type": "session/start", "at": at, "data": {"sessionId": "s-01m8mc6qcsxwzr191meb9vsa1k", "formatVersion": 1}},
        {"seq": 2, "type": "turn/open", "at": at, "turn": 1, "data": {"turn": 1, "cause": "prompt"}},
        {"seq": 3, "type": "user/message", "at": at, "turn": 1, "data": {"text": "what is in a.py?", "source": "user"}},
        {"seq": 4, "type": "request/header", "at": at, "turn": 1, "data": {"step": 1, "planActive": False, "sections": [], "tools": tools}},
        {"seq": 5, "type": "assistant/message", "at": at, "turn": 1, "data": {"text": reply}},
        {"seq": 6, "type": "turn/close", "at": at, "turn": 1, "data": {"turn": 1, "stopReason": "end-turn"}},
    ]


def test_the_chat_says_so_after_the_reply_naming_the_tool():
    reply = '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```'
    items = project(_events(reply, ["read_file", "write_file"]))
    kinds = [item.kind for item in items]
    assert kinds[kinds.index("assistant-message") + 1] == "notice"
    [notice] = [item for item in items if isinstance(item, NoticeItem)]
    assert (notice.about, notice.code, notice.tool) == ("assistant-1.1", "written-tool-call", "read_file")
    assert "read_file" in notice.text and "nothing ran" in notice.text
    # A tool this request did not offer is not a call the model could make: no notice.
    assert not [item for item in project(_events(reply, ["write_file"])) if isinstance(item, NoticeItem)]
