"""H-7 for the write tools, end to end (the real dshd over stdio): content over
``[tools] maxWriteBytes`` is a failed result naming the cap, refused quickly; a diff sent
for approval or shown in chat is capped and says it was cut. Controls in the same tests:
content under the cap is written, a small diff is sent whole."""

from __future__ import annotations

import json
import secrets
import time
from datetime import datetime
from pathlib import Path

from loopback_models import Call, LoopbackModelServer, Reply

from .conftest import PLAN_SECTION, write_workspace
from .support import of_type, read_log

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


async def test_a_60_mb_write_is_refused_quickly_naming_the_cap(tmp_path, daemons):
    root = daemons.root
    (root / ".dsh" / "config.toml").write_text(f'[plan]\nsection = "{PLAN_SECTION}"\n')
    big = "x" * (60 * MB)
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(tool_calls=[Call("write_file", {"path": "small.txt", "content": "fits\n"})]),
            Reply(tool_calls=[Call("write_file", {"path": "big.txt", "content": big})], piece=MB),
            Reply(text="done"),
        )
        config = {"model": {"provider": "openai", "model": "loopback-model", "baseUrl": server.base_url,
                            "apiKeyEnv": KEY_ENV, "timeoutS": 60, "maxRetries": 0},
                  "tools": {"approve": []}}
        client = await daemons.start(config=config, env={KEY_ENV: "sk-" + secrets.token_hex(16)})
        pid = client.lsp._server.pid
        created = await client.request("dsh/session/create", {})
        before = peak_rss_kib(pid)
        started = time.monotonic()
        result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}, timeout=120)
        elapsed = time.monotonic() - started
        grown_mib = (peak_rss_kib(pid) - before) / 1024
    assert result["stopReason"] == "end-turn", result
    events = read_log(root, created["sessionId"])
    small, refused = results(events)
    assert small["ok"] and (root / "small.txt").read_text() == "fits\n"  # control: under the cap
    assert not refused["ok"] and "over [tools] maxWriteBytes (8 MiB)" in refused["content"]
    assert not (root / "big.txt").exists()
    # From the call's record to its result's: the tool's refusal (well under a second in
    # process, tests/test_tools_files.py) plus recording the 60 MB call itself; the stream
    # before it is the provider's.
    [call] = [e for e in of_type(events, "tool/call") if e["data"]["callId"] == refused["callId"]]
    [done] = [e for e in of_type(events, "tool/result") if e["data"]["callId"] == refused["callId"]]
    tool_s = (datetime.fromisoformat(done["at"]) - datetime.fromisoformat(call["at"])).total_seconds()
    assert tool_s < 10, tool_s
    log_mib = sum(p.stat().st_size for p in (root / ".dsh" / "sessions").rglob("*") if p.is_file()) / MB
    print(f"60 MB write: refused {tool_s:.3f} s after its call was recorded (turn: {elapsed:.1f} s); daemon peak RSS grew {grown_mib:.0f} MiB; session folder {log_mib:.0f} MiB")
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
