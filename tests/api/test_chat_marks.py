"""Chat marks (issue 17, long sessions): the newest page and page k cost the page, not the log.

- A projection resumed at a turn boundary with the carry (``ChatProjection.resumed``) gives
  every later item exactly as the projection of the whole log, on many random logs; the
  empty carry (the positive control) does not, so the carry is what makes it so.
- ``page_before`` pages backwards through the whole list: each page is the last ``limit``
  counted items below ``beforeSeq``, and the pages put together are the list.
- ``Hub.chat_page`` records marks while it reads, keeps them in ``chat-marks.json``; a
  later open (a new daemon) projects only the log after the last mark for the newest page
  and the segments between marks for older pages and for page k; every page equals the
  whole log's. A marks file that no longer matches the log is not used (read from the start).
"""

from __future__ import annotations

import asyncio
import json
import random

from agent_support import make_workspace
from tests.api.test_chat_pages import Door, as_json, projected, random_log

from dshd.api import chat_marks
from dshd.api import hub as hub_module
from dshd.api.chat import ChatCarry, ChatProjection, counted_items, page_after_list, page_before_list
from dshd.daemon.to_wire import chat_item as to_json
from dshd.api.hub import Hub

NEWEST = 2**53 - 1


def test_a_projection_resumed_at_a_boundary_equals_the_whole_logs():
    rng = random.Random(23)
    resumed_cases = differs_without_carry = 0
    for case in range(80):
        log = random_log(rng, rng.randint(2, 30), deltas=case % 2 == 1)
        whole = [to_json(i) for i in projected(log).items()]
        prefix = ChatProjection()
        for index, (kind, value) in enumerate(log):
            if kind == "event" and value["type"] == "turn/open" and prefix.resumable() and rng.random() < 0.5:
                before = [to_json(i) for i in prefix.items()]
                resumed = ChatProjection.resumed(prefix.carry(), prefix.last_seq)
                bare = ChatProjection.resumed(ChatCarry(), prefix.last_seq)
                for later_kind, later in log[index:]:
                    for projection in (resumed, bare):
                        projection.apply_event(later) if later_kind == "event" else projection.apply_delta(later)
                assert before + [to_json(i) for i in resumed.items()] == whole, (case, index)
                resumed_cases += 1
                differs_without_carry += before + [to_json(i) for i in bare.items()] != whole
            if kind == "event":
                prefix.apply_event(value)
            else:
                prefix.apply_delta(value)
    assert resumed_cases > 200
    assert differs_without_carry > 10  # previousId and round budgets come from before the boundary


def test_pages_before_walk_back_through_the_whole_list():
    rng = random.Random(31)
    walked = 0
    for case in range(60):
        projection = projected(random_log(rng, rng.randint(1, 25), deltas=case % 2 == 1))
        items = projection.items()
        with_seq = [i for i in items if getattr(i, "seq", None) is not None]
        for limit in (1, 3, 7, None):
            for before in {1, 2, projection.last_seq, projection.last_seq + 1, NEWEST, rng.randint(0, projection.last_seq + 1)}:
                page, next_seq, reached = projection.page_before(before, limit)
                assert [to_json(i) for i in page] == [to_json(i) for i in page_before_list(items, before, limit)[0]]
                below = [i for i in with_seq if i.seq < before]
                wanted = below if limit is None else below[-limit:] if limit else []
                assert [i.id for i in page if getattr(i, "seq", None) is not None] == [i.id for i in wanted], (case, before, limit)
                assert reached == (len(wanted) == len(below))
                assert next_seq == (wanted[-1].seq if wanted else 0)
            # Walking back from the newest page, page by page, gives the whole list (a list
            # whose seqs go down, from items streamed before a lower seq, is paged by list place).
            ascending = all(a.seq <= b.seq for a, b in zip(with_seq, with_seq[1:]))
            if limit is None or not ascending:
                continue
            walked += 1
            pages, before = [], NEWEST
            while True:
                page, _next, reached = projection.page_before(before, limit)
                pages[:0] = page
                if reached:
                    break
                before = next(i.seq for i in page if getattr(i, "seq", None) is not None)
            assert [to_json(i) for i in pages] == [to_json(i) for i in items], (case, limit)
    assert walked > 60


def _talk(turns: int):
    return [r for n in range(turns) for r in ({"text": f"reply {n}", "toolCalls": [{"name": "echo", "arguments": {"text": "a"}}]}, {"text": "done"})]


class CountingProjection:
    """Counts the events projections are fed (how much of the log a page read)."""

    def __init__(self, monkeypatch) -> None:
        self.events = 0
        original = ChatProjection.apply_event

        def counted(projection, event):
            self.events += 1
            return original(projection, event)

        monkeypatch.setattr(ChatProjection, "apply_event", counted)


async def test_a_new_daemon_reads_only_the_tail_for_the_newest_page(tmp_path, monkeypatch):
    monkeypatch.setattr(chat_marks, "MARK_EVERY", 12)
    workspace = make_workspace(tmp_path, _talk(40))
    agent = workspace.create_session("marks")
    for n in range(40):
        await agent.prompt(f"question {n}")
    session_id, last_seq = agent.session_id, agent.store.state.seq
    reference = Hub(Door()).chat(agent)  # the whole log, projected at once
    assert len(chat_marks.marks_of(agent.store).marks) > 10  # any read of the whole log keeps its marks
    first_look = await Hub(Door()).chat_page(agent, before_seq=NEWEST, limit=6)
    assert as_json(first_look) == as_json(_before(reference[0], NEWEST, 6))
    await workspace.shutdown()
    saved = json.loads((tmp_path / ".dsh" / "sessions" / session_id / chat_marks.MARKS_NAME).read_bytes())
    assert len(saved["marks"]) >= last_seq // 24  # one at the first turn boundary 12 events or more after the last

    workspace = make_workspace(tmp_path, [])
    agent = workspace.open_session(session_id)
    counting = CountingProjection(monkeypatch)
    hub = Hub(Door())
    newest = await hub.chat_page(agent, before_seq=NEWEST, limit=6)
    assert as_json(newest) == as_json(_before(reference[0], NEWEST, 6))
    assert 0 < counting.events <= 2 * 12 + 20  # the tail after the last mark, not the log's ~300 events
    feed = hub._feeds[agent.agent_id]
    assert feed.chat_from > last_seq - 40
    # Walking back reads one segment at a time and gives the whole list.
    pages, before = [], NEWEST
    while True:
        page, _next = await hub.chat_page(agent, before_seq=before, limit=7)
        pages[:0] = page
        if counted_items(page) < 7:
            break
        before = page[0].seq
    assert [to_json(i) for i in pages] == [to_json(i) for i in reference[0]]
    # Page k (forward) from a fresh connection: one or two segments, not the log before k.
    for after in (0, 1, last_seq // 3, last_seq // 2, feed.chat_from - 1, feed.chat_from, last_seq - 5, last_seq):
        counting.events = 0
        fresh = Hub(Door())
        page = await fresh.chat_page(agent, after_seq=after, limit=5)
        assert as_json(page) == as_json(_after(reference[0], after, 5)), after
        building = fresh._feeds[agent.agent_id].building  # the live chat's read, beside a page from the segments
        if building is not None:
            await building
        assert counting.events <= 3 * 12 + 40, after
    # A page read from segments lets the loop run other work between its slices (a request
    # behind it is answered meanwhile); control: the synchronous whole read lets none run.
    monkeypatch.setattr(hub_module, "SLICE_S", 0.0)
    monkeypatch.setattr(hub_module, "CLOCK_EVERY", 1)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    before_ticks = ticks
    Hub(Door()).chat(agent)
    assert ticks == before_ticks
    page = await Hub(Door()).chat_page(agent, before_seq=last_seq // 2, limit=5)
    assert ticks > before_ticks + 4 and as_json(page) == as_json(_before(reference[0], last_seq // 2, 5))
    ticking.cancel()
    # The whole list, asked of a hub that read only the tail, is the whole log's (and then stays whole).
    assert as_json(await hub.chat_page(agent)) == as_json(reference)
    assert feed.chat_from == 0 and as_json(await hub.chat_page(agent, before_seq=NEWEST, limit=6)) == as_json(newest)
    await workspace.shutdown()


async def test_the_live_chat_adds_marks_and_a_stale_marks_file_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(chat_marks, "MARK_EVERY", 10)
    monkeypatch.setattr(chat_marks, "SAVE_EVERY", 1)
    workspace = make_workspace(tmp_path, _talk(30))
    agent = workspace.create_session("live")
    hub = Hub(Door())
    await hub.chat_page(agent, before_seq=NEWEST, limit=3)  # subscribed: the live chat follows every turn
    path = agent.store.dir / chat_marks.MARKS_NAME
    for n in range(30):
        await agent.prompt(f"question {n}")
    await asyncio.sleep(0.5)  # the file is written off the loop
    marks = json.loads(path.read_bytes())["marks"]
    assert len(marks) >= agent.store.state.seq // 20  # recorded live: at the first turn boundary 10 events or more after the last
    session_id = agent.session_id
    reference = as_json(Hub(Door()).chat(agent))
    await workspace.shutdown()

    # Positive control: as written, the marks are used (the chat starts at the last one).
    workspace = make_workspace(tmp_path, [])
    agent = workspace.open_session(session_id)
    hub = Hub(Door())
    await hub.chat_page(agent, before_seq=NEWEST, limit=3)
    assert hub._feeds[agent.agent_id].chat_from == marks[-1]["seq"]
    await workspace.shutdown()

    # One mark in the middle that no longer matches: the newest page still reads from the
    # last; a page back that needs the bad one reads again from the marks before it.
    data = json.loads(path.read_bytes())
    middle = len(data["marks"]) // 2
    data["marks"][middle]["line_sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    workspace = make_workspace(tmp_path, [])
    agent = workspace.open_session(session_id)
    hub = Hub(Door())
    assert as_json(await hub.chat_page(agent, before_seq=NEWEST, limit=3))[0] == [i for i in reference[0] if "seq" in i][-3:]
    assert hub._feeds[agent.agent_id].chat_from == marks[-1]["seq"]
    back = data["marks"][middle]["seq"] + 2
    page = as_json(await hub.chat_page(agent, before_seq=back, limit=4))[0]
    assert page == [i for i in reference[0] if "seq" in i and i["seq"] < back][-4:]
    assert hub._feeds[agent.agent_id].chat_from < data["marks"][middle]["seq"]  # read again from an earlier mark
    assert as_json(await hub.chat_page(agent)) == reference
    await workspace.shutdown()

    # A marks file whose fingerprints no longer match the log: not used, the chat is read from the start.
    data = json.loads(path.read_bytes())
    for mark in data["marks"]:
        mark["line_sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    workspace = make_workspace(tmp_path, [])
    agent = workspace.open_session(session_id)
    hub = Hub(Door())
    page = await hub.chat_page(agent, before_seq=NEWEST, limit=3)
    assert hub._feeds[agent.agent_id].chat_from == 0
    assert as_json(page)[0] == [i for i in reference[0] if "seq" in i][-3:]
    assert as_json(await hub.chat_page(agent)) == reference
    await workspace.shutdown()


def _before(items, before_seq, limit):
    page, next_seq, _reached = page_before_list(items, before_seq, limit)
    return page, next_seq


def _after(items, after_seq, limit):
    return page_after_list(items, after_seq, limit)


async def test_a_session_run_with_no_chat_open_keeps_its_marks(tmp_path, monkeypatch):
    """A door follows the agent (Hub.attach) but nobody reads the chat (a headless or
    ACP-only run): the marks still follow the log, so the next look reads only the tail.
    Control: the same run without any hub attached leaves no marks behind."""
    monkeypatch.setattr(chat_marks, "MARK_EVERY", 10)
    monkeypatch.setattr(chat_marks, "FOLLOW_GAP", 40)
    ids = {}
    for followed in (False, True):
        root = tmp_path / ("followed" if followed else "alone")
        root.mkdir()
        workspace = make_workspace(root, _talk(25))
        agent = workspace.create_session("headless")
        if followed:
            Hub(Door()).attach(agent)
        for n in range(25):
            await agent.prompt(f"question {n}")
        ids[followed] = (root, agent.session_id, agent.store.state.seq)
        await workspace.shutdown()
    root, session_id, last_seq = ids[False]
    assert not (root / ".dsh" / "sessions" / session_id / chat_marks.MARKS_NAME).exists()
    root, session_id, last_seq = ids[True]
    marks = json.loads((root / ".dsh" / "sessions" / session_id / chat_marks.MARKS_NAME).read_bytes())["marks"]
    assert len(marks) >= last_seq // 20 and marks[-1]["seq"] > last_seq - 30

    workspace = make_workspace(root, [])
    agent = workspace.open_session(session_id)
    reference = Hub(Door()).chat(agent)
    counting = CountingProjection(monkeypatch)
    hub = Hub(Door())
    newest = await hub.chat_page(agent, before_seq=NEWEST, limit=4)
    assert as_json(newest) == as_json(_before(reference[0], NEWEST, 4))
    assert counting.events <= 60 and hub._feeds[agent.agent_id].chat_from == marks[-1]["seq"]
    await workspace.shutdown()
