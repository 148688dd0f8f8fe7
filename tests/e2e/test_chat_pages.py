"""A long session's chat against the real daemon: the first dsh/chat/get of a page from the
start comes before the whole log is read and equals that part of the whole list, and a
dsh/plan/get sent right behind a first whole-list dsh/chat/get is answered long before it.

The session's log is written line by line (a sound log: turns of a tool call and a reply),
then opened through the daemon like any session."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from dshd.folds import events as ev

from .conftest import write_workspace

SESSION_ID = "s-01m8pages00000000000000000"
TURNS = 5_000  # 7 events a turn: 35,001 events


def write_long_log(workspace: Path) -> int:
    folder = workspace / ".dsh" / "sessions" / SESSION_ID
    folder.mkdir(parents=True)
    lines: list[bytes] = []
    seq = 0

    def emit(cls, data, turn=None) -> None:
        nonlocal seq
        seq += 1
        lines.append(ev.encode_event(cls(seq=seq, at="2026-12-01T10:00:00.000Z", turn=turn, data=data)))

    emit(ev.SessionStart, ev.SessionStartData(sessionId=SESSION_ID, formatVersion=1, title="long"))
    for turn in range(1, TURNS + 1):
        emit(ev.TurnOpen, ev.TurnOpenData(turn=turn, cause="prompt"), turn)
        emit(ev.UserMessage, ev.UserMessageData(text=f"question {turn}", source="user"), turn)
        emit(ev.RequestHeader, ev.RequestHeaderData(step=1, planActive=False, sections=["base:system"], tools=["read_file"]), turn)
        emit(ev.ToolCall, ev.ToolCallData(callId=f"c{turn}", name="read_file", arguments={"path": "a.py"}), turn)
        emit(ev.ToolResult, ev.ToolResultData(callId=f"c{turn}", ok=True, content="x = 1\n"), turn)
        emit(ev.RequestHeader, ev.RequestHeaderData(step=2, planActive=False, sections=["base:system"], tools=["read_file"]), turn)
        emit(ev.TurnClose, ev.TurnCloseData(turn=turn, stopReason="end-turn"), turn)
    (folder / "log.jsonl").write_bytes(b"".join(lines))
    return seq


async def timed(request) -> tuple[dict, float]:
    start = time.perf_counter()
    result = await request
    return result, time.perf_counter() - start


async def test_a_long_chat_pages_without_holding_the_connection(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[])
    last_seq = write_long_log(workspace)
    client = await daemons.start()
    agent = (await client.request("dsh/session/open", {"sessionId": SESSION_ID}))["agentId"]

    # A first page from the start, then the whole list, with a plan/get right behind it.
    page, page_s = await timed(client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 50}))
    whole_task = asyncio.ensure_future(timed(client.request("dsh/chat/get", {"agentId": agent})))
    plan, plan_s = await timed(client.request("dsh/plan/get", {"agentId": agent}))
    assert not whole_task.done()  # answered while the whole list is still being read
    whole, whole_s = await whole_task

    items = whole["items"]
    assert len(items) == 1 + 3 * TURNS and whole["nextSeq"] == last_seq  # the session; a user message, a tool call, a turn end a turn
    assert page == {"items": items[:50], "nextSeq": items[49]["seq"]}
    assert plan == {"active": False}
    assert plan_s < whole_s / 4, (plan_s, whole_s)
    # Later pages are the same slices of the list.
    middle = items[len(items) // 2]["seq"]
    later = await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": middle, "limit": 7})
    start = next(i for i, item in enumerate(items) if item["seq"] > middle)
    assert later == {"items": items[start : start + 7], "nextSeq": items[start + 6]["seq"]}
