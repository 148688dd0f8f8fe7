"""A tool call's arguments are capped while a reply is assembled (models/collect.py): past
the cap nothing more of them is kept, the call comes out with no arguments and a refusal
naming the cap; a call under the cap in the same reply keeps its arguments whole."""

from __future__ import annotations

import json

from dshd.agent.loop import tool_arguments_cap
from dshd.models import ReplyAssembler
from dshd.models.interface import Stop, ToolCallDelta, ToolCallEnd, ToolCallStart


def feed_call(assembler: ReplyAssembler, index: int, name: str, arguments: dict, piece: int) -> None:
    text = json.dumps(arguments)
    assembler.feed(ToolCallStart(index, f"c{index}", name))
    for start in range(0, len(text), piece):
        assembler.feed(ToolCallDelta(index, text[start : start + piece]))
    assembler.feed(ToolCallEnd(index))


def test_a_call_over_the_cap_keeps_nothing_and_is_refused_naming_the_cap():
    assembler = ReplyAssembler(1024, "a test cap")
    feed_call(assembler, 0, "write_file", {"path": "a.txt", "content": "x" * 900}, piece=100)  # control
    feed_call(assembler, 1, "write_file", {"path": "b.txt", "content": "x" * 50_000}, piece=100)
    assert not assembler.over_cap(0) and assembler.over_cap(1)
    assert sum(len(p) for p in assembler._calls[1][2]) == 0  # nothing of it kept
    assembler.feed(Stop("tool-calls"))
    fits, over = assembler.reply().tool_calls
    assert fits.refused is None and fits.arguments == {"path": "a.txt", "content": "x" * 900}
    assert over.call_id == "c1" and over.name == "write_file" and over.arguments == {}
    assert over.refused is not None and "over the cap of 1 KiB" in over.refused and "(a test cap)" in over.refused
    assert "not run" in over.refused


def test_no_cap_keeps_everything_and_the_default_cap_leaves_room_for_an_escaped_max_write():
    assembler = ReplyAssembler()
    feed_call(assembler, 0, "write_file", {"path": "a.txt", "content": "\n" * 100_000}, piece=4096)
    assembler.feed(Stop("tool-calls"))
    [call] = assembler.reply().tool_calls
    assert call.refused is None and len(call.arguments["content"]) == 100_000
    cap = tool_arguments_cap(8 * 1024 * 1024)
    assert cap == 17 * 1024 * 1024 and len(json.dumps({"content": "\n" * 8 * 1024 * 1024})) < cap
