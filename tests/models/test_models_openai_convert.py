"""The OpenAI-compatible mapping (no network: chunks shaped like the API's streaming
chat.completion.chunk objects, as OpenAI, vLLM, llama.cpp and ollama send them)."""

from __future__ import annotations

import json

import pytest
from loopback_models import DIALECTS, Call, Dialect, Reply, openai_events

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
        [{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}],  # no name
        [{"error": {"message": "overloaded"}}],
    ],
)
async def test_model_openai_broken_streams_are_model_errors(chunks):
    with pytest.raises(ModelError) as caught:
        await collect(events_from_chunks(aiter(chunks)))
    assert caught.value.kind in ("bad-response", "server")


def test_model_openai_bad_sse_payload_is_a_model_error():
    with pytest.raises(ModelError) as caught:
        list(sse_data(["data: {not json"]))
    assert caught.value.kind == "bad-response"


def chunks_of(reply: Reply) -> list[dict]:
    return list(sse_data("".join(openai_events(reply)).splitlines()))


TWO_CALLS = [Call("read_file", {"path": "src/a.py"}), Call("grep", {"pattern": "def \\w+", "glob": "*.py"})]


@pytest.mark.parametrize("name", sorted(DIALECTS))
async def test_model_openai_every_servers_dialect_gives_the_same_reply(name):
    """OpenAI, vLLM, llama.cpp and ollama shape tool calls, usage and content differently;
    the reply is the same."""
    reply = await collect(events_from_chunks(aiter(chunks_of(Reply("Reading both.", TWO_CALLS, dialect=DIALECTS[name], piece=5)))))
    assert reply.text == "Reading both."
    assert [(c.call_id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_0", "read_file", {"path": "src/a.py"}),
        ("call_1", "grep", {"pattern": "def \\w+", "glob": "*.py"}),
    ]
    cached = None if name == "ollama" else 0  # ollama's usage says nothing of a cache
    assert reply.stop_reason == "tool-calls" and reply.usage == Usage(12, 5, cached)


@pytest.mark.parametrize(
    "dialect",
    [Dialect(ids="every"), Dialect(ids="none"), Dialect(whole_arguments=True), Dialect(finish="stop"),
     Dialect(empty_content=True), Dialect(usage="with-finish"), Dialect(usage="missing")],
    ids=["id-every-fragment", "no-id", "whole-arguments", "stop-with-calls", "empty-content", "usage-with-finish", "usage-missing"],
)  # fmt: skip
async def test_model_openai_each_difference_on_its_own(dialect):
    reply = await collect(events_from_chunks(aiter(chunks_of(Reply("", TWO_CALLS[:1], dialect=dialect, piece=3)))))
    (call,) = reply.tool_calls
    assert (call.name, call.arguments) == ("read_file", {"path": "src/a.py"})
    assert call.call_id == ("call_0" if dialect.ids != "none" else call.call_id) and call.call_id
    assert reply.text == "" and reply.stop_reason == "tool-calls"
    assert reply.usage == (Usage() if dialect.usage == "missing" else Usage(12, 5, 0))


async def test_model_openai_finish_reason_without_calls_and_length():
    no_calls = await collect(events_from_chunks(aiter(chunks_of(Reply("just text", dialect=Dialect(finish="tool_calls"))))))
    assert (no_calls.text, no_calls.tool_calls, no_calls.stop_reason) == ("just text", (), "end-turn")
    cut_short = await collect(events_from_chunks(aiter(chunks_of(Reply("trunc", dialect=Dialect(finish="length"))))))
    assert cut_short.stop_reason == "max-tokens"


@pytest.mark.parametrize("arguments", ['{"path": "a.py"', "[1, 2]", "null"])
async def test_model_openai_arguments_that_are_not_a_json_object_are_bad_response(arguments):
    with pytest.raises(ModelError) as caught:
        await collect(events_from_chunks(aiter(chunks_of(Reply("", [Call("read_file", arguments)])))))
    assert caught.value.kind == "bad-response" and "read_file" in caught.value.message


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
