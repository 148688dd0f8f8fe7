"""Model adapters: the streaming contract (collect) and the scripted model (SPEC 7)."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import events_of, make_workspace

from dshd.models.config import ScriptReply, ScriptToolCall
from dshd.models import (
    ModelError,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    collect,
)
from dshd.models.scripted import EXHAUSTED_TEXT, ScriptedModel

REQUEST = ModelRequest("system", (), ())


async def stream_of(*events):
    for event in events:
        yield event


async def test_model_collect_assembles_text_and_streamed_tool_arguments():
    reply = await collect(
        stream_of(
            TextDelta("Hel"),
            TextDelta("lo"),
            ToolCallStart(0, "c1", "read"),
            ToolCallStart(1, "c2", "write"),
            ToolCallDelta(0, '{"path": '),
            ToolCallDelta(1, "{}"),
            ToolCallDelta(0, '"a.py"}'),
            ToolCallEnd(0),
            ToolCallEnd(1),
            Stop("tool-calls", Usage(10, 3)),
        )
    )
    assert reply.text == "Hello" and reply.stop_reason == "tool-calls" and reply.usage == Usage(10, 3)
    assert [(c.call_id, c.name, c.arguments) for c in reply.tool_calls] == [("c1", "read", {"path": "a.py"}), ("c2", "write", {})]


@pytest.mark.parametrize("arguments", ["{oops", "[1]", '"text"'])
async def test_model_collect_rejects_arguments_that_are_not_a_json_object(arguments):
    with pytest.raises(ModelError) as caught:
        await collect(stream_of(ToolCallStart(0, "c1", "t"), ToolCallDelta(0, arguments), ToolCallEnd(0), Stop("tool-calls")))
    assert caught.value.kind == "bad-response" and "'t'" in caught.value.message


@pytest.mark.parametrize(
    "events",
    [
        (TextDelta("no stop"),),
        (Stop("end-turn"), TextDelta("after stop")),
        (ToolCallDelta(0, "{}"), Stop("tool-calls")),
        (ToolCallEnd(3), Stop("tool-calls")),
        (ToolCallStart(0, "a", "t"), ToolCallStart(0, "b", "t"), Stop("tool-calls")),
        (ToolCallStart(0, "a", ""), ToolCallEnd(0), Stop("tool-calls")),
    ],
)
async def test_model_collect_rejects_a_broken_stream(events):
    with pytest.raises(ModelError) as caught:
        await collect(stream_of(*events))
    assert caught.value.kind == "bad-response"


async def test_model_scripted_replies_in_order_then_exhausted():
    model = ScriptedModel([ScriptReply(text="one"), ScriptReply(toolCalls=[ScriptToolCall("t", {"x": [1, 2]})])])
    first = await collect(model.stream(REQUEST))
    second = await collect(model.stream(REQUEST))
    third = await collect(model.stream(REQUEST))
    assert (first.text, first.tool_calls, first.stop_reason) == ("one", (), "end-turn")
    assert second.tool_calls[0].name == "t" and second.tool_calls[0].arguments == {"x": [1, 2]}
    assert second.stop_reason == "tool-calls"
    assert (third.text, third.tool_calls) == (EXHAUSTED_TEXT, ())
    assert len(model.requests) == 3 and model.remaining == 0


async def test_model_scripted_delay_is_cancellable():
    model = ScriptedModel([ScriptReply(text="slow", delayMs=5_000)])
    task = asyncio.ensure_future(collect(model.stream(REQUEST)))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_model_scripted_replies_run_across_turns_and_exhaustion_ends_the_turn(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "first turn"}, {"text": "second turn"}], plugins=[])
    agent = ws.create_session()
    await agent.prompt("a")
    await agent.prompt("b")
    result = await agent.prompt("c")
    assert result.stop_reason == "end-turn"
    assert [e.data.text for e in events_of(agent, "assistant/message")] == ["first turn", "second turn", EXHAUSTED_TEXT]
    await ws.shutdown()


async def test_model_scripted_delay_makes_the_request_take_that_long(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 120}], plugins=[])
    agent = ws.create_session()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await agent.prompt("go")
    assert loop.time() - started >= 0.12
    await ws.shutdown()
