"""G-24: what changes between rounds (ModelRequest.volatile) goes after the history in
both providers' request bodies, and never changes the bytes before it."""

from __future__ import annotations

import json

from dshd.models import Message, ModelRequest, ToolCallRequest, ToolSpec
from dshd.models import anthropic_convert, openai_convert

TOOLS = (ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)
ROUND_1 = (
    Message("user", "Work on the goal."),
    Message("assistant", "Reading.", tool_calls=(ToolCallRequest("c1", "read_file", {"path": "a.py"}),)),
    Message("tool", "print(1)", call_id="c1"),
)
ROUND_2 = ROUND_1 + (Message("assistant", "Done with round 1."), Message("user", "Continue the goal."))


def status(round_number: int) -> str:
    return f"Current goal g-1 (revision 1): ship it\nPhase: active. Rounds: {round_number} of 5 started."


def dumped(items) -> list[str]:
    return [json.dumps(item, sort_keys=True) for item in items]


def test_openai_volatile_is_a_last_system_message_after_the_history():
    plain = openai_convert.request_body(ModelRequest("stable system", ROUND_1, TOOLS), "m")
    body = openai_convert.request_body(ModelRequest("stable system", ROUND_1, TOOLS, volatile=status(1)), "m")
    assert body["messages"][-1] == {"role": "system", "content": status(1)}
    assert body["messages"][0] == {"role": "system", "content": "stable system"}
    # Everything before it is byte for byte the request without it (control: it is there).
    assert dumped(body["messages"][:-1]) == dumped(plain["messages"]) and len(body["messages"]) == len(plain["messages"]) + 1
    assert body["tools"] == plain["tools"]


def test_openai_round_two_starts_with_round_one_minus_its_status():
    first = openai_convert.request_body(ModelRequest("stable system", ROUND_1, TOOLS, volatile=status(1)), "m")
    second = openai_convert.request_body(ModelRequest("stable system", ROUND_2, TOOLS, volatile=status(2)), "m")
    kept = first["messages"][:-1]
    assert dumped(second["messages"][: len(kept)]) == dumped(kept)
    assert second["messages"][-1]["content"] == status(2) != first["messages"][-1]["content"]
    assert status(1) not in json.dumps(second)  # the old status is not left in the history


def test_anthropic_volatile_is_a_text_block_after_the_tool_results_of_the_last_user_turn():
    plain = anthropic_convert.request_body(ModelRequest("stable system", ROUND_1, TOOLS), "m")
    body = anthropic_convert.request_body(ModelRequest("stable system", ROUND_1, TOOLS, volatile=status(1)), "m")
    assert body["system"] == "stable system" == plain["system"]
    last = body["messages"][-1]
    assert last["role"] == "user" and len(body["messages"]) == len(plain["messages"])
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
    assert last["content"][-1] == {"type": "text", "text": status(1)}
    assert dumped(body["messages"][:-1]) == dumped(plain["messages"][:-1])
    assert dumped(last["content"][:-1]) == dumped(plain["messages"][-1]["content"])


def test_anthropic_round_two_starts_with_round_one_minus_its_status():
    first = anthropic_convert.request_body(ModelRequest("s", ROUND_1, TOOLS, volatile=status(1)), "m")
    second = anthropic_convert.request_body(ModelRequest("s", ROUND_2, TOOLS, volatile=status(2)), "m")
    first_blocks = [b for m in first["messages"] for b in m["content"]][:-1]
    second_blocks = [b for m in second["messages"] for b in m["content"]]
    assert dumped(second_blocks[: len(first_blocks)]) == dumped(first_blocks)
    assert second_blocks[-1] == {"type": "text", "text": status(2)}
    assert status(1) not in json.dumps(second)


def test_anthropic_volatile_after_an_assistant_message_opens_a_user_turn():
    body = anthropic_convert.request_body(ModelRequest("s", (Message("user", "hi"), Message("assistant", "hello")), (), volatile="v"), "m")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "v"}]


def test_no_volatile_no_extra_message():
    request = ModelRequest("s", ROUND_1, TOOLS)
    assert [m["role"] for m in openai_convert.request_body(request, "m")["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in anthropic_convert.request_body(request, "m")["messages"]] == ["user", "assistant", "user"]
