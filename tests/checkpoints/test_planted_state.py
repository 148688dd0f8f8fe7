"""State under .dsh/ that this user's dshd did not write on this machine is never applied
(W-5), in process: restore journals marked with another key, naming another folder, or
naming a checkpoint the session's local log does not have are moved aside, the files
untouched; the state key itself is refused when its folder or file could be someone
else's. Each with its positive control: the same thing made by dshd here is used.
The clone through the real daemon is tests/attacks/test_planted_state.py."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from agent_support import events_of, make_workspace

from dshd.checkpoints import ShadowRepo
from dshd.checkpoints.shadow import JOURNAL_NAME
from dshd.errors import DshError
from dshd.log import statekey
from dshd.services.checkpoints import CheckpointService
from dshd.services.checkpoints import _shared as shared_repos

PURPOSE = "checkpoints restore journal v2"


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch) -> Path:
    # State folders exist (an XDG_STATE_HOME that does not is not used, as dshd_connect does).
    for name in ("state", "someone-else"):
        (tmp_path / name).mkdir()
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def journal_bytes(root: Path, tree: str, paths: list[str], note: dict) -> bytes:
    """A journal as dshd writes it, marked with the key of the current XDG_STATE_HOME."""
    body = json.dumps({"version": 2, "root": str(root), "tree": tree, "paths": paths, "note": note}).encode()
    return statekey.mac(PURPOSE, body).encode() + b"\n" + body


def workspace_with_two_states(tmp_path: Path) -> tuple[Path, ShadowRepo, str]:
    """A workspace at "new" with a snapshot of "old": (root, repository, the old tree)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "keep.txt").write_text("old\n")
    shadow = ShadowRepo(root)
    old = shadow.snapshot().tree
    (root / "keep.txt").write_text("new\n")
    (root / "added.txt").write_text("new\n")
    shadow.snapshot()
    return root, shadow, old


def refused(root: Path) -> list[Path]:
    return sorted((root / ".dsh").glob("checkpoints.git.journal-refused-*"))


def test_a_journal_marked_with_another_key_is_moved_aside_never_applied(tmp_path: Path, monkeypatch):
    root, shadow, old = workspace_with_two_states(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "someone-else"))
    planted = journal_bytes(root, old, ["added.txt", "keep.txt"], {"by": "planted"})
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    journal = root / ".dsh" / "checkpoints.git" / JOURNAL_NAME
    journal.write_bytes(planted)
    again = ShadowRepo(root)
    assert again.recover() is None
    assert (root / "keep.txt").read_text() == "new\n" and (root / "added.txt").exists()
    [aside] = refused(root)
    assert aside.read_bytes() == planted and not journal.exists()
    assert again.journal_refused == (aside, "its mark is not of this user and machine")
    # Positive control: the same journal marked with this user's key is applied.
    journal.write_bytes(journal_bytes(root, old, ["added.txt", "keep.txt"], {"by": "dshd"}))
    assert ShadowRepo(root).recover() == {"by": "dshd"}
    assert (root / "keep.txt").read_text() == "old\n" and not (root / "added.txt").exists()


def test_a_journal_of_another_folder_is_refused(tmp_path: Path):
    root, shadow, old = workspace_with_two_states(tmp_path)
    journal = root / ".dsh" / "checkpoints.git" / JOURNAL_NAME
    journal.write_bytes(journal_bytes(tmp_path / "elsewhere", old, ["keep.txt"], {}))
    again = ShadowRepo(root)
    assert again.recover() is None
    assert (root / "keep.txt").read_text() == "new\n"
    [aside] = refused(root)
    assert again.journal_refused is not None and "another folder" in again.journal_refused[1]
    # Positive control: naming this folder, it is applied.
    journal.write_bytes(journal_bytes(root, old, ["keep.txt"], {}))
    assert ShadowRepo(root).recover() == {}
    assert (root / "keep.txt").read_text() == "old\n"


def test_a_repository_copied_from_another_key_is_moved_aside_with_its_journal(tmp_path: Path, monkeypatch):
    root, shadow, old = workspace_with_two_states(tmp_path)
    (root / ".dsh" / "checkpoints.git" / JOURNAL_NAME).write_bytes(journal_bytes(root, old, ["keep.txt"], {}))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "someone-else"))
    other = ShadowRepo(root)
    other.check()
    assert other.moved_aside is not None and other.moved_aside.name.startswith("checkpoints.git.foreign-")
    assert "owner mark" in other.moved_aside_reason
    assert (other.moved_aside / JOURNAL_NAME).exists() and (root / "keep.txt").read_text() == "new\n"
    assert other.recover() is None  # the fresh repository has no journal
    # Positive control: the owner's key accepts its own repository (moved back in place).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    shutil.rmtree(root / ".dsh" / "checkpoints.git")
    os.rename(other.moved_aside, root / ".dsh" / "checkpoints.git")
    mine = ShadowRepo(root)
    mine.check()
    assert mine.moved_aside is None and mine.recover() == {}
    assert (root / "keep.txt").read_text() == "old\n"


async def test_a_journal_is_applied_only_for_a_checkpoint_of_a_local_session_log(tmp_path: Path):
    (tmp_path / "a.txt").write_text("one\n")
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "two\n"}}]},
                                   {"text": "ok"}], config={"tools": {"approve": []}})
    agent = ws.create_session()
    await agent.prompt("go")
    before = events_of(agent, "checkpoint/taken")[0]
    sid, seq, tree = agent.session_id, before.seq, before.data.tree
    await ws.shutdown()
    journal = tmp_path / ".dsh" / "checkpoints.git" / JOURNAL_NAME
    wrong = [
        ({"sessionId": "s-0000000000000000000000000a", "checkpoint": seq, "files": ["a.txt"]}, "no local log"),
        ({"sessionId": sid, "checkpoint": seq + 1, "files": ["a.txt"]}, "is not the one it restores"),
        ({"sessionId": sid, "checkpoint": 10_000, "files": ["a.txt"]}, "no local log with checkpoint"),
        ({"checkpoint": seq, "files": ["a.txt"]}, "names no session"),
    ]
    for note, why in wrong:
        journal.write_bytes(journal_bytes(tmp_path, tree, ["a.txt"], note))
        ws = make_workspace(tmp_path, config={"tools": {"approve": []}})
        opened = ws.open_session(sid)
        service = opened.features.get(CheckpointService)
        assert (tmp_path / "a.txt").read_text() == "two\n", note
        assert not journal.exists()
        assert any(why in w for w in service.warnings), (note, service.warnings)
        assert events_of(opened, "checkpoint/restored") == []
        await ws.shutdown()
    assert len(refused(tmp_path)) == len(wrong)
    # Positive control: naming the session's own checkpoint and tree, it is applied and recorded.
    journal.write_bytes(journal_bytes(tmp_path, tree, ["a.txt"], {"sessionId": sid, "checkpoint": seq, "files": ["a.txt"]}))
    ws = make_workspace(tmp_path, config={"tools": {"approve": []}})
    opened = ws.open_session(sid)
    assert (tmp_path / "a.txt").read_text() == "one\n"
    assert [e.data.checkpoint for e in events_of(opened, "checkpoint/restored")] == [seq]
    await ws.shutdown()


def test_the_state_key_is_made_private_and_refused_where_others_could_reach_it(tmp_path: Path, own_state: Path):
    key = statekey.state_key()
    folder = own_state / "dsh"
    assert len(key) == 32 and statekey.state_key() == key
    assert (folder.stat().st_mode & 0o777) == 0o700 and ((folder / "state.key").stat().st_mode & 0o777) == 0o600
    for name, spoil in [
        ("linked-folder", lambda f: (shutil.rmtree(f), f.symlink_to(tmp_path))),
        ("loose-folder", lambda f: f.chmod(0o777)),
        ("loose-key", lambda f: (f / "state.key").chmod(0o644)),
        ("linked-key", lambda f: ((f / "state.key").unlink(), (f / "state.key").symlink_to(tmp_path / "k"))),
        ("short-key", lambda f: (f / "state.key").write_bytes(b"short")),
    ]:
        base = tmp_path / name
        base.mkdir()
        os.environ["XDG_STATE_HOME"] = str(base)
        statekey.state_key()  # positive control: made and accepted
        spoil(base / "dsh")
        statekey._keys.clear()
        with pytest.raises(DshError) as why:
            statekey.state_key()
        assert why.value.kind == "unsafe-path", name
    # Without a key the repository is trusted for nothing, and nothing is moved aside.
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "k").write_bytes(os.urandom(32))
    with pytest.raises(DshError):
        ShadowRepo(root).snapshot()
    assert not (root / ".dsh" / "checkpoints.git").exists()


async def test_chat_marks_made_with_another_key_are_not_used(tmp_path: Path, monkeypatch):
    """A session's chat-marks.json made by another user's dshd (a clone's) is not used: the
    chat is projected from the log's start. Control: the same file marked here is used."""
    from dshd.api import chat_marks
    from dshd.api.hub import Hub
    from tests.api.test_chat_marks import NEWEST, _talk
    from tests.api.test_chat_pages import Door

    monkeypatch.setattr(chat_marks, "MARK_EVERY", 10)
    monkeypatch.setattr(chat_marks, "SAVE_EVERY", 1)

    async def chat_from(state: str, session_id: str | None = None) -> tuple[str, int]:
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / state))
        workspace = make_workspace(tmp_path, _talk(12) if session_id is None else [])
        agent = workspace.create_session("s") if session_id is None else workspace.open_session(session_id)
        hub = Hub(Door())
        await hub.chat_page(agent, before_seq=NEWEST, limit=3)
        if session_id is None:
            for n in range(12):
                await agent.prompt(f"question {n}")
            await asyncio.sleep(0.5)  # the file is written off the loop
        found = agent.session_id, hub._feeds[agent.agent_id].chat_from
        await workspace.shutdown()
        return found

    session_id, _ = await chat_from("someone-else")
    path = tmp_path / ".dsh" / "sessions" / session_id / chat_marks.MARKS_NAME
    made = path.read_bytes()
    marks = json.loads(made)["marks"]
    assert len(marks) >= 2
    assert (await chat_from("someone-else", session_id))[1] == marks[-1]["seq"]  # control: its own key uses them
    path.write_bytes(made)
    assert (await chat_from("state", session_id))[1] == 0  # not ours: read from the start


async def test_what_the_person_is_told_is_one_escaped_line(tmp_path: Path):
    """The reason a repository is moved aside can name an entry a clone made: the warning is
    one line with control and bidi characters escaped (control: the name holds them)."""
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
                                   {"text": "ok"}], config={"tools": {"approve": []}})
    agent = ws.create_session()
    await agent.prompt("go")
    sid = agent.session_id
    await ws.shutdown()
    hostile = "\x1b]0;owned\x07\u202e\nFORGED"
    assert any(ord(c) < 32 or c == "\u202e" for c in hostile)
    (tmp_path / ".dsh" / "checkpoints.git" / hostile).write_text("x")
    shared_repos.clear()  # as a new daemon: the repository is checked again when opened
    ws = make_workspace(tmp_path, config={"tools": {"approve": []}})
    [warning] = ws.open_session(sid).features.get(CheckpointService).warnings
    assert "moved aside" in warning and "\n" not in warning and "\x1b" not in warning and "\u202e" not in warning
    await ws.shutdown()
