"""Every `dshd` command that writes JSON ends quietly when its reader leaves (`| head`,
`| true`): the real console script with its stdout a pipe whose reading end is closed,
either at once (before the command wrote anything) or after the first line. Its stderr
holds no traceback and no "Exception ignored", and its exit status is the one it has
when the pipe stays open (docs/choices.md: a reader that leaves changes nothing else).

Control: the same command with the pipe read to its end printed what was expected (more
than one line for the commands that print several), so the closed pipe did cut it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.shared_daemon_support import DSHD, Runtime

pytestmark = pytest.mark.slow

COMMAND = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]
# A slow reply: the run's later lines come well after its first one was read.
REPLIES = [{"text": "One.\nTwo.\nThree.", "delayMs": 300}, {"text": "Again."}]


@pytest.fixture
def runtime():
    r = Runtime()  # a private runtime folder: the person's own daemons are never reached
    yield r
    r.stop()


def spawn(runtime: Runtime, root: Path, args: list[str]) -> tuple[subprocess.Popen, int]:
    """The command with stdout on a pipe; (the process, the pipe's reading end)."""
    read_end, write_end = os.pipe()
    child = subprocess.Popen(
        COMMAND + args, cwd=root, env={**os.environ, **runtime.env}, stdin=subprocess.DEVNULL,
        stdout=write_end, stderr=subprocess.PIPE,
    )
    os.close(write_end)
    return child, read_end


def finish(child: subprocess.Popen) -> tuple[int, str]:
    _, err = child.communicate(timeout=90)
    return child.returncode, err.decode(errors="replace")


def open_pipe(runtime: Runtime, root: Path, args: list[str]) -> tuple[int, str, str]:
    """(status, stdout, stderr) with the pipe read to its end."""
    child, read_end = spawn(runtime, root, args)
    out = b""
    with os.fdopen(read_end, "rb") as reader:
        out = reader.read()
    code, err = finish(child)
    return code, out.decode(), err


def closed_at_once(runtime: Runtime, root: Path, args: list[str]) -> tuple[int, str]:
    """The reading end closed before the command started writing (`| true`)."""
    child, read_end = spawn(runtime, root, args)
    os.close(read_end)
    return finish(child)


def closed_after_first_line(runtime: Runtime, root: Path, args: list[str]) -> tuple[int, str, bytes]:
    """The first line read, then the reading end closed (`| head -1`)."""
    child, read_end = spawn(runtime, root, args)
    got = b""
    while not got.endswith(b"\n"):
        byte = os.read(read_end, 1)
        if not byte:
            break
        got += byte
    os.close(read_end)
    code, err = finish(child)
    return code, err, got


def quiet(err: str) -> bool:
    return "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err


@pytest.fixture
def workspace(tmp_path: Path, runtime: Runtime) -> tuple[Path, Path]:
    """A workspace with one session run to its end (a goal on it), and that session's log."""
    root = write_workspace(tmp_path / "ws", [{"text": "Seed."}], plugins=["plan", "goals", "tools"])
    seeded = subprocess.run(COMMAND + ["run", "seed", "--json"], cwd=root, env={**os.environ, **runtime.env},
                            capture_output=True, text=True, timeout=60)
    assert seeded.returncode == 0, seeded.stderr
    session = json.loads(seeded.stdout.splitlines()[0])["sessionId"]
    made = subprocess.run(COMMAND + ["goal", "create", "Ship", "it", "--json"], cwd=root, env={**os.environ, **runtime.env},
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    (root / "script.json").write_text(json.dumps({"replies": REPLIES}))
    return root, root / ".dsh" / "sessions" / session / "log.jsonl"


def commands(log: Path) -> list[list[str]]:
    return [
        ["goal", "status", "--json"],
        ["goal", "edit", "--max-rounds", "{n}", "--json"],  # a write: a new budget each time
        ["log", "verify", str(log), "--json"],
        ["log", "verify", str(log.parent / "nothing.jsonl"), "--json"],  # an error's JSON, exit 1
        ["log", "show", str(log)],
        ["doctor", "--json"],
        ["daemon", "status", "--json"],
    ]


def test_each_json_command_ends_quietly_on_a_pipe_closed_before_it_wrote(runtime, workspace):
    root, log = workspace
    for args in commands(log):
        code, out, err = open_pipe(runtime, root, [a.replace("{n}", "9") for a in args])
        assert out.strip() and quiet(err), (args, out, err)  # control: it does print
        if "--json" in args:
            json.loads(out)  # one JSON value
        closed_code, closed_err = closed_at_once(runtime, root, [a.replace("{n}", "10") for a in args])
        assert quiet(closed_err), (args, closed_err)
        assert closed_code == code, (args, closed_code, code, closed_err)


def test_dshd_run_json_ends_quietly_after_its_first_line_was_read_and_runs_to_its_end(runtime, workspace):
    root, log = workspace
    code, out, err = open_pipe(runtime, root, ["run", "more", "--json"])
    lines = out.splitlines()
    assert code == 0 and len(lines) > 3 and quiet(err), (out, err)  # control: many lines when read
    assert json.loads(lines[0])["type"] == "session" and json.loads(lines[-1])["type"] == "result"

    started = time.monotonic()
    closed_code, closed_err, first = closed_after_first_line(runtime, root, ["run", "again", "--json"])
    assert json.loads(first)["type"] == "session"
    assert quiet(closed_err) and closed_code == 0, closed_err
    assert time.monotonic() - started < 60
    # The run went on to its end with nobody reading: its turn is in the log, closed.
    from tests.e2e.raw_client import log_events

    session = json.loads(first)["sessionId"]
    texts = [e["data"]["text"] for e in log_events(root, session) if e["type"] == "user/message"]
    closes = [e for e in log_events(root, session) if e["type"] == "turn/close"]
    assert texts[-1] == "again" and closes and closes[-1]["data"]["stopReason"] == "end-turn"

    # Text output too (the assistant's lines, `| head -1`), and a pipe closed at once.
    closed_code, closed_err, first = closed_after_first_line(runtime, root, ["run", "--last", "text now"])
    assert quiet(closed_err) and closed_code == 0, closed_err
    closed_code, closed_err = closed_at_once(runtime, root, ["run", "--last", "--json", "at once"])
    assert quiet(closed_err) and closed_code == 0, closed_err


def test_dshd_log_show_ends_quietly_after_its_first_line(runtime, workspace):
    root, log = workspace
    code, out, err = open_pipe(runtime, root, ["log", "show", str(log)])
    assert code == 0 and len(out.splitlines()) > 3, out  # control: several lines
    closed_code, closed_err, first = closed_after_first_line(runtime, root, ["log", "show", str(log)])
    assert first and quiet(closed_err) and closed_code == 0, closed_err
