"""services.listing: a list row's bounded fold gives the state a strict replay gives, for
every shape of log a folder can hold (checkpoint or not, a tail, a torn tail, an old
oversized title in our writer's order or another), and the kept rows follow changes."""

from __future__ import annotations

import json
import os

import pytest

from dshd.folds import replay
from dshd.log import SessionReader
from dshd.services.listing import HEAD_BYTES, SessionIndex, SessionRefusal, fold_for_list
from dshd.services.store import SessionStore
from log.test_log_sample import SAMPLE


def is_id(name: str) -> bool:
    return name.startswith("s")


def seeded(tmp_path, name: str = "s1", events: int = 5) -> SessionStore:
    store = SessionStore.create(tmp_path, name, title="a title")
    for i in range(events):
        store.commit("plan/mode", {"active": i % 2 == 0}, writer="plan")
    return store


def row_state(folder):
    with SessionReader.open(folder) as reader:
        return fold_for_list(reader)


def old_log(folder, title: str, *, title_first: bool = False, more: int = 2) -> None:
    folder.mkdir(parents=True)
    data = {"sessionId": folder.name, "formatVersion": 1, "title": title}
    if title_first:
        data = {"title": title, **{k: v for k, v in data.items() if k != "title"}}
    lines = [json.dumps({"seq": 1, "type": "session/start", "at": "2026-11-29T18:40:18.123Z", "data": data})]
    for seq in range(2, 2 + more):
        lines.append(json.dumps({"seq": seq, "type": "plan/mode", "at": f"2026-11-29T18:40:{seq:02d}.000Z", "data": {"active": seq % 2 == 0}}))
    (folder / "log.jsonl").write_text("\n".join(lines) + "\n")


def test_checkpoint_covering_all_with_a_tail_without_one_and_with_a_torn_tail(tmp_path):
    with seeded(tmp_path) as store:
        pass
    folder = store.dir
    assert row_state(folder) == replay(folder / "log.jsonl").state  # checkpoint covers all
    with SessionStore.open(tmp_path, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
        store._since_checkpoint = 0  # keep the old checkpoint: a tail after it
    assert row_state(folder) == replay(folder / "log.jsonl").state
    with open(folder / "log.jsonl", "ab") as out:
        out.write(b'{"seq": 99, "ty')  # a torn tail is not an event
    assert row_state(folder) == replay(folder / "log.jsonl").state
    (folder / "projection.json").unlink()
    assert row_state(folder) == replay(folder / "log.jsonl", use_checkpoint=False).state


def test_a_damaged_checkpoint_is_ignored_as_replay_ignores_it(tmp_path):
    with seeded(tmp_path) as store:
        pass
    cp = store.dir / "projection.json"
    cp.write_bytes(cp.read_bytes().replace(b'"active":true', b'"active":fals', 1))
    assert row_state(store.dir) == replay(store.dir / "log.jsonl", use_checkpoint=False).state


def test_the_sample_log(tmp_path):
    folder = tmp_path / "sample-7c1e"
    folder.mkdir()
    (folder / "log.jsonl").write_bytes(SAMPLE.read_bytes())
    assert row_state(folder) == replay(folder / "log.jsonl").state


@pytest.mark.parametrize("title_first", [False, True])
@pytest.mark.parametrize("title", ["t" * (3 * HEAD_BYTES), "\u00e9\u202e\\\"x" * HEAD_BYTES, "\U0001f600" * HEAD_BYTES])
def test_an_old_oversized_title_folds_as_replay_folds_it(tmp_path, title, title_first):
    folder = tmp_path / "s-old"
    old_log(folder, title, title_first=title_first)
    assert os.path.getsize(folder / "log.jsonl") > HEAD_BYTES
    expected = replay(folder / "log.jsonl").state
    assert len(expected.title) == 200 and expected.title.endswith("\u2026")
    assert row_state(folder) == expected


def test_a_bad_line_after_an_oversized_title_is_still_refused(tmp_path):
    folder = tmp_path / "s-old"
    old_log(folder, "t" * (2 * HEAD_BYTES))
    with open(folder / "log.jsonl", "a") as out:
        out.write('{"seq": 9, "type": "plan/mode", "at": "2026-11-29T18:41:00.000Z", "data": {"active": true}}\n')
    index = SessionIndex(tmp_path, is_id)
    assert index.rows(lambda s: None) == []  # not listed, like any log that does not replay


def test_kept_rows_follow_a_change_of_the_log_and_of_the_folder(tmp_path):
    sessions = tmp_path / ".dsh" / "sessions"
    with seeded(sessions) as store:
        pass
    index = SessionIndex(tmp_path, is_id)
    first = index.rows(lambda s: None)
    assert first[0].title == "a title" and first[0].refused is None
    assert index.rows(lambda s: None) is not first and index.rows(lambda s: None) == first
    with SessionStore.open(sessions, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
        at = store.state.last_at
    assert index.rows(lambda s: None)[0].updated_at == at
    (store.dir / "log.lock").unlink()
    (store.dir / "log.lock").symlink_to(tmp_path / "elsewhere")
    refused = index.rows(lambda s: None)[0]
    assert refused.refused == SessionRefusal(kind="unsafe-path", path=str(store.dir / "log.lock"), reason="is a symbolic link")
    assert not (tmp_path / "elsewhere").exists()


def test_saved_rows_serve_the_next_index_only_while_their_keys_match(tmp_path, monkeypatch):
    import msgspec

    from dshd.services import listing

    monkeypatch.setattr(listing, "SAVE_FROM", 1)
    sessions = tmp_path / "ws" / ".dsh" / "sessions"
    with seeded(sessions, "s1") as store:
        pass
    saved = tmp_path / "cache" / "rows.json"
    first = SessionIndex(tmp_path / "ws", is_id, saved=saved).rows(lambda s: None)
    assert saved.is_file() and first[0].title == "a title"
    # The next index uses the saved row as it is while the key holds (marked to tell) ...
    doc = msgspec.json.decode(saved.read_bytes())
    doc["rows"]["s1"][1]["title"] = "from the saved rows"
    saved.write_bytes(msgspec.json.encode(doc))
    assert SessionIndex(tmp_path / "ws", is_id, saved=saved).rows(lambda s: None)[0].title == "from the saved rows"
    # ... and folds the log again once it changed.
    with SessionStore.open(sessions, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
    again = SessionIndex(tmp_path / "ws", is_id, saved=saved).rows(lambda s: None)
    assert again[0].title == "a title" and again[0].updated_at == store.state.last_at
    # Rows saved for another workspace, or not well formed, are not used.
    doc = msgspec.json.decode(saved.read_bytes())
    doc["rows"]["s1"][1]["title"] = "another workspace's"
    doc["root"] = str(tmp_path / "other")
    saved.write_bytes(msgspec.json.encode(doc))
    assert SessionIndex(tmp_path / "ws", is_id, saved=saved).rows(lambda s: None)[0].title == "a title"
    saved.write_bytes(b"{not json")
    assert SessionIndex(tmp_path / "ws", is_id, saved=saved).rows(lambda s: None)[0].title == "a title"
