"""A cloned repository's `.dsh/` cannot make the daemon write or cut a byte outside it.

Each test pre-seeds `.dsh/sessions/<id>/` and lays a link where a session file or folder
belongs, pointing at a file outside the workspace (standing in for `~/.bashrc`), then
drives the real `dshd serve` over stdio: the list shows the session as refused, opening
it is `unsafe-path` naming the link, and every byte outside is unchanged (the target and
the link itself). The positive control in the same test: a session laid out the same
way without the link is listed, opens and writes as usual.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from dshd.agent.workspace import new_session_id
from dshd.services.store import SessionStore
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

ORIGINAL = b"echo 'the person's own shell start-up file'\n"


def seed_session(root: Path, title: str = "seeded") -> str:
    """A session as a daemon leaves it: log, lock file, checkpoint."""
    session_id = new_session_id()
    with SessionStore.create(root / ".dsh" / "sessions", session_id, title=title) as store:
        store.commit("plan/mode", {"active": False}, writer="plan")
    return session_id


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: a file's bytes, a link's target (links not followed)."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_file():
                seen[rel] = path.read_bytes()
    return seen


def outside(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_bytes(ORIGINAL)
    return home


async def expect_unsafe(request, path: Path) -> dict:
    with pytest.raises(JsonRpcException) as info:
        await request
    data = info.value.data
    assert data["kind"] == "unsafe-path", data
    assert data["path"] == str(path), data
    assert str(path) in str(info.value)
    assert "Traceback" not in str(info.value)
    return data


async def opens_and_writes(client, root: Path, session_id: str) -> None:
    """The positive control: the session opens, a prompt runs, its log grows."""
    before = len(read_log(root, session_id))
    opened = await client.request("dsh/session/open", {"sessionId": session_id})
    result = await client.request("dsh/agent/prompt", {"agentId": opened["agentId"], "text": "hello"})
    assert result["stopReason"] == "end-turn"
    events = read_log(root, session_id)
    assert len(events) > before and of_type(events, "turn/close")


def rows_by_id(listed: dict) -> dict[str, dict]:
    return {row["sessionId"]: row for row in listed["sessions"]}


@pytest.mark.parametrize(
    "name", ["projection.json.tmp", "log.lock", "log.jsonl", "projection.json", "torn-1.bin", "chat-marks.json", "chat-marks.json.tmp"]
)
async def test_a_session_file_that_is_a_link_is_refused_and_nothing_outside_changes(tmp_path, daemons, name):
    root = write_workspace(daemons.root, replies=[{"text": "fine"}])
    home = outside(tmp_path)
    good, bad = seed_session(root, "good"), seed_session(root, "bad")
    link = root / ".dsh" / "sessions" / bad / name
    target = home / ".bashrc"
    if name == "log.jsonl":
        # The target holds a sound log with a torn tail: following the link would cut it.
        target.write_bytes(link.read_bytes() + b'{"seq": 3, "ty')
    elif name == "projection.json":
        target.write_bytes(link.read_bytes())  # a checkpoint that matches: tempting to trust
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    before = snapshot(tmp_path / "home")

    client = await daemons.start()
    rows = rows_by_id(await client.request("dsh/session/list", {}))
    assert rows[bad]["refused"] == {"kind": "unsafe-path", "path": str(link), "reason": "is a symbolic link"}
    assert "refused" not in rows[good] and rows[good]["title"] == "good"
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": bad}), link)
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": bad, "reload": True}), link)
    await opens_and_writes(client, root, good)
    await client.stop()

    assert snapshot(tmp_path / "home") == before
    assert link.is_symlink() and os.readlink(link) == str(target)


async def test_a_session_folder_that_is_a_link_is_refused(tmp_path, daemons):
    root = write_workspace(daemons.root, replies=[{"text": "fine"}])
    home = outside(tmp_path)
    good, bad = seed_session(root, "good"), seed_session(root, "bad")
    folder = root / ".dsh" / "sessions" / bad
    shutil.move(folder, home / "elsewhere")
    folder.symlink_to(home / "elsewhere")
    before = snapshot(home)

    client = await daemons.start()
    rows = rows_by_id(await client.request("dsh/session/list", {}))
    assert rows[bad]["refused"]["path"] == str(folder) and rows[bad]["refused"]["reason"] == "is a symbolic link"
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": bad}), folder)
    await opens_and_writes(client, root, good)
    await client.stop()
    assert snapshot(home) == before


async def test_a_fifo_where_the_log_belongs_is_refused_without_blocking(tmp_path, daemons):
    root = write_workspace(daemons.root, replies=[{"text": "fine"}])
    good, bad = seed_session(root, "good"), seed_session(root, "bad")
    log = root / ".dsh" / "sessions" / bad / "log.jsonl"
    log.unlink()
    os.mkfifo(log)
    client = await daemons.start()
    rows = rows_by_id(await client.request("dsh/session/list", {}, timeout=10))
    assert rows[bad]["refused"]["reason"] == "is not a regular file"
    data = await expect_unsafe(client.request("dsh/session/open", {"sessionId": bad}, timeout=10), log)
    assert data["reason"] == "is not a regular file"
    await opens_and_writes(client, root, good)


@pytest.mark.parametrize("which", [".dsh", ".dsh/sessions"])
async def test_dsh_or_its_sessions_folder_as_a_link_is_refused(tmp_path, daemons, which):
    root = write_workspace(daemons.root, replies=[{"text": "fine"}, {"text": "again"}])
    home = outside(tmp_path)
    session_id = seed_session(root)
    # Positive control first: the same layout without the link opens and writes.
    client = await daemons.start()
    assert [r["sessionId"] for r in (await client.request("dsh/session/list", {}))["sessions"]] == [session_id]
    await opens_and_writes(client, root, session_id)
    await client.stop()

    folder = root / which
    # `.dsh/sessions` leads outside the workspace. `.dsh` leads to a folder inside it: the
    # configuration in it is then still read (a `.dsh` leading outside makes the daemon
    # refuse its config.toml before any session is looked at), and the link is refused all
    # the same, wherever it points.
    moved = home / "moved" if which == ".dsh/sessions" else root / "moved-dsh"
    shutil.move(folder, moved)
    folder.symlink_to(moved)
    watched = moved.parent
    before = snapshot(watched)

    client = await daemons.start()
    await expect_unsafe(client.request("dsh/session/list", {}), folder)
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": session_id}), folder)
    await expect_unsafe(client.request("dsh/session/create", {"title": "new"}), folder)
    await client.stop()
    assert snapshot(watched) == before
    assert folder.is_symlink()


async def test_dsh_gitignore_as_a_link_refuses_a_new_session_and_is_never_written(tmp_path, daemons):
    root = write_workspace(daemons.root)
    home = outside(tmp_path)
    gitignore = root / ".dsh" / ".gitignore"
    gitignore.symlink_to(home / ".bashrc")
    before = snapshot(home)
    client = await daemons.start()
    await expect_unsafe(client.request("dsh/session/create", {"title": "new"}), gitignore)
    assert not (root / ".dsh" / "sessions").exists()
    # Positive control: without the link the first session writes our .gitignore.
    gitignore.unlink()
    created = await client.request("dsh/session/create", {"title": "new"})
    assert created["sessionId"] and "sessions/" in gitignore.read_text()
    await client.stop()
    assert snapshot(home) == before


async def test_files_and_folders_where_the_other_belongs_are_refused(tmp_path, daemons):
    root = write_workspace(daemons.root, replies=[{"text": "fine"}])
    good, as_file, log_as_folder = seed_session(root, "good"), seed_session(root), seed_session(root)
    sessions = root / ".dsh" / "sessions"
    shutil.rmtree(sessions / as_file)
    (sessions / as_file).write_text("not a folder")
    (sessions / log_as_folder / "log.jsonl").unlink()
    (sessions / log_as_folder / "log.jsonl").mkdir()
    client = await daemons.start()
    rows = rows_by_id(await client.request("dsh/session/list", {}))
    assert rows[as_file]["refused"]["reason"] == "is a file, not a folder"
    assert rows[log_as_folder]["refused"]["reason"] == "is a folder, not a regular file"
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": as_file}), sessions / as_file)
    await expect_unsafe(client.request("dsh/session/open", {"sessionId": log_as_folder}), sessions / log_as_folder / "log.jsonl")
    await opens_and_writes(client, root, good)  # the control
    await client.stop()
    # .dsh/sessions itself a file: the list, an open and a create are refused, nothing made.
    shutil.rmtree(sessions)
    sessions.write_text("not a folder")
    client = await daemons.start()
    data = await expect_unsafe(client.request("dsh/session/list", {}), sessions)
    assert data["reason"] == "is a file, not a folder"
    await expect_unsafe(client.request("dsh/session/create", {"title": "new"}), sessions)
    assert sessions.read_text() == "not a folder"
