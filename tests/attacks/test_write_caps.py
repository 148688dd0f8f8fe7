"""H-7 for the write tools, end to end (the real dshd over stdio): content over
``[tools] maxWriteBytes`` is a failed result naming the cap, refused quickly; a diff sent
for approval or shown in chat is capped and says it was cut. Controls in the same tests:
content under the cap is written, a small diff is sent whole."""

from __future__ import annotations

import pytest

import json
import secrets
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from loopback_models import Call, LoopbackModelServer, Reply

from tests.e2e.conftest import PLAN_SECTION, write_workspace
from tests.e2e.support import log_path, of_type, read_log

KEY_ENV = "DSHD_E2E_WRITE_CAPS_KEY"
MB = 1024 * 1024


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def results(events: list[dict]) -> list[dict]:
    names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
    return [{"name": names[e["data"]["callId"]], **e["data"]} for e in of_type(events, "tool/result")]


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS


def sent_mib(notes: list[dict]) -> float:
    return sum(len(json.dumps(n)) for n in notes) / MB


@pytest.mark.slow
async def test_a_60_mb_write_is_refused_quickly_naming_the_cap(tmp_path, daemons):
    """A 60 MB write is refused while it streams: the call's arguments are over the cap
    (twice maxWriteBytes plus 1 MiB), so the daemon stops keeping them, sends no more than
    a preview of them live, records the call with no arguments and a failed result naming
    the cap; neither the daemon's memory nor what the editor (chat open) receives grows
    with the 60 MB, and the log verifies. Controls, in a first turn: a small write goes
    through; a 9 MB write (under the arguments cap, over maxWriteBytes) reaches the tool
    and is refused by maxWriteBytes, with its arguments whole in the log."""
    root = daemons.root
    (root / ".dsh" / "config.toml").write_text(f'[plan]\nsection = "{PLAN_SECTION}"\n')
    big = "x" * (60 * MB)
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(tool_calls=[Call("write_file", {"path": "small.txt", "content": "fits\n"})]),
            Reply(tool_calls=[Call("write_file", {"path": "nine.txt", "content": "y" * (9 * MB)})], piece=MB),
            Reply(text="first done"),
            Reply(tool_calls=[Call("write_file", {"path": "big.txt", "content": big})], piece=MB),
            Reply(text="done"),
        )
        config = {"model": {"provider": "openai", "model": "loopback-model", "baseUrl": server.base_url,
                            "apiKeyEnv": KEY_ENV, "timeoutS": 60, "maxRetries": 0},
                  "tools": {"approve": []}}
        client = await daemons.start(config=config, env={KEY_ENV: "sk-" + secrets.token_hex(16)})
        pid = client.lsp._server.pid
        created = await client.request("dsh/session/create", {})
        agent = created["agentId"]
        await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200})  # as an editor does
        first = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}, timeout=120)
        assert first["stopReason"] == "end-turn", first
        nine_sent = sent_mib(client.notifications)
        seen = len(client.notifications)
        reset_peak_rss(pid)
        before = peak_rss_kib(pid)
        started = time.monotonic()
        result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "again"}, timeout=120)
        elapsed = time.monotonic() - started
        grown_mib = (peak_rss_kib(pid) - before) / 1024
        big_sent = sent_mib(client.notifications[seen:])
    assert result["stopReason"] == "end-turn", result
    sid = created["sessionId"]
    events = read_log(root, sid)
    small, nine, refused = results(events)
    assert small["ok"] and (root / "small.txt").read_text() == "fits\n"  # control: under the cap
    # control: under the arguments cap the tool itself runs and refuses by maxWriteBytes
    assert not nine["ok"] and "over [tools] maxWriteBytes (8 MiB)" in nine["content"]
    [nine_call] = [e for e in of_type(events, "tool/call") if e["data"]["callId"] == nine["callId"]]
    assert len(nine_call["data"]["arguments"]["content"]) == 9 * MB
    assert not refused["ok"] and "over the cap of 17 MiB of JSON text per tool call" in refused["content"]
    assert "twice [tools] maxWriteBytes" in refused["content"] and "not run" in refused["content"]
    assert not (root / "big.txt").exists() and not (root / "nine.txt").exists()
    [call] = [e for e in of_type(events, "tool/call") if e["data"]["callId"] == refused["callId"]]
    assert call["data"]["name"] == "write_file" and call["data"]["arguments"] == {}
    log_mib = sum(p.stat().st_size for p in (root / ".dsh" / "sessions").rglob("*") if p.is_file()) / MB
    print(f"60 MB write: turn {elapsed:.1f} s; daemon peak RSS grew {grown_mib:.0f} MiB; the editor got "
          f"{big_sent:.2f} MiB of notifications (the 9 MB control's turn: {nine_sent:.1f} MiB); "
          f"session folder {log_mib:.1f} MiB")
    assert grown_mib < 150, grown_mib  # was ~440 MiB when the whole text was kept
    assert big_sent < 2, big_sent  # was ~121 MB when every piece went out and was recorded
    assert 9 < nine_sent < 40, nine_sent  # control: a recorded 9 MB call does reach the editor
    assert log_mib < 12, log_mib  # the 9 MB call's arguments; nothing of the 60 MB
    verify = subprocess.run(
        [sys.executable, "-m", "dshd", "log", "verify", str(log_path(root, sid)), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True, verify.stdout + verify.stderr
    assert elapsed < 120


async def test_an_approval_diff_and_an_edit_result_are_capped_and_say_so(workspace: Path, daemons):
    big = "".join(f"line {n}\n" for n in range(20_000))
    asked: list[dict] = []

    def approve(params: dict) -> dict:
        asked.append(params)
        return {"outcome": "allow-once"}

    write_workspace(
        workspace,
        [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "small.txt", "content": "one\n"}}]},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": big}}]},
            {"toolCalls": [{"name": "edit_file", "arguments": {"path": "big.txt", "oldText": "line", "newText": "row", "replaceAll": True}}]},
            {"text": "done"},
        ],
        plugins=["tools"],
        extra_config='\n[tools]\napprove = ["write"]\n',
    )
    daemons.trusted = True
    client = await daemons.start(approve=approve)
    created = await client.request("dsh/session/create", {})
    result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}, timeout=120)
    assert result["stopReason"] == "end-turn", result
    small, created_diff, edit_diff = (a["diff"] for a in asked)
    assert small == "--- /dev/null\n+++ b/small.txt\n@@ -0,0 +1 @@\n+one\n"  # control: whole
    assert created_diff.endswith("[diff cut at 2000 lines of 20003]\n") and len(created_diff.splitlines()) == 2001
    assert "diff cut at" in edit_diff and len(edit_diff) < 70 * 1024
    written, edited = results(read_log(workspace, created["sessionId"]))[1:]
    assert written["ok"] and edited["ok"] and (workspace / "big.txt").read_text().startswith("row 0\n")
    assert "diff cut at" in edited["content"] and len(edited["content"]) < 70 * 1024
    assert json.dumps(edited).count("row") < 10_000
