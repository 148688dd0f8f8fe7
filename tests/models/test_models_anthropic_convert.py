"""The Anthropic Messages mapping (no network: events shaped like the API's stream)."""

from __future__ import annotations

import json

import pytest
from loopback_models import Call, Reply, anthropic_events

from dshd.models import Message, ModelError, ModelRequest, ToolCallRequest, ToolSpec, Usage, collect
from dshd.models.anthropic_convert import events_from_stream, request_body


async def aiter(items):
    for item in items:
        yield item


def events_of(reply: Reply) -> list[dict]:
    out = []
    for block in anthropic_events(reply):
        data = next(line for line in block.splitlines() if line.startswith("data: "))
        out.append(json.loads(data[len("data: ") :]))
    return out


async def test_model_anthropic_stream_maps_to_one_reply():
    calls = [Call("read_file", {"path": "a.py"}), Call("grep", {"pattern": "x"})]
    reply = await collect(events_from_stream(aiter(events_of(Reply("Let me look.", calls, piece=4)))))
    assert reply.text == "Let me look."
    assert [(c.call_id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_0", "read_file", {"path": "a.py"}),
        ("toolu_1", "grep", {"pattern": "x"}),
    ]
    assert reply.stop_reason == "tool-calls" and reply.usage == Usage(12, 5, 0)


async def test_model_anthropic_usage_counts_cached_input_and_the_last_output_figure():
    # The API's input_tokens leaves out the cache's reads and writes: the prompt is all three.
    events = events_of(Reply("hi", usage=(115, 5), cached=100, cache_write=3))
    assert events[0]["message"]["usage"]["input_tokens"] == 12
    reply = await collect(events_from_stream(aiter(events)))
    assert reply.usage == Usage(115, 5, 100) and reply.stop_reason == "end-turn"


async def test_model_anthropic_usage_from_message_start_alone():
    """A server that sends the counts only in message_start (message_delta: output only,
    as the API did before it repeated them)."""
    events = events_of(Reply("hi", usage=(115, 5), cached=100, cache_write=3))
    delta = next(e for e in events if e["type"] == "message_delta")
    delta["usage"] = {"output_tokens": 5}
    reply = await collect(events_from_stream(aiter(events)))
    assert reply.usage == Usage(115, 5, 100)


@pytest.mark.parametrize(
    "mutate, kind",
    [
        (lambda ev: ev[:-1], "bad-response"),  # no message_stop: the stream was cut
        (lambda ev: [e for e in ev if e["type"] != "message_delta"], "bad-response"),  # no stop_reason
        (lambda ev: ev[:2] + [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}], "server"),
        (lambda ev: ev[:1] + [{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "", "input": {}}}] + ev[1:], "bad-response"),
    ],
    ids=["cut", "no-stop-reason", "error-event", "tool-without-name"],
)
async def test_model_anthropic_broken_streams(mutate, kind):
    with pytest.raises(ModelError) as caught:
        await collect(events_from_stream(aiter(mutate(events_of(Reply("hello"))))))
    assert caught.value.kind == kind


async def test_model_anthropic_arguments_that_are_not_an_object_are_bad_response():
    with pytest.raises(ModelError) as caught:
        await collect(events_from_stream(aiter(events_of(Reply("", [Call("read_file", "[1]")])))))
    assert caught.value.kind == "bad-response"


def test_model_anthropic_request_body_maps_transcript_and_tools():
    request = ModelRequest(
        "system text",
        (
            Message("user", "hi"),
            Message("assistant", "Reading.", (ToolCallRequest("t1", "read", {"a": 1}), ToolCallRequest("t2", "read", {"a": 2}))),
            Message("tool", "one", call_id="t1"),
            Message("tool", "nope", call_id="t2", ok=False),
            Message("user", "and then?"),
            Message("assistant", ""),  # an empty reply is left out
            Message("user", "hello?"),
        ),
        (ToolSpec("read", "Read.", {"type": "object"}),),
    )
    body = request_body(request, "claude-x", max_tokens=1000)
    assert body["system"] == "system text" and body["max_tokens"] == 1000 and body["stream"] is True
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {"a": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "nope", "is_error": True},
                {"type": "text", "text": "and then?"},
                {"type": "text", "text": "hello?"},
            ],
        },
    ]
    assert body["tools"] == [{"name": "read", "description": "Read.", "input_schema": {"type": "object"}}]
    assert request_body(ModelRequest("", (), ()), "m")["max_tokens"] == 8192 and "system" not in request_body(ModelRequest("", (), ()), "m")
