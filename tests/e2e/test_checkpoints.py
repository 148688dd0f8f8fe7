"""Checkpoints end to end (SPEC K-1, K-2) against the real `dshd serve` with the scripted
model and the real tools: a command's creations, changes and deletions undone by a restore;
a person's edit between steps protected until forced; the person's `.git` byte for byte the
same; kill -9 during a snapshot and during a restore (after the restart the files are all
before or all after, and `dshd log verify` passes); a folder that is not a git repository;
`[checkpoints] enabled = false`; a read-only step. The truth is read from the files and
the session logs on disk. The wire's own cases are tests/e2e/test_checkpoint_wire.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import log_path, of_type, read_log, wait_idle
from tests.sandbox_support import needs_sandbox

PLUGINS = ["tools", "checkpoints"]
SHADOW = Path(".dsh") / "checkpoints.git"


def write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def run(command: str) -> dict:
    return {"name": "run_command", "arguments": {"command": command}}


async def started(daemons, workspace: Path, replies: list[dict], *, extra_config: str = ""):
    write_workspace(workspace, replies, plugins=PLUGINS, extra_config=extra_config)
    client = await daemons.start(approve=lambda params: {"outcome": "allow-once"})
    created = await client.request("dsh/session/create", {"title": "checkpoints"})
    return client, created["agentId"], created["sessionId"]


async def prompt(client, agent: str, text: str, timeout: float = 15) -> None:
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": text})
    await wait_idle(client, agent, timeout)


def checkpoints_in(workspace: Path, session_id: str) -> list[tuple[int, str]]:
    return [(e["data"]["step"], e["data"]["phase"]) for e in of_type(read_log(workspace, session_id), "checkpoint/taken")]


def verify(workspace: Path, session_id: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "verify", str(log_path(workspace, session_id)), "--json"],
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but .dsh/, by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] != ".dsh" and path.is_file() and not path.is_symlink():
            out[str(rel)] = path.read_bytes()
    return out


@needs_sandbox
async def test_a_commands_creations_changes_and_deletions_are_undone(workspace: Path, daemons) -> None:
    (workspace / "keep.txt").write_text("keep\n")
    (workspace / "change.txt").write_text("before\n")
    (workspace / "gone.txt").write_text("deleted by the command\n")
    (workspace / "deep").mkdir()
    (workspace / "deep" / "old.txt").write_text("old\n")
    command = (
        "mkdir -p made/inner && echo new > made/inner/n.txt && echo after > change.txt"
        " && rm gone.txt && rm -r deep && printf '\\000\\001' > made/bin.dat"
    )
    client, agent, sid = await started(daemons, workspace, [{"toolCalls": [run(command)]}, {"text": "done"}])
    before = files_of(workspace)
    await prompt(client, agent, "shuffle the files")
    results = of_type(read_log(workspace, sid), "tool/result")
    assert results[0]["data"]["ok"], results[0]["data"]["content"]
    assert (workspace / "made" / "inner" / "n.txt").exists() and not (workspace / "gone.txt").exists()
    assert checkpoints_in(workspace, sid) == [(1, "before"), (1, "after")]

    [info] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    assert set(info["files"]) == {"change.txt", "gone.txt", "deep/old.txt", "made/inner/n.txt", "made/bin.dat"}
    files = {f["path"]: f for f in (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": info["seq"]}))["files"]}
    assert {p: f["status"] for p, f in files.items()} == {
        "change.txt": "modified", "gone.txt": "added", "deep/old.txt": "added",
        "made/inner/n.txt": "deleted", "made/bin.dat": "deleted",
    }
    assert files["made/bin.dat"]["binary"] is True and not any(f["changedByPerson"] for f in files.values())

    done = await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": info["seq"]})
    assert sorted(done["restored"]) == sorted(files) and done["forced"] == []
    assert files_of(workspace) == before
    assert not (workspace / "made").exists()  # folders the command made go with their files
    [record] = of_type(read_log(workspace, sid), "checkpoint/restored")
    assert record["data"]["checkpoint"] == info["seq"] and "turn" not in record
    assert verify(workspace, sid)["ok"] is True

    shown = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "show", str(log_path(workspace, sid))], capture_output=True, text=True
    )
    assert "checkpoint/taken" in shown.stdout and "checkpoint before step 1: tree " in shown.stdout
    assert f"restored 5 files to checkpoint {info['seq']}" in shown.stdout


async def test_a_persons_edit_between_steps_is_protected_and_their_git_untouched(workspace: Path, daemons) -> None:
    git = ["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "app.py").write_text("a = 1\n")
    (workspace / "build.log").write_text("ignored by git, so by checkpoints\n")
    subprocess.run(git + ["add", "app.py", ".gitignore"], check=True)
    subprocess.run(git + ["commit", "-qm", "init"], check=True)
    (workspace / "staged.txt").write_text("in the person's index only\n")
    subprocess.run(git + ["add", "staged.txt"], check=True)
    dot_git = {p: b for p, b in _all_bytes(workspace / ".git").items()}

    replies = [
        {"toolCalls": [write("app.py", "a = 2\n")]},
        {"text": "step one done"},
        {"toolCalls": [write("app.py", "a = 3\n")]},
        {"text": "step two done"},
    ]
    client, agent, sid = await started(daemons, workspace, replies)
    await prompt(client, agent, "a = 2")
    (workspace / "notes.md").write_text("the person's own notes\n")  # between the steps
    await prompt(client, agent, "a = 3")
    first, second = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    assert (first["turn"], second["turn"]) == (1, 2) and first["files"] == second["files"] == ["app.py"]
    taken = of_type(read_log(workspace, sid), "checkpoint/taken")
    assert all(e["data"]["files"] == 4 for e in taken[:2])  # .gitignore, app.py, script.json, staged.txt
    (workspace / "build.log").write_text("more noise\n")  # ignored: never the person's change

    # The second step's checkpoint: the person's notes came before it, so nothing of theirs.
    files = {f["path"]: f for f in (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": second["seq"]}))["files"]}
    assert set(files) == {"app.py"} and not files["app.py"]["changedByPerson"]
    # The first: the notes would go, and they are the person's.
    files = {f["path"]: f for f in (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": first["seq"]}))["files"]}
    assert {p: f["changedByPerson"] for p, f in files.items()} == {"app.py": False, "notes.md": True}
    with pytest.raises(Exception) as refused:
        await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": first["seq"]})
    assert refused.value.data == {"kind": "person-changed", "paths": ["notes.md"]}
    assert (workspace / "app.py").read_text() == "a = 3\n" and (workspace / "notes.md").exists()
    done = await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": first["seq"], "force": True})
    assert done == {"restored": ["app.py", "notes.md"], "forced": ["notes.md"]}
    assert (workspace / "app.py").read_text() == "a = 1\n" and not (workspace / "notes.md").exists()
    assert (workspace / "build.log").read_text() == "more noise\n"

    assert _all_bytes(workspace / ".git") == dot_git  # HEAD, index, objects: not a byte changed
    status = subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True, check=True).stdout
    assert "A  staged.txt" in status
    assert verify(workspace, sid)["ok"] is True


def _all_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


async def test_a_folder_without_git_disabled_checkpoints_and_a_read_only_step(workspace: Path, daemons, tmp_path) -> None:
    assert not (workspace / ".git").exists()
    (workspace / "a.txt").write_text("one\n")
    replies = [
        {"toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}, {"name": "list_files", "arguments": {}}]},
        {"toolCalls": [write("a.txt", "two\n")]},
        {"text": "done"},
    ]
    client, agent, sid = await started(daemons, workspace, replies)
    await prompt(client, agent, "read, then write")
    # Step 1 only read: no checkpoint. Step 2 wrote: one before it, one after.
    assert checkpoints_in(workspace, sid) == [(2, "before"), (2, "after")]
    [info] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": info["seq"]})
    assert (workspace / "a.txt").read_text() == "one\n"

    off = tmp_path / "off"
    off.mkdir()
    write_workspace(off, [{"toolCalls": [write("a.txt", "x\n")]}, {"text": "done"}], plugins=PLUGINS,
                    extra_config="\n[checkpoints]\nenabled = false\n")
    client = await daemons.__class__(off).start(approve=lambda params: {"outcome": "allow-once"})
    try:
        created = await client.request("dsh/session/create", {})
        await prompt(client, created["agentId"], "write")
        assert (off / "a.txt").read_text() == "x\n"
        assert checkpoints_in(off, created["sessionId"]) == []
        assert (await client.request("dsh/checkpoint/list", {"agentId": created["agentId"]})) == {"checkpoints": []}
        assert not (off / SHADOW).exists()
    finally:
        await client.stop()


# ---- kill -9 -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_kill_during_a_snapshot_leaves_the_files_and_a_log_that_verifies(workspace: Path, daemons) -> None:
    # Big incompressible files make the first snapshot take long enough to be killed in.
    (workspace / "big").mkdir()
    for n in range(40):
        (workspace / "big" / f"{n}.bin").write_bytes(os.urandom(1_000_000))
    replies = [{"toolCalls": [write("a.txt", "written\n")]}, {"text": "done"}]
    client, agent, sid = await started(daemons, workspace, replies)
    before = {p: hashlib.sha256(b).hexdigest() for p, b in files_of(workspace).items()}
    # The snapshot hashes the files into the shadow index while git holds its lock file.
    lock = workspace / SHADOW / "index.lock"
    prompted = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "write"}))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not lock.exists() and loop.time() < deadline:
        await asyncio.sleep(0.0005)
    client.lsp._server.kill()
    await client.lsp._server.wait()
    prompted.cancel()
    events = read_log(workspace, sid)
    assert events[-1]["type"] == "tool/call" and of_type(events, "checkpoint/taken") == []  # killed in the snapshot
    assert {p: hashlib.sha256(b).hexdigest() for p, b in files_of(workspace).items()} == before
    verify(workspace, sid)

    # The next daemon closes the turn, and the next step's snapshot works (no stale lock).
    (workspace / "script.json").write_text(json.dumps({"replies": [{"toolCalls": [write("a.txt", "again\n")]}, {"text": "ok"}]}))
    again = await daemons.start(approve=lambda params: {"outcome": "allow-once"})
    opened = await again.request("dsh/session/open", {"sessionId": sid})
    await prompt(again, opened["agentId"], "write again", timeout=30)
    assert (workspace / "a.txt").read_text() == "again\n"
    events = read_log(workspace, sid)
    assert of_type(events, "turn/close")[0]["data"]["stopReason"] == "interrupted"
    assert [(e["turn"], e["data"]["phase"]) for e in of_type(events, "checkpoint/taken")] == [(2, "before"), (2, "after")]
    assert verify(workspace, sid)["ok"] is True


@pytest.mark.slow
async def test_kill_during_a_restore_is_finished_when_the_daemon_starts_again(workspace: Path, daemons) -> None:
    count = 200
    for n in range(count):
        (workspace / f"f{n:03}.txt").write_text(f"original {n}\n")
    client, agent, sid = await started(daemons, workspace, [{"toolCalls": [write("a.txt", "x\n")]}, {"text": "ok"}])
    original = files_of(workspace)
    await prompt(client, agent, "write")
    [info] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    for n in range(count):  # the person rewrites them all: the forced restore puts all back
        (workspace / f"f{n:03}.txt").write_text(f"changed {n}\n")
    journal = workspace / SHADOW / "dsh-restore.json"
    restore = asyncio.ensure_future(
        client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": info["seq"], "force": True})
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not journal.exists() and not restore.done() and loop.time() < deadline:
        await asyncio.sleep(0.0005)
    client.lsp._server.kill()
    await client.lsp._server.wait()
    restore.cancel()
    assert journal.exists(), "the restore ended before the kill: make it slower"

    # The next daemon finishes the restore when the session is opened, and records it.
    again = await daemons.start()
    await again.request("dsh/session/open", {"sessionId": sid})
    assert not journal.exists()
    assert files_of(workspace) == original
    [record] = of_type(read_log(workspace, sid), "checkpoint/restored")
    assert record["data"]["checkpoint"] == info["seq"] and len(record["data"]["forced"]) == count
    assert verify(workspace, sid)["ok"] is True
