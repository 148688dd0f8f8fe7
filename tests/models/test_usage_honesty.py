"""G-25 at the adapters: cached tokens as the real APIs report them, usage estimated when a
server reports none, and a reply cut at the output limit (no network: the loopback
servers' own event texts, shaped like the providers' streams)."""

from __future__ import annotations

import json

import msgspec
import pytest
from loopback_models import LLAMA_CPP, Call, Reply, anthropic_events, openai_events

from dshd.folds.events import AssistantMessageData
from dshd.models import Message, ModelRequest, Stop, TextDelta, ToolCallDelta, ToolCallStart, ToolSpec, Usage, collect
from dshd.models.anthropic_convert import events_from_stream
from dshd.models.collect import output_limit_error
from dshd.models.openai_convert import events_from_chunks, sse_data
from dshd.models.usage import request_chars, text_tokens, usage_record, with_estimate


async def aiter(items):
    for item in items:
        yield item


def openai_stream(reply: Reply):
    return events_from_chunks(aiter(list(sse_data("".join(openai_events(reply)).splitlines()))))


def anthropic_stream(reply: Reply):
    events = [json.loads(line[len("data: ") :]) for block in anthropic_events(reply) for line in block.splitlines() if line.startswith("data: ")]
    return events_from_stream(aiter(events))


STREAMS = {"openai": openai_stream, "anthropic": anthropic_stream}


@pytest.mark.parametrize("provider", sorted(STREAMS))
async def test_usage_cached_input_is_read_as_each_api_reports_it(provider):
    reply = await collect(STREAMS[provider](Reply("hi", usage=(900, 7), cached=800)))
    assert reply.usage == Usage(900, 7, 800)
    # The control: a reply with nothing from the cache says 0, not "unknown".
    assert (await collect(STREAMS[provider](Reply("hi", usage=(900, 7))))).usage == Usage(900, 7, 0)


async def test_usage_cached_input_from_llama_cpp_usage_with_the_finish():
    reply = await collect(openai_stream(Reply("hi", usage=(300, 4), cached=290, dialect=LLAMA_CPP)))
    assert reply.usage == Usage(300, 4, 290)


def test_usage_openai_chunks_before_the_last_carry_null_usage_as_the_api_does():
    chunks = list(sse_data("".join(openai_events(Reply("hello there", usage=(10, 2)))).splitlines()))
    assert all("usage" in c for c in chunks)
    assert [c["usage"] is None for c in chunks] == [True] * (len(chunks) - 1) + [False]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


@pytest.mark.parametrize("provider", sorted(STREAMS))
async def test_usage_none_reported_stays_unknown_in_the_converter(provider):
    reply = await collect(STREAMS[provider](Reply("hi", usage=None)))
    assert reply.usage == Usage()


REQUEST = ModelRequest(
    "You are terse.",
    (Message("user", "read a.py please"),),
    (ToolSpec("read_file", "Read a file.", {"type": "object"}),),
    volatile="Goal: round 2 of 5.",
)


async def test_usage_estimate_is_characters_over_four_of_request_and_reply():
    events = [TextDelta("Reading it."), ToolCallStart(0, "c1", "read_file"), ToolCallDelta(0, '{"path": "a.py"}'), Stop("tool-calls")]
    out = [e async for e in with_estimate(aiter(events), REQUEST)]
    stop = out[-1]
    expected_input = text_tokens(len("You are terse.") + len("read a.py please") + len("Goal: round 2 of 5.")
                                 + len("read_file") + len("Read a file.") + len(json.dumps({"type": "object"})))  # fmt: skip
    assert request_chars(REQUEST) > 0 and stop.usage.input_tokens == expected_input
    assert stop.usage.output_tokens == text_tokens(len("Reading it.") + len("read_file") + len('{"path": "a.py"}'))
    assert stop.usage.estimated is True and out[:-1] == events[:-1]


async def test_usage_estimate_fills_only_the_missing_count_and_leaves_a_full_report_alone():
    half = [e async for e in with_estimate(aiter([TextDelta("abcdefgh"), Stop("end-turn", Usage(input_tokens=40))]), REQUEST)]
    assert half[-1].usage == Usage(40, 2, None, estimated=True)
    whole = [e async for e in with_estimate(aiter([TextDelta("abcdefgh"), Stop("end-turn", Usage(40, 9, 30))]), REQUEST)]
    assert whole[-1].usage == Usage(40, 9, 30) and whole[-1].usage.estimated is False


def test_usage_record_is_the_logs_shape():
    record = usage_record(Usage(900, 7, 800))
    assert record == {"inputTokens": 900, "outputTokens": 7, "cachedInputTokens": 800}
    assert usage_record(Usage(12, 3, estimated=True)) == {"inputTokens": 12, "outputTokens": 3, "estimated": True}
    assert usage_record(Usage(12, 3, 0)) == {"inputTokens": 12, "outputTokens": 3}
    # The log's strict schema takes both new fields, and an older line without them.
    for usage in (record, usage_record(Usage(12, 3, estimated=True)), {"inputTokens": 1, "outputTokens": 2}):
        data = msgspec.json.decode(json.dumps({"text": "", "usage": usage}), type=AssistantMessageData)
        assert data.usage.inputTokens == usage["inputTokens"]
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"text":"","usage":{"inputTokens":1,"outputTokens":2,"cachedInputTokens":-1}}', type=AssistantMessageData)


@pytest.mark.parametrize("provider", sorted(STREAMS))
async def test_usage_reply_cut_at_the_limit_inside_a_tool_call_is_not_parsed(provider):
    cut = Reply("Writing it.", [Call("write_file", {"path": "a.py", "content": "x = 1\n" * 20})], usage=(50, 64), cut_at_limit=True)
    reply = await collect(STREAMS[provider](cut))
    assert reply.stop_reason == "max-tokens" and reply.tool_calls == () and reply.cut_calls == ("write_file",)
    assert reply.text == "Writing it." and reply.usage.output_tokens == 64
    # The control: the same reply not cut is a call with whole arguments.
    whole = await collect(STREAMS[provider](Reply("Writing it.", cut.tool_calls, usage=(50, 64))))
    assert [c.name for c in whole.tool_calls] == ["write_file"] and whole.stop_reason == "tool-calls"


def test_usage_output_limit_error_names_the_cause_and_the_setting():
    error = output_limit_error(256, ("write_file",))
    assert error.kind == "output-limit"
    assert "maxOutputTokens" in error.message and "256" in error.message and "write_file" in error.message
    assert "JSON" not in error.message
    assert "maxOutputTokens" in output_limit_error(None).message


async def test_usage_scripted_model_reports_cached_input_when_its_script_says_so():
    from dshd.models.config import ScriptReply, ScriptUsage
    from dshd.models.scripted import ScriptedModel

    model = ScriptedModel([ScriptReply(text="a", usage=ScriptUsage(900, 5, 800)), ScriptReply(text="b")])
    first = await collect(model.stream(REQUEST))
    second = await collect(model.stream(REQUEST))
    assert first.usage == Usage(900, 5, 800)
    assert second.usage == Usage()  # no usage in the script: none, and no estimate
