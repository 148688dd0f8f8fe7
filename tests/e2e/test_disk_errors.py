"""A turn that ends on a disk error says so where the person looks (V-9): the prompt's
answer and the chat name the path and the OS error, and the daemon goes on serving.

A real `dshd serve` on a workspace whose `.dsh/sessions` is a small tmpfs mounted for the
test (unmounted at the end): the disk fills up while the model is replying (the scripted
reply waits first), so the write of the reply fails with ENOSPC; either with room left for
the turn's close, or to the last byte (the close then waits for the next turn's open,
and says it then). Needs root (mount); skipped otherwise. (A read-only remount is refused
while the daemon holds the log open for writing, so EROFS cannot come mid-write this way.)
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events

pytestmark = pytest.mark.slow

BIG_REPLY = "x" * 300_000  # far more than the room left on the disk
LEFT_FREE = 32 * 1024  # a full disk still has room for the turn's close


@pytest.fixture
def small_disk(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    workspace = write_workspace(
        tmp_path / "ws",
        replies=[{"text": "first"}, {"text": BIG_REPLY, "delayMs": 1500}, {"text": "after"}, {"text": "again"}],
    )
    sessions = workspace / ".dsh" / "sessions"
    sessions.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "dshd-test-disk", str(sessions)], check=True)
    try:
        yield workspace, sessions
    finally:
        subprocess.run(["umount", "-l", str(sessions)], check=False)


def fill(folder: Path, leave: int) -> Path:
    """Write a file in ``folder`` until the disk is full, then give back ``leave`` bytes."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


def chat_text(daemon: RawDaemon) -> list[str]:
    return [n["params"]["item"].get("text", "") for n in daemon.notifications if n["method"] == "dsh/chat/item"]


def closes(workspace: Path, sid: str) -> list[dict]:
    return [e["data"] for e in log_events(workspace, sid) if e["type"] == "turn/close"]


@pytest.mark.parametrize("left", [LEFT_FREE, 0], ids=["room-for-the-close", "to-the-last-byte"])
def test_a_turn_stopped_by_a_full_disk_names_the_path_and_the_os_error(small_disk, left):
    workspace, sessions = small_disk
    code, words = "ENOSPC", os.strerror(errno.ENOSPC)
    daemon = RawDaemon(workspace)
    try:
        assert "result" in daemon.initialize()
        created = daemon.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        daemon.request("dsh/chat/get", {"agentId": agent})  # the chat's upserts come from now on
        assert daemon.request("dsh/agent/prompt", {"agentId": agent, "text": "hello"})["stopReason"] == "end-turn"

        daemon.next_id += 1
        prompt = daemon.next_id
        daemon.send({"jsonrpc": "2.0", "id": prompt, "method": "dsh/agent/prompt", "params": {"agentId": agent, "text": "write a lot"}})
        time.sleep(0.5)  # the turn is open, its reply on the way
        filler = fill(sessions, left)

        answer = daemon.response(prompt, timeout=30)
        error = answer.get("error")
        assert error is not None, f"the prompt ended without saying why: {answer}"
        assert error["data"]["kind"] == "io-error" and error["data"]["errno"] == code, error
        assert str(sessions) in error["message"] and words in error["message"] and code in error["message"], error
        assert error["data"]["path"].startswith(str(sessions)), error

        closed = [c for c in closes(workspace, sid) if c["turn"] == 2]
        if left:
            assert closed, "the close had room but was not written"
        if closed:  # the close fit: the chat's turn-end item says why, as the log does
            said = daemon_until(daemon, lambda: [t for t in chat_text(daemon) if t.startswith("Turn 2 stopped")])
            assert str(sessions) in said[0] and code in said[0] and words in said[0], said
            assert closed[0]["stopReason"] == "error" and code in closed[0]["failure"]
        filler.unlink()

        # The daemon goes on serving: the next prompt runs (a close the disk refused is
        # written first, saying why), and nothing acknowledged was lost.
        assert daemon.request("dsh/agent/prompt", {"agentId": agent, "text": "again"})["stopReason"] == "end-turn"
        said = daemon_until(daemon, lambda: [t for t in chat_text(daemon) if t.startswith("Turn 2 stopped")])
        assert str(sessions) in said[-1] and code in said[-1] and words in said[-1], said
        events = log_events(workspace, sid)
        assert [e["data"]["text"] for e in events if e["type"] == "user/message"] == ["hello", "write a lot", "again"]
        assert [c["stopReason"] for c in closes(workspace, sid)] == ["end-turn", "error", "end-turn"]
        assert code in closes(workspace, sid)[1]["failure"]
        print(f"\nleft {left} bytes: the close {'fit' if closed else 'waited for the next turn'}; said: {said[-1][:200]}")
        assert daemon.proc.poll() is None
    finally:
        daemon.proc.stdin.close()
        daemon.proc.wait(10)


def daemon_until(daemon: RawDaemon, check, timeout: float = 10):
    """Read the daemon's messages until ``check`` holds (a ping's answer flushes them)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: chat {chat_text(daemon)}"
        daemon.call("dsh/session/list", {})
        time.sleep(0.05)
    return found


def test_an_acp_prompt_stopped_by_a_full_disk_answers_with_the_path_and_the_os_error(small_disk, tmp_path):
    from tests.acp_door.raw import RawAcp

    workspace, sessions = small_disk
    raw = RawAcp(workspace, tmp_path / "acp.stderr")
    try:
        assert "result" in raw.initialize()
        sid = raw.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        first = raw.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]})
        assert first["result"]["stopReason"] == "end_turn", first
        raw.send({"jsonrpc": "2.0", "id": 77, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "write a lot"}]}})
        time.sleep(0.5)
        filler = fill(sessions, LEFT_FREE)
        error = raw.answer(77, timeout=30).get("error")
        assert error is not None and error["data"]["kind"] == "io-error", error
        assert str(sessions) in error["message"] and "ENOSPC" in error["message"] and os.strerror(errno.ENOSPC) in error["message"]
        filler.unlink()
        again = raw.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
        assert again["result"]["stopReason"] == "end_turn", again
        assert raw.proc.poll() is None
    finally:
        raw.close()
    assert raw.stdout_faults == []
