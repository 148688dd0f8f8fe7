"""The OpenAI-compatible mapping fits the model interface (no network: chunks shaped like
the API's streaming chat.completion.chunk objects)."""

from __future__ import annotations

import json

import pytest

from dshd.models import Message, ModelError, ModelRequest, ToolCallRequest, ToolSpec, Usage, collect
from dshd.models.openai_convert import events_from_chunks, request_body, sse_data

SSE = """\
data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"check."},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"goal_block","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"code\\": \\"dep"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"-conflict\\", \\"message\\": \\"pin\\"}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":17,"total_tokens":137}}

data: [DONE]
"""


async def aiter(items):
    for item in items:
        yield item


async def test_model_openai_stream_maps_to_one_reply():
    reply = await collect(events_from_chunks(aiter(list(sse_data(SSE.splitlines())))))
    assert reply.text == "Let me check."
    (call,) = reply.tool_calls
    assert (call.call_id, call.name, call.arguments) == ("call_1", "goal_block", {"code": "dep-conflict", "message": "pin"})
    assert reply.stop_reason == "tool-calls" and reply.usage == Usage(120, 17)


@pytest.mark.parametrize(
    "chunks",
    [
        [{"choices": [{"delta": {"content": "cut off"}, "finish_reason": None}]}],  # no finish
        [{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}],  # no id/name
        [{"error": {"message": "overloaded"}}],
    ],
)
async def test_model_openai_broken_streams_are_model_errors(chunks):
    with pytest.raises(ModelError):
        await collect(events_from_chunks(aiter(chunks)))


def test_model_openai_bad_sse_payload_is_a_model_error():
    with pytest.raises(ModelError):
        list(sse_data(["data: {not json"]))


def test_model_openai_request_body_maps_transcript_and_tools():
    request = ModelRequest(
        "system text",
        (
            Message("user", "hi"),
            Message("assistant", "", (ToolCallRequest("call_1", "echo", {"a": 1}),)),
            Message("tool", "nope", call_id="call_1", ok=False),
        ),
        (ToolSpec("echo", "Echo.", {"type": "object"}),),
    )
    body = request_body(request, "some-model")
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "system text"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": json.dumps({"a": 1})}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "[tool failed] nope"},
    ]
    assert body["tools"] == [{"type": "function", "function": {"name": "echo", "description": "Echo.", "parameters": {"type": "object"}}}]
