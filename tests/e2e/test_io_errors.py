"""Disk full and a read-only workspace answer `io-error` naming the path and the OS error,
never -32603 with a traceback; nothing acknowledged is lost, and the next write after
space returns succeeds (the log then verifies with `dshd log verify`).

The real `dshd serve` runs on a small tmpfs this test mounts (filled up with a file) and
on a read-only bind mount (as root, `chmod` cannot deny anything: a read-only mount is
how "permission denied" shows here). Needs root and mount(2); skipped otherwise.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import Daemon, write_workspace
from tests.e2e.support import log_path, of_type, read_log

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk))
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def bind_mount(tmp_path: Path):
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    try:
        mount("--bind", str(source), str(mounted))
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot bind-mount here: {exc}")
    yield mounted
    subprocess.run(["umount", "-l", str(mounted)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the file system has no byte left."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (1 << 16, 1 << 12, 1):
            while True:
                try:
                    out.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    return filler


def verify(log: Path) -> subprocess.CompletedProcess:
    dshd = Path(sys.executable).with_name("dshd")
    return subprocess.run([str(dshd), "log", "verify", str(log)], capture_output=True, text=True, timeout=60)


def assert_io_error(exc: JsonRpcException, name: str) -> dict:
    data = exc.data
    assert data["kind"] == "io-error", data
    assert data["errno"] == name and name in str(exc), (data, str(exc))
    assert data["path"] in str(exc) and data["path"].startswith("/")
    assert "Traceback" not in str(exc) and exc.code != -32603
    return data


async def test_disk_full_answers_io_error_loses_nothing_and_recovers(small_disk):
    root = write_workspace(small_disk / "ws", replies=[{"text": f"reply {i}"} for i in range(80)])
    daemons = Daemon(root)
    try:
        client = await daemons.start()
        opened = await client.request("dsh/session/create", {"title": "full disk"})
        agent, session_id = opened["agentId"], opened["sessionId"]
        # The control: with space, a prompt runs and is durable.
        assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "first"}))["stopReason"] == "end-turn"
        filler = fill(small_disk)
        acknowledged = read_log(root, session_id)
        # The log's last page may still hold a line or two: prompt until a write needs space.
        refused = None
        for i in range(40):
            try:
                await client.request("dsh/agent/prompt", {"agentId": agent, "text": f"while full {i}"})
            except JsonRpcException as exc:
                refused = exc
                break
            acknowledged = read_log(root, session_id)
        assert refused is not None, "no write ever needed space"
        data = assert_io_error(refused, "ENOSPC")
        print(f"\nafter {i} prompts: {refused.code} {refused}")
        assert data["path"] == str(log_path(root, session_id))
        # Still serving, and everything acknowledged is on disk.
        assert (await client.request("dsh/session/list", {}))["sessions"]
        assert read_log(root, session_id)[: len(acknowledged)] == acknowledged
        # Space returns: the next write succeeds.
        filler.unlink()
        after = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "after"})
        assert after["stopReason"] == "end-turn"
        events = read_log(root, session_id)
        assert events[: len(acknowledged)] == acknowledged
        assert [e["data"]["text"] for e in of_type(events, "user/message")][-1] == "after"
        await client.stop()
        checked = verify(log_path(root, session_id))
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        await daemons.stop_all()


@pytest.mark.slow
async def test_read_only_workspace_answers_io_error_and_works_again_when_writable(bind_mount):
    root = write_workspace(bind_mount / "ws", replies=[{"text": "one"}, {"text": "two"}])
    daemons = Daemon(root)
    try:
        client = await daemons.start()
        created = await client.request("dsh/session/create", {"title": "read-only"})
        session_id = created["sessionId"]
        await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "first"})
        await client.stop()
        before = log_path(root, session_id).read_bytes()

        mount("-o", "remount,ro,bind", str(bind_mount))
        client = await daemons.start()
        listed = (await client.request("dsh/session/list", {}))["sessions"]
        assert [r["sessionId"] for r in listed] == [session_id] and listed[0]["title"] == "read-only"
        with pytest.raises(JsonRpcException) as opening:
            await client.request("dsh/session/open", {"sessionId": session_id})
        assert assert_io_error(opening.value, "EROFS")["path"].startswith(str(root / ".dsh" / "sessions" / session_id))
        with pytest.raises(JsonRpcException) as creating:
            await client.request("dsh/session/create", {"title": "new"})
        assert_io_error(creating.value, "EROFS")
        await client.stop()
        assert log_path(root, session_id).read_bytes() == before

        # Writable again: the same session opens and writes, and the log verifies.
        mount("-o", "remount,rw,bind", str(bind_mount))
        client = await daemons.start()
        opened = await client.request("dsh/session/open", {"sessionId": session_id})
        assert (await client.request("dsh/agent/prompt", {"agentId": opened["agentId"], "text": "second"}))[
            "stopReason"
        ] == "end-turn"
        await client.stop()
        assert log_path(root, session_id).read_bytes().startswith(before)
        checked = verify(log_path(root, session_id))
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        await daemons.stop_all()
