"""Chat pages of long sessions (issue 17, long sessions): a page costs the page, not the log.

- ``ChatProjection.page`` starts at the page (a bisect over the list's seqs) instead of
  scanning from the first item; checked against the old scan, kept here as the reference,
  on many random logs (with and without live deltas) and page positions.
- A first page (``afterSeq`` 0 with a ``limit``) is answered from the start of the log as
  soon as ``first_items_settled``: checked against the page of the whole log.
- ``Hub.chat_page`` builds the chat in slices: another coroutine runs while it builds
  (the synchronous build, the positive control, lets none run), news committed during the
  build reaches the chat and the door, and the pages equal the synchronous hub's.
"""

from __future__ import annotations

import asyncio
import random

from agent_support import make_workspace

from dshd.agent.deltas import AgentDelta
from dshd.api import hub as hub_module
from dshd.api.chat import ChatProjection
from dshd.daemon.to_wire import chat_item as to_json
from dshd.api.hub import Hub


def scan_page(projection: ChatProjection, after_seq: int = 0, limit: int | None = None):
    """The page as dshd computed it before the bisect: a scan from the first item (the reference)."""
    out, next_seq, counted, position = [], after_seq, 0, 0
    for item in projection.items():
        seq = getattr(item, "seq", None)
        if seq is None:
            if position >= after_seq:
                out.append(item)
            continue
        position = seq
        if seq <= after_seq:
            continue
        if limit is not None and counted >= limit:
            break
        out.append(item)
        counted += 1
        next_seq = seq
    return out, next_seq


def random_log(rng: random.Random, turns: int, *, deltas: bool) -> list[tuple[str, object]]:
    """("event", dict) / ("delta", AgentDelta) in order: a log the agent could write (events
    only in the open turn, steps growing), with the odd parts the projection must survive:
    repeated call ids, calls never answered, plan reviews, decisions, goals, compactions."""
    out: list[tuple[str, object]] = []
    seq = 0

    def event(type_: str, data: dict, turn: int | None = None) -> None:
        nonlocal seq
        seq += 1
        value = {"seq": seq, "type": type_, "at": f"2026-12-01T10:00:{seq % 60:02d}.000Z", "data": data}
        if turn is not None:
            value["turn"] = turn
        out.append(("event", value))

    event("session/start", {"sessionId": "s-x", "formatVersion": 1, "title": "pages"})
    for turn in range(1, turns + 1):
        if rng.random() < 0.15:
            event("plan/mode", {"active": rng.random() < 0.5})
        if rng.random() < 0.1:
            event("goal/change", {"op": "create", "goal": {"id": f"g-{turn}", "revision": 1, "objective": "o", "phase": "active", "maxRounds": 9}})
        if rng.random() < 0.05:
            event("context/compact", {"summary": "s", "throughSeq": seq, "tokensBefore": 9, "tokensAfter": 1})
        event("turn/open", {"turn": turn, "cause": "prompt"}, turn)
        round_ = {"goalId": f"g-{turn - 1}", "round": 1} if rng.random() < 0.1 else None
        event("user/message", {"text": f"ask {turn}", "source": "user", **({"goalRound": round_} if round_ else {})}, turn)
        for step in range(1, rng.randint(1, 4) + 1):
            event("request/header", {"step": step}, turn)
            calls = [f"c{rng.randint(1, 3)}" for _ in range(rng.randint(0, 3))]  # repeats happen
            if deltas and rng.random() < 0.5:
                for call in calls[:1]:  # arguments stream before the text: the list's seqs go down
                    out.append(("delta", AgentDelta(turn=turn, step=step, kind="tool-arguments", call_id=call, name="read_file", text='{"path": "a"}')))
                out.append(("delta", AgentDelta(turn=turn, step=step, kind="text", text="thinking")))
                if rng.random() < 0.2:
                    out.append(("delta", AgentDelta(turn=turn, step=step, kind="retry", attempt=2, delay_ms=10)))
            text = "reply" if rng.random() < 0.7 else ""
            event("assistant/message", {"text": text, "usage": {"inputTokens": 3, "outputTokens": 2}}, turn)
            for call in calls:
                plan = rng.random() < 0.15
                name = "exit_plan_mode" if plan else rng.choice(["read_file", "run_command", "search"])
                event("tool/call", {"callId": call, "name": name, "arguments": {"plan": "# P\n"} if plan else {"path": "a"}}, turn)
            if rng.random() < 0.3 and calls:
                event("permission/decision", {"callId": calls[0], "tool": "run_command", "outcome": "allow-once", "by": "person"}, turn)
            for call in calls:
                if rng.random() < 0.85:
                    event("tool/result", {"callId": call, "ok": rng.random() < 0.7, "content": "done"}, turn)
        if turn < turns or rng.random() < 0.5:  # the last turn may be left open
            event("turn/close", {"turn": turn, "stopReason": "end-turn"}, turn)
    return out


def projected(log) -> ChatProjection:
    projection = ChatProjection()
    for kind, value in log:
        if kind == "event":
            projection.apply_event(value)
        else:
            projection.apply_delta(value)
    return projection


def as_json(page):
    items, next_seq = page
    return [to_json(i) for i in items], next_seq


def test_pages_equal_the_scan_for_many_logs_and_positions():
    rng = random.Random(17)
    descending = 0
    for case in range(60):
        log = random_log(rng, rng.randint(1, 25), deltas=case % 2 == 1)
        projection = projected(log)
        last = projection.last_seq
        seqs = [getattr(i, "seq", None) for i in projection.items()]
        known = [s for s in seqs if s is not None]
        descending += any(b < a for a, b in zip(known, known[1:]))
        for after in {0, 1, last, last + 3, *rng.sample(range(last + 2), min(12, last + 2))}:
            for limit in (None, 1, 2, 5, 40):
                assert as_json(projection.page(after, limit)) == as_json(scan_page(projection, after, limit)), (case, after, limit)
    assert descending  # the fallback (a list whose seqs go down) was exercised too


def test_pages_stay_equal_while_the_projection_grows():
    rng = random.Random(5)
    log = random_log(rng, 30, deltas=True)
    projection = ChatProjection()
    for index, (kind, value) in enumerate(log):
        if kind == "event":
            projection.apply_event(value)
        else:
            projection.apply_delta(value)
        if index % 7 == 0:
            after = rng.randint(0, projection.last_seq + 1)
            assert as_json(projection.page(after, 3)) == as_json(scan_page(projection, after, 3))


def test_a_first_page_settles_early_and_equals_the_whole_logs():
    rng = random.Random(99)
    early = 0
    for case in range(60):
        events = [value for kind, value in random_log(rng, rng.randint(1, 25), deltas=False)]
        whole = projected([("event", e) for e in events])
        for limit in (1, 3, 10, 50):
            partial = ChatProjection()
            for count, event in enumerate(events, 1):
                partial.apply_event(event)
                if partial.first_items_settled(limit):
                    assert as_json(partial.page(0, limit)) == as_json(whole.page(0, limit)), (case, limit)
                    early += count < len(events)
                    break
            else:
                assert len(whole.items()) <= limit or not whole.first_items_settled(limit)
    assert early > 100  # most first pages were answered before the log's end


def test_first_items_settled_waits_for_a_result_of_the_open_turn():
    projection = ChatProjection()
    events = [
        {"seq": 1, "type": "session/start", "at": "t", "data": {"sessionId": "s-x"}},
        {"seq": 2, "type": "turn/open", "at": "t", "turn": 1, "data": {"turn": 1}},
        {"seq": 3, "type": "request/header", "at": "t", "turn": 1, "data": {"step": 1}},
        {"seq": 4, "type": "tool/call", "at": "t", "turn": 1, "data": {"callId": "c", "name": "read_file", "arguments": {}}},
        {"seq": 5, "type": "permission/decision", "at": "t", "turn": 1, "data": {"callId": "c", "tool": "read_file", "outcome": "allow-once", "by": "person"}},
    ]
    for event in events:
        projection.apply_event(event)
    assert not projection.first_items_settled(2)  # the call (item 2) still runs
    assert projection.first_items_settled(1)  # the session item cannot change
    projection.apply_event({"seq": 6, "type": "tool/result", "at": "t", "turn": 1, "data": {"callId": "c", "ok": True, "content": "x"}})
    assert projection.first_items_settled(2) and projection.page(0, 2)[0][1].status == "ok"


class Door:
    def __init__(self) -> None:
        self.items: list[dict] = []

    def agent_event(self, agent, event): ...
    def agent_delta(self, agent, delta): ...
    def plan_changed(self, agent, view): ...
    def goal_changed(self, agent, notice): ...
    def activity_changed(self, agent, state): ...
    def tool_started(self, agent, call_id): ...

    def chat_item(self, agent, item):
        self.items.append(to_json(item))


async def test_the_hub_builds_in_slices_and_keeps_what_comes_meanwhile(tmp_path, monkeypatch):
    replies = [{"text": f"reply {n}", "toolCalls": [{"name": "echo", "arguments": {"text": "a"}}]} for n in range(40)]
    workspace = make_workspace(tmp_path, [r for reply in replies for r in (reply, {"text": "done"})])
    agent = workspace.create_session("pages")
    for n in range(39):
        await agent.prompt(f"question {n}")
    monkeypatch.setattr(hub_module, "SLICE_S", 0.0)  # yield at every chance: many slices on a short log

    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    # Positive control: the synchronous build lets nothing else run.
    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    before = ticks
    reference = Hub(Door()).chat(agent)
    assert ticks == before
    ticking.cancel()

    door = Door()
    hub = Hub(door)
    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    before = ticks
    first = await hub.chat_page(agent, 0, 5)
    assert ticks > before  # the loop ran other work before the first page came
    assert as_json(first) == as_json(Hub(Door()).chat(agent, 0, 5))
    # The build goes on after the first page: a turn committed meanwhile reaches the chat and the door.
    assert hub._feeds[agent.agent_id].chat is None
    await agent.prompt("one more")
    whole = await hub.chat_page(agent)
    ticking.cancel()
    assert ticks > before + 5
    fresh = Hub(Door()).chat(agent)
    assert as_json(whole) == as_json(fresh) and fresh[0][-1].text == f"Turn {fresh[0][-1].turn} finished"
    new_ids = [i.id for i in fresh[0][len(reference[0]):]]
    assert new_ids and list(dict.fromkeys(i["id"] for i in door.items)) == new_ids  # the new turn's items were upserted
    assert list({i["id"]: i for i in door.items}.values()) == [to_json(i) for i in fresh[0][len(reference[0]):]]
    middle = reference[0][len(reference[0]) // 2].seq
    assert as_json(await hub.chat_page(agent, middle, 7)) == as_json(Hub(Door()).chat(agent, middle, 7))
    # A first page longer than the log is answered when the build ends: the whole list.
    assert as_json(await Hub(Door()).chat_page(agent, 0, 10_000)) == as_json(fresh)
    await workspace.shutdown()
