"""A long session's chat against the real daemon: the first dsh/chat/get of a page from the
start comes before the whole log is read and equals that part of the whole list, and a
dsh/plan/get sent right behind a first whole-list dsh/chat/get is answered long before it.

The session's log is written line by line (a sound log: turns of a tool call and a reply),
then opened through the daemon like any session."""

from __future__ import annotations

import asyncio
import time
import pytest
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


@pytest.mark.slow
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


NEWEST = 2**53 - 1


async def test_the_newest_page_of_a_reopened_session_reads_only_its_tail(workspace: Path, daemons) -> None:
    """beforeSeq over the wire: the newest page and pages back equal the whole list's slices;
    a first daemon's look keeps chat marks beside the log, and a new daemon's first newest
    page then reads only the log after the last mark: far less than the whole list's read
    (measured in the first daemon: the positive control), with a plan/get behind it answered
    in between. afterSeq with beforeSeq, or a bad beforeSeq, is -32602 naming beforeSeq."""
    from pygls.exceptions import JsonRpcException

    write_workspace(workspace, replies=[])
    last_seq = write_long_log(workspace)
    first = await daemons.start()
    agent = (await first.request("dsh/session/open", {"sessionId": SESSION_ID}))["agentId"]
    newest, first_newest_s = await timed(first.request("dsh/chat/get", {"agentId": agent, "beforeSeq": NEWEST, "limit": 50}))
    whole, whole_s = await timed(first.request("dsh/chat/get", {"agentId": agent}))
    items = whole["items"]
    assert newest == {"items": items[-50:], "nextSeq": last_seq}
    for bad in ({"afterSeq": 3, "beforeSeq": 10}, {"beforeSeq": -1}, {"beforeSeq": "9"}):
        with pytest.raises(JsonRpcException) as info:
            await first.request("dsh/chat/get", {"agentId": agent, **bad})
        assert info.value.code == -32602 and info.value.data["field"] == "beforeSeq", (bad, info.value.data)
    await first.request("dsh/session/close", {"agentId": agent})
    await first.stop()
    assert (workspace / ".dsh" / "sessions" / SESSION_ID / "chat-marks.json").is_file()

    second = await daemons.start()
    agent = (await second.request("dsh/session/open", {"sessionId": SESSION_ID}))["agentId"]
    newest_task = asyncio.ensure_future(timed(second.request("dsh/chat/get", {"agentId": agent, "beforeSeq": NEWEST, "limit": 50})))
    plan = await second.request("dsh/plan/get", {"agentId": agent})
    newest, newest_s = await newest_task
    assert plan == {"active": False}
    assert newest == {"items": items[-50:], "nextSeq": last_seq}
    assert newest_s < whole_s / 5 and newest_s < first_newest_s, (newest_s, whole_s, first_newest_s)
    # Pages back from there, and a page from the middle, are the whole list's slices.
    before, collected = items[-50]["seq"], items[-50:]
    for _ in range(4):
        page = await second.request("dsh/chat/get", {"agentId": agent, "beforeSeq": before, "limit": 33})
        collected = page["items"] + collected
        before = page["items"][0]["seq"]
        assert page["nextSeq"] == page["items"][-1]["seq"]
    assert collected == items[-len(collected):] and len(collected) == 50 + 4 * 33
    middle = items[len(items) // 2]["seq"]
    page = await second.request("dsh/chat/get", {"agentId": agent, "beforeSeq": middle, "limit": 7})
    end = next(i for i, item in enumerate(items) if item["seq"] >= middle)
    assert page == {"items": items[end - 7 : end], "nextSeq": items[end - 1]["seq"]}
    assert await second.request("dsh/chat/get", {"agentId": agent, "beforeSeq": 1, "limit": 7}) == {"items": [], "nextSeq": 0}
