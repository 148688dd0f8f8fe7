"""`dshd run` as a process (the real command, the scripted model): in process when no
daemon holds the workspace, through the shared daemon when one does; its exit status,
its JSON lines, and that it never approves on its own (an attached editor may)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events
from tests.shared_daemon_support import DSHD, Runtime, connect_command

pytestmark = pytest.mark.slow

COMMAND = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]
PLUGINS = ["plan", "goals", "tools"]
WRITE = {"toolCalls": [{"name": "write_file", "arguments": {"path": "made.txt", "content": "hi\n"}}]}


@pytest.fixture
def runtime():
    r = Runtime()  # a private runtime folder: the person's own daemons are never reached
    yield r
    r.stop()


def run(runtime: Runtime, workspace: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        COMMAND + ["run", *args],
        cwd=workspace,
        env={**os.environ, **runtime.env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def lines(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_a_prompt_streams_its_text_and_json_lines_have_session_items_result(runtime, tmp_path):
    ws = write_workspace(tmp_path / "ws", [{"text": "Hello from the script."}, {"text": "Second."}], plugins=PLUGINS)
    text = run(runtime, ws, "hi")
    assert (text.returncode, text.stdout) == (0, "Hello from the script.\n"), text.stderr
    proc = run(runtime, ws, "hi", "--json")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    assert out[0]["type"] == "session" and out[0]["via"] == "in-process"
    assert out[-1]["type"] == "result" and out[-1]["stopReason"] == "end-turn" and out[-1]["exitCode"] == 0
    assert out[-1]["sessionId"] == out[0]["sessionId"] and isinstance(out[-1]["durationMs"], int)
    items = [line["item"] for line in out[1:-1]]
    assert all(line["type"] == "item" for line in out[1:-1])
    assert items[0]["kind"] == "user-message" and items[0]["text"] == "hi"
    assert [i["text"] for i in items if i["kind"] == "assistant-message" and not i["partial"]] == ["Hello from the script."]
    assert items[-1]["kind"] == "turn-end"
    # Nothing of the run is left holding the session: it opens again (--last) and runs.
    again = run(runtime, ws, "--last", "more", "--json")
    assert again.returncode == 0, again.stderr
    assert lines(again)[0]["sessionId"] == out[0]["sessionId"]
    assert [e["data"]["text"] for e in log_events(ws, out[0]["sessionId"]) if e["type"] == "user/message"] == ["hi", "more"]


def test_usage_errors_exit_1_with_their_kind_never_2(runtime, tmp_path):
    ws = write_workspace(tmp_path / "ws", [], plugins=PLUGINS)
    for args in (
        ["hi", "--goal", "x"],
        ["hi", "--max-rounds", "3"],
        ["--session", "../etc", "hi"],
        ["--session", "s-x", "--last", "hi"],
        [],
        ["--no-such-flag"],
    ):
        proc = run(runtime, ws, *args, "--json")
        assert proc.returncode == 1, (args, proc.stderr)
        result = lines(proc)[-1]
        assert result["type"] == "result" and result["error"]["kind"] == "invalid-params", args
        assert "Traceback" not in proc.stderr
    assert not (ws / ".dsh" / "sessions").exists()  # refused before any session was made


def test_approval_refused_at_once_then_an_attached_editor_answers_it(runtime, tmp_path):
    ws = write_workspace(tmp_path / "ws", [WRITE, {"text": "Could not write."}], plugins=PLUGINS)
    started = time.monotonic()
    proc = run(runtime, ws, "write it", "--json")
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < 20  # refused at once: no question timeout waited for
    assert not (ws / "made.txt").exists()
    out = lines(proc)
    result = out[-1]
    assert result["stopReason"] == "end-turn"  # the turn went on to its end
    assert result["personNeeded"] == [{"kind": "permission", "callId": result["personNeeded"][0]["callId"], "tool": "write_file"}]
    tool = [l["item"] for l in out if l["type"] == "item" and l["item"]["kind"] == "tool-call" and l["item"]["status"] == "failed"]
    assert tool and "headless run (dshd run) approves nothing on its own" in tool[-1]["result"]
    decisions = [e["data"] for e in log_events(ws, result["sessionId"]) if e["type"] == "permission/decision"]
    assert [(d["outcome"], d["by"]) for d in decisions] == [("reject", "fail-closed")]

    # The same run through the shared daemon, with an editor attached to the session that
    # answers approvals: the write goes through, and the run ends 0.
    asked = []
    ws.joinpath("script.json").write_text(json.dumps({"replies": [WRITE, {"text": "Written."}]}))  # a fresh model
    with RawDaemon(ws, env=runtime.env, command=connect_command()) as editor:
        editor.permit = lambda params: asked.append(params) or {"outcome": "allow-once"}
        editor.initialize(permissions=True)
        session = editor.request("dsh/session/create", {})["sessionId"]
        child = subprocess.Popen(
            COMMAND + ["run", "--session", session, "write it", "--json"],
            cwd=ws, env={**os.environ, **runtime.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            editor.request("dsh/session/list", {})  # the editor reads its messages (answers the ask) meanwhile
            time.sleep(0.05)
        stdout, stderr = child.communicate(timeout=10)
        assert child.returncode == 0, stderr
        out = [json.loads(line) for line in stdout.splitlines()]
        assert out[0]["via"] == "daemon" and out[-1]["exitCode"] == 0 and "personNeeded" not in out[-1]
        assert asked and asked[0]["tool"] == "write_file"
        joined = [n["params"] for n in editor.notifications if n["method"] == "dsh/session/clients"]
        assert any("dshd run" in [c["clientName"] for c in p["clients"]] for p in joined)
        assert editor.shutdown_and_exit() == 0
    assert (ws / "made.txt").read_text() == "hi\n"


def test_a_plan_review_is_never_approved_the_run_ends_with_the_plan(runtime, tmp_path):
    plan = "# Plan: tidy\n\n1. Tidy the parser.\n"
    review = {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}
    ws = write_workspace(tmp_path / "ws", [review, {"text": "Waiting."}, review, {"text": "Waiting."}], plugins=PLUGINS)
    text = run(runtime, ws, "--plan", "tidy up")
    assert text.returncode == 3, text.stderr
    assert plan in text.stdout and "not reviewed" in text.stderr
    proc = run(runtime, ws, "--plan", "tidy up", "--json")
    assert proc.returncode == 3, proc.stderr
    result = lines(proc)[-1]
    assert result["plan"] == plan and result["personNeeded"][0]["kind"] == "plan-review"
    events = log_events(ws, result["sessionId"])
    # Plan mode stays on: no plan/mode off was written, nothing approved it.
    assert [e["data"]["active"] for e in events if e["type"] == "plan/mode"] == [True]


def test_goal_runs_exit_0_complete_2_blocked_4_budget(runtime, tmp_path):
    complete = write_workspace(tmp_path / "a", [{"text": "working"}, {"toolCalls": [{"name": "goal_complete", "arguments": {}}]}], plugins=PLUGINS)
    proc = run(runtime, complete, "--goal", "Do it", "--json")
    assert proc.returncode == 0, proc.stderr
    assert lines(proc)[-1]["goal"]["phase"] == "complete"

    blocked = write_workspace(
        tmp_path / "b", [{"toolCalls": [{"name": "goal_block", "arguments": {"code": "needs-key", "message": "no key"}}]}], plugins=PLUGINS
    )
    proc = run(runtime, blocked, "--goal", "Do it")
    assert proc.returncode == 2 and "needs-key" in proc.stderr, proc.stderr

    budget = write_workspace(tmp_path / "c", [{"text": "r1"}, {"text": "r2"}, {"text": "r3"}], plugins=PLUGINS)
    proc = run(runtime, budget, "--goal", "Do it", "--max-rounds", "2", "--json")
    assert proc.returncode == 4, proc.stderr
    goal = lines(proc)[-1]["goal"]
    assert goal["blockedReason"]["code"] == "round-budget-exhausted" and goal["roundsStarted"] == 2
    # No prompt, no --goal: the session's goal resumes (its budget raised first).
    proc = run(runtime, budget, "--last", "--max-rounds", "3", "--json")
    assert proc.returncode == 4 and lines(proc)[-1]["goal"]["roundsStarted"] == 3, proc.stderr


def test_ctrl_c_during_a_slow_reply_cancels_the_turn_and_exits_130(runtime, tmp_path):
    ws = write_workspace(tmp_path / "ws", [{"text": "slow", "delayMs": 20000}], plugins=PLUGINS)
    proc = subprocess.Popen(
        COMMAND + ["run", "--json", "--goal", "Slowly"],
        cwd=ws, env={**os.environ, **runtime.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 20
    sessions = ws / ".dsh" / "sessions"
    while time.monotonic() < deadline:  # wait for the round's turn to be open
        logs = list(sessions.glob("*/log.jsonl")) if sessions.exists() else []
        if logs and b'"turn/open"' in logs[0].read_bytes():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - started < 10  # not the 20 s reply
    result = json.loads(stdout.splitlines()[-1])
    assert result["exitCode"] == 130 and result["stopReason"] == "cancelled"
    assert result["goal"]["activation"] == "disarmed"
    events = log_events(ws, result["sessionId"])
    assert events[-1]["type"] == "turn/close" and events[-1]["data"]["stopReason"] == "cancelled"
    verify = subprocess.run(COMMAND + ["log", "verify", str(sessions / result["sessionId"] / "log.jsonl")], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout


def test_a_goal_run_through_the_daemon_goes_on_when_the_editor_leaves(runtime, tmp_path):
    # The run is a client attached to the session: the editor leaving is not "the last
    # client left", so the goal is not disarmed and its rounds go on to complete.
    slow = [{"text": f"round {n}", "delayMs": 400} for n in (1, 2, 3)]
    ws = write_workspace(tmp_path / "ws", slow + [{"toolCalls": [{"name": "goal_complete", "arguments": {}}]}], plugins=PLUGINS)
    with RawDaemon(ws, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()
        session = editor.request("dsh/session/create", {})["sessionId"]
        child = subprocess.Popen(
            COMMAND + ["run", "--session", session, "--goal", "Three rounds", "--json"],
            cwd=ws, env={**os.environ, **runtime.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 30
        while not any(e["type"] == "turn/open" for e in log_events(ws, session)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert editor.shutdown_and_exit() == 0  # the editor leaves during round 1
        left_at = sum(1 for e in log_events(ws, session) if e["type"] == "turn/open")
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    result = json.loads(stdout.splitlines()[-1])
    assert result["goal"]["phase"] == "complete" and result["goal"]["roundsStarted"] >= 3
    assert sum(1 for e in log_events(ws, session) if e["type"] == "turn/open") > left_at


def test_on_a_terminal_stderr_shows_a_progress_line_round_tokens_tool(runtime, tmp_path):
    import pty

    replies = [
        {"toolCalls": [{"name": "read_file", "arguments": {"path": "script.json"}}], "delayMs": 200},
        {"toolCalls": [{"name": "goal_complete", "arguments": {}}], "delayMs": 200},
    ]
    ws = write_workspace(tmp_path / "ws", replies, plugins=PLUGINS)
    ours, theirs = pty.openpty()
    child = subprocess.Popen(
        COMMAND + ["run", "--goal", "Read it"], cwd=ws, env={**os.environ, **runtime.env},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=theirs,
    )
    os.close(theirs)
    stdout, _ = child.communicate(timeout=60)
    shown = b""
    while True:
        try:
            chunk = os.read(ours, 65536)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(ours)
    assert child.returncode == 0, shown
    text = shown.decode()
    assert "round 1 · 0 tokens · running Read script.json" in text
    assert text.count("\r\x1b[K") >= 2  # one line, redrawn in place
    # Control: stderr that is not a terminal gets no progress line (nothing but notices).
    piped = run(runtime, write_workspace(tmp_path / "ws2", replies, plugins=PLUGINS), "--goal", "Read it")
    assert piped.returncode == 0 and "\x1b[K" not in piped.stderr and "round 1" not in piped.stderr


def test_the_shared_daemon_killed_mid_run_ends_the_run_with_1_io_error(runtime, tmp_path):
    ws = write_workspace(tmp_path / "ws", [{"text": "slow", "delayMs": 20000}], plugins=PLUGINS)
    with RawDaemon(ws, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()  # starts the workspace's shared daemon
        daemon = runtime.daemon_pid()
        child = subprocess.Popen(
            COMMAND + ["run", "--goal", "Slowly", "--json"],
            cwd=ws, env={**os.environ, **runtime.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        sessions = ws / ".dsh" / "sessions"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            logs = list(sessions.glob("*/log.jsonl")) if sessions.exists() else []
            if logs and b'"turn/open"' in logs[0].read_bytes():
                break
            time.sleep(0.05)
        os.kill(daemon, signal.SIGKILL)
        stdout, stderr = child.communicate(timeout=20)  # not the 20 s reply, not forever
    assert child.returncode == 1, stderr
    result = json.loads(stdout.splitlines()[-1])
    assert json.loads(stdout.splitlines()[0])["via"] == "daemon"
    assert result["error"]["kind"] == "io-error" and "Traceback" not in stderr
