"""The checkpoints plugin and CheckpointService in process: a real Workspace, the scripted
model, the real tools, the real shadow repository (git) and the real log (SPEC K-1, K-2).
The end-to-end tests over the dshd process are tests/e2e/test_checkpoints.py."""

from __future__ import annotations

import json
import subprocess

import pytest
from agent_support import events_of, make_workspace, replay_strict

from dshd.errors import DshError
from dshd.services.checkpoints import CheckpointService

NO_ASKING = {"tools": {"approve": []}}


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def read(path: str) -> dict:
    return {"name": "read_file", "arguments": {"path": path}}


def service_of(agent) -> CheckpointService:
    found = agent.features.get(CheckpointService)
    assert found is not None
    return found


def taken(agent) -> list[tuple[int, str]]:
    return [(e.data.step, e.data.phase) for e in events_of(agent, "checkpoint/taken")]


async def test_a_write_step_is_snapshotted_and_restored(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    ws = make_workspace(
        tmp_path,
        [
            {"toolCalls": [read("a.txt")]},
            {"toolCalls": [write("a.txt", "two\n"), write("new/b.txt", "bee\n")]},
            {"text": "done"},
        ],
        config=NO_ASKING,
    )
    agent = ws.create_session()
    assert (await agent.prompt("go")).stop_reason == "end-turn"
    # The read-only step 1 takes none; step 2 one before and one after.
    assert taken(agent) == [(2, "before"), (2, "after")]
    before, after = events_of(agent, "checkpoint/taken")
    assert before.data.files == 2 and after.data.files == 3  # script.json, a.txt (+ new/b.txt)
    service = service_of(agent)
    [info] = await service.list()
    assert (info.seq, info.turn, info.step) == (before.seq, 1, 2)
    assert info.files == ("a.txt", "new/b.txt")
    diff = {f.path: f for f in await service.diff(info.seq)}
    assert diff["a.txt"].status == "modified" and "-two" in diff["a.txt"].diff and "+one" in diff["a.txt"].diff
    assert diff["new/b.txt"].status == "deleted"
    assert not any(f.changed_by_person for f in diff.values())
    outcome = await service.restore(info.seq, conversation=True)
    assert outcome.restored == ("a.txt", "new/b.txt") and outcome.forced == ()
    # The fork point: the step's request, the last event before its reply.
    header = [e for e in events_of(agent, "request/header") if e.data.step == 2][0]
    assert outcome.fork_at == header.seq
    assert (tmp_path / "a.txt").read_text() == "one\n" and not (tmp_path / "new").exists()
    [record] = events_of(agent, "checkpoint/restored")
    assert record.data.checkpoint == info.seq and record.data.files == ["a.txt", "new/b.txt"]
    # Restoring again changes nothing and flags nothing (the restore is what the agent left).
    assert await service.diff(info.seq) == []
    assert replay_strict(agent.store.path).seq == agent.store.state.seq
    await ws.shutdown()


async def test_unknown_seq_and_a_running_turn_are_refused(tmp_path):
    ws = make_workspace(
        tmp_path,
        [{"toolCalls": [write("a.txt", "x")]}, {"toolCalls": [write("a.txt", "y")], "delayMs": 400}, {"text": "ok"}],
        config=NO_ASKING,
    )
    agent = ws.create_session()
    service = service_of(agent)
    for bad in (0, 999, "1", True, None):
        with pytest.raises(DshError) as caught:
            await service.restore(bad)
        assert caught.value.kind == "invalid-params" and caught.value.data == {"field": "seq"}
    turn = agent.start_turn("go", cause="prompt")
    while not await service.list():
        await _tick()
    with pytest.raises(DshError) as caught:
        await service.restore((await service.list())[0].seq)
    assert caught.value.kind == "turn-open"
    await turn
    await ws.shutdown()


async def test_no_turn_opens_while_a_restore_runs(tmp_path):
    import asyncio

    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}, {"text": "later"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    service = service_of(agent)
    [info] = await service.list()
    restoring = asyncio.ensure_future(service.restore(info.seq))
    await asyncio.sleep(0)  # the restore holds turns before its first await
    with pytest.raises(DshError) as caught:
        await agent.prompt("now")
    assert caught.value.kind == "turn-open" and "restore" in caught.value.message
    with pytest.raises(DshError) as again:
        await service.restore(info.seq)
    assert again.value.kind == "turn-open"
    await restoring
    assert (await agent.prompt("now")).stop_reason == "end-turn"  # released
    await ws.shutdown()


async def test_disabled_takes_none_and_a_fork_has_its_parents_checkpoints(tmp_path):
    ws = make_workspace(
        tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config={**NO_ASKING, "checkpoints": {"enabled": False}}
    )
    agent = ws.create_session()
    await agent.prompt("go")
    assert taken(agent) == [] and await service_of(agent).list() == []
    assert not (tmp_path / ".dsh" / "checkpoints.git").exists()
    await ws.shutdown()

    root = tmp_path / "forks"
    root.mkdir()
    ws = make_workspace(root, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    parent = ws.create_session()
    await parent.prompt("go")
    fork = ws.fork(parent.agent_id)
    [info] = await service_of(fork).list()
    assert info == (await service_of(parent).list())[0]
    await service_of(fork).restore(info.seq)
    assert not (root / "a.txt").exists()
    assert events_of(parent, "checkpoint/restored") == []  # the fork's own record
    assert len(events_of(fork, "checkpoint/restored")) == 1
    await ws.shutdown()


async def test_a_workspace_that_is_not_a_git_repository_and_the_persons_git_untouched(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    ws = make_workspace(plain, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    assert taken(agent) == [(1, "before"), (1, "after")]
    await ws.shutdown()

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "kept.txt").write_text("kept\n")
    (repo / ".gitignore").write_text("ignored.log\n")
    (repo / "ignored.log").write_text("noise\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "init"], check=True)
    before = _tree_bytes(repo / ".git")
    ws = make_workspace(repo, [{"toolCalls": [write("kept.txt", "changed\n")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    [info] = await service_of(agent).list()
    assert info.files == ("kept.txt",)
    await service_of(agent).restore(info.seq)
    assert (repo / "kept.txt").read_text() == "kept\n"
    assert _tree_bytes(repo / ".git") == before
    await ws.shutdown()


def _tree_bytes(folder) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0.01)


def test_the_table_rejects_a_cap_out_of_range(tmp_path):
    with pytest.raises(DshError) as caught:
        make_workspace(tmp_path, config={"checkpoints": {"maxFileBytes": 1 << 40}})
    assert caught.value.kind == "invalid-config" and caught.value.data["key"] == "checkpoints.maxFileBytes"
    assert json.loads(json.dumps(caught.value.data))


async def test_a_lost_repository_keeps_the_list_and_fails_the_restore_plainly(tmp_path):
    import shutil

    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    seq = (await service_of(agent).list())[0].seq
    await ws.shutdown()
    shutil.rmtree(tmp_path / ".dsh" / "checkpoints.git")  # the person deleted it to start over
    ws = make_workspace(tmp_path, config=NO_ASKING)
    agent = ws.open_session(agent.session_id)
    [info] = await service_of(agent).list()
    assert (info.seq, info.files) == (seq, ())
    with pytest.raises(DshError) as caught:
        await service_of(agent).restore(seq)
    assert caught.value.kind == "io-error"
    assert (tmp_path / "a.txt").read_text() == "x" and events_of(agent, "checkpoint/restored") == []
    await ws.shutdown()


async def test_the_list_runs_git_off_the_event_loop_and_only_when_its_cache_misses(tmp_path):
    import threading

    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    service = service_of(agent)
    real_changes = service.repo.changes
    threads: list[threading.Thread] = []

    def changes(from_tree, to_tree):  # the real git call, with the thread it ran in noted
        threads.append(threading.current_thread())
        return real_changes(from_tree, to_tree)

    service.repo.changes = changes
    try:
        [warm] = await service.list()  # the "after" snapshot worked the files out already
        assert warm.files == ("a.txt",) and threads == []
        service._changed.clear()  # as after a restart: the cache is cold
        [cold] = await service.list()
        assert cold == warm
        assert len(threads) == 1 and threads[0] is not threading.main_thread()
        assert threading.current_thread() is threading.main_thread()  # positive control: the loop's thread
        assert await service.list() == [warm] and len(threads) == 1  # cached again
    finally:
        service.repo.changes = real_changes
    await ws.shutdown()


@pytest.mark.slow
async def test_a_restore_killed_in_another_process_is_finished_and_recorded_in_its_own_session(tmp_path):
    """The journal's restore belongs to session A; the first session opened after the kill is
    B: the files are finished on B's attach, and the record goes into A's log."""
    import os
    import signal
    import sys
    import time

    for n in range(300):
        (tmp_path / f"f{n:03}.txt").write_text(f"original {n}\n")
    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    a = ws.create_session()
    await a.prompt("go")
    b = ws.create_session()
    [info] = await service_of(a).list()
    tree = events_of(a, "checkpoint/taken")[0].data.tree
    a_id, b_id = a.session_id, b.session_id
    await ws.shutdown()
    for n in range(300):
        (tmp_path / f"f{n:03}.txt").write_text(f"changed {n}\n")
    paths = [f"f{n:03}.txt" for n in range(300)] + ["a.txt"]
    note = {"sessionId": a_id, "checkpoint": info.seq, "files": paths}
    child = subprocess.Popen([
        sys.executable, "-c",
        "import json, sys; from pathlib import Path; from dshd.checkpoints import ShadowRepo; "
        "args = json.loads(sys.argv[1]); ShadowRepo(Path(args['root'])).restore(args['tree'], args['paths'], args['note'])",
        json.dumps({"root": str(tmp_path), "tree": tree, "paths": paths, "note": note}),
    ])
    journal = tmp_path / ".dsh" / "checkpoints.git" / "dsh-restore.json"
    deadline = time.monotonic() + 20
    while not journal.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert journal.exists(), "the restore ended before the kill"

    ws = make_workspace(tmp_path, config=NO_ASKING)
    ws.open_session(b_id)  # attach: the restore is finished before anything else
    assert not journal.exists()
    assert all((tmp_path / f"f{n:03}.txt").read_text() == f"original {n}\n" for n in range(300))
    assert not (tmp_path / "a.txt").exists()
    a = ws.open_session(a_id)
    [record] = events_of(a, "checkpoint/restored")
    assert record.data.checkpoint == info.seq and len(record.data.files) == 301
    assert replay_strict(a.store.path).seq == a.store.state.seq
    await ws.shutdown()


async def test_a_name_that_is_not_utf8_is_restored_and_recorded_readably(tmp_path):
    import os

    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "x")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    service = service_of(agent)
    [info] = await service.list()
    odd = os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")  # Latin-1, as an old archive has it
    with open(odd, "wb") as handle:
        handle.write(b"mine\n")
    with pytest.raises(DshError) as refused:
        await service.restore(info.seq)
    assert refused.value.data == {"paths": ["caf\\xe9.txt"]}
    outcome = await service.restore(info.seq, force=True)
    assert not os.path.exists(odd) and not (tmp_path / "a.txt").exists()
    assert len(outcome.restored) == 2
    assert events_of(agent, "checkpoint/restored")[0].data.forced == ["caf\\xe9.txt"]
    assert replay_strict(agent.store.path).seq == agent.store.state.seq
    await ws.shutdown()


@pytest.mark.parametrize("recorded", [False, True], ids=["killed-before-the-record", "killed-after-the-record"])
async def test_a_restore_killed_between_its_files_and_its_journal_is_recorded_exactly_once(tmp_path, monkeypatch, recorded):
    """The journal goes only after the restore is in the log. A process killed after the
    files were back but before the record (stood in for by a journal that is not removed,
    and the record not made) gets its record on the next attach; one killed after the
    record but before the journal went gets no second record."""
    from dshd.checkpoints import ShadowRepo

    (tmp_path / "a.txt").write_text("one\n")
    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "two\n")]}, {"text": "ok"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    service = service_of(agent)
    [info] = await service.list()
    journal = tmp_path / ".dsh" / "checkpoints.git" / "dsh-restore.json"
    monkeypatch.setattr(ShadowRepo, "finish_restore", lambda self: None)  # the kill: the journal stays
    if not recorded:
        real_commit = agent.store.commit

        def dying_commit(type_, data, **kw):
            if type_ == "checkpoint/restored":
                raise SystemExit("killed")  # as if the process died here
            return real_commit(type_, data, **kw)

        monkeypatch.setattr(agent.store, "commit", dying_commit)
        with pytest.raises(SystemExit):
            await service.restore(info.seq)
    else:
        await service.restore(info.seq)
    assert journal.exists() and (tmp_path / "a.txt").read_text() == "one\n"
    session_id = agent.session_id
    monkeypatch.undo()
    await ws.shutdown()

    ws = make_workspace(tmp_path, config=NO_ASKING)
    agent = ws.open_session(session_id)
    assert not journal.exists()
    [record] = events_of(agent, "checkpoint/restored")
    assert record.data.checkpoint == info.seq and record.data.files == ["a.txt"]
    assert replay_strict(agent.store.path).seq == agent.store.state.seq
    await ws.shutdown()
