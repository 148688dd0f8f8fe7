"""`dshd log verify|show` (SPEC section 7), run as the real console script / module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from log.test_log_sample import SAMPLE

DSHD = [sys.executable, "-m", "dshd"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(DSHD + list(args), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "log.jsonl"
    shutil.copy(SAMPLE, path)
    return path


def test_verify_sound_log_exit_0_with_summary(sample):
    proc = run("log", "verify", str(sample))
    assert proc.returncode == 0 and proc.stderr == ""
    assert "sound: 52 events, session sample-7c1e" in proc.stdout
    assert "plan mode: off" in proc.stdout
    assert "g-7f3a2c rev 7 complete, 4/5 rounds" in proc.stdout


def test_verify_json_sound(sample):
    proc = run("log", "verify", str(sample), "--json")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["ok"] is True and out["events"] == 52 and out["plan"] == {"active": False}
    goal = out["goal"]
    assert goal["id"] == "g-7f3a2c" and goal["revision"] == 7 and goal["phase"] == "complete"
    assert goal["roundsStarted"] == 4 and goal["maxRounds"] == 5 and goal["roundsLeft"] == 1
    # The sample predates token usage: it stays valid and counts no tokens.
    assert goal["tokensUsed"] == 0 and "maxTokens" not in goal
    assert set(out) == {"ok", "events", "plan", "goal"}


def test_verify_and_show_report_tokens_and_the_token_budget(tmp_path):
    from dshd.services.store import SessionStore
    from log.test_log_sample import Session, snapshot

    with SessionStore.create(tmp_path, "tokens") as store:
        s = Session(store)
        s.goal(snapshot("create", "g1", 1, "active", tokens=0, max_tokens=500))
        s.turn("round 1", cause="continuation", goal_round={"goalId": "g1", "round": 1, "revision": 1}, usage=(100, 20))
        s.turn("a person's question", usage=(4000, 400))
        s.goal(snapshot("pause", "g1", 2, "paused", rounds=1, tokens=120, max_tokens=500))
    path = tmp_path / "tokens" / "log.jsonl"
    proc = run("log", "verify", str(path), "--json")
    goal = json.loads(proc.stdout)["goal"]
    assert proc.returncode == 0 and (goal["tokensUsed"], goal["maxTokens"]) == (120, 500)
    proc = run("log", "verify", str(path))
    assert "g1 rev 2 paused, 1/3 rounds, 120/500 tokens" in proc.stdout
    proc = run("log", "show", str(path))
    assert proc.returncode == 0
    assert "[assistant] Done with turn 1.  (100 in + 20 out tokens)" in proc.stdout
    assert "goal g1 pause -> rev 2 paused, 1/3 rounds, 120/500 tokens" in proc.stdout


def test_verify_names_first_bad_line(sample):
    lines = sample.read_bytes().splitlines(keepends=True)
    lines[9] = lines[9].replace(b'"seq":10', b'"seq":12')
    lines[20] = b"garbage\n"  # a later bad line is not the first one
    sample.write_bytes(b"".join(lines))
    proc = run("log", "verify", str(sample))
    assert proc.returncode == 1
    assert "line 10, seq 12: seq gap: expected 10, got 12" in proc.stdout
    proc = run("log", "verify", str(sample), "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout) == {"ok": False, "line": 10, "seq": 12, "reason": "seq gap: expected 10, got 12"}


def test_verify_reports_torn_tail_without_cutting_or_locking(sample):
    with open(sample, "ab") as f:
        f.write(b'{"type":"plan/mode","se')
    before = sample.read_bytes()
    proc = run("log", "verify", str(sample), "--json")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["ok"] is True and out["events"] == 52
    assert out["tornTail"] == {"offset": len(before) - 23, "length": 23}
    human = run("log", "verify", str(sample))
    assert human.returncode == 0 and "torn tail: 23 bytes" in human.stdout
    assert sample.read_bytes() == before
    assert not (sample.parent / "log.lock").exists() and not list(sample.parent.glob("torn-*"))


def test_verify_works_while_a_writer_holds_the_session(tmp_path):
    from dshd.services.store import SessionStore

    with SessionStore.create(tmp_path, "s1") as store:
        store.commit("plan/mode", {"active": True}, writer="plan")
        proc = run("log", "verify", str(store.path), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["plan"] == {"active": True}


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable", "empty", "binary"])
def test_verify_bad_paths_clear_message_exit_1_no_traceback(tmp_path, kind):
    path = tmp_path / "log.jsonl"
    if kind == "directory":
        path = tmp_path
    elif kind == "unreadable":
        path.write_text("{}\n")
        path.chmod(0)
        if os.access(path, os.R_OK):  # running as root: permissions do not apply
            pytest.skip("root can read any file")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "binary":
        path.write_bytes(b"\x00\xff\xfe\n\x89PNG\n")
    proc = run("log", "verify", str(path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    message = proc.stderr + proc.stdout
    expected = {
        "missing": "no such file",
        "directory": "is a directory",
        "unreadable": "permission denied",
        "empty": "line 1, seq None: empty log",
        "binary": "line 1, seq None:",
    }[kind]
    assert expected in message
    as_json = run("log", "verify", str(path), "--json")
    assert as_json.returncode == 1
    out = json.loads(as_json.stdout)
    assert out["ok"] is False and out["reason"]


@pytest.mark.parametrize("args", [["log"], ["log", "verify"], ["log", "frob", "x"], ["log", "verify", "a", "b"], ["bogus"]])
def test_usage_errors_exit_2(args):
    proc = run(*args)
    assert proc.returncode == 2 and "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_show_prints_state_and_every_event(sample):
    proc = run("log", "show", str(sample))
    assert proc.returncode == 0
    out = proc.stdout
    assert out.startswith("session sample-7c1e 'Split the tokenizer'")
    assert "plan mode: off" in out and "g-7f3a2c rev 7 complete" in out
    rows = [line for line in out.splitlines() if line[:6].strip().isdigit()]
    assert len(rows) == 52
    assert "exit_plan_mode(" in out and "plan mode on" in out
    assert "goal g-7f3a2c block -> rev 5 blocked, 3/5 rounds [needs-decision:" in out
    assert "(round 1 of goal g-7f3a2c rev 1)" in out


def test_show_bad_log_lists_events_up_to_the_bad_line(sample):
    lines = sample.read_bytes().splitlines(keepends=True)
    lines[4] = b'{"seq": 5, "type": "plan/mode"}\n'
    sample.write_bytes(b"".join(lines))
    proc = run("log", "show", str(sample))
    assert proc.returncode == 1
    assert proc.stdout.startswith("log is NOT sound: line 5, seq 5: Object missing required field `at`")
    assert "     5  !! Object missing required field `at`" in proc.stdout
    assert sum(1 for line in proc.stdout.splitlines() if line[:6].strip().isdigit()) == 5


def test_show_chat_prints_the_conversation_as_the_editors_show_it(sample):
    proc = run("log", "show", "--chat", str(sample))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("session sample-7c1e 'Split the tokenizer'")
    rows = out.split("\n\n", 1)[1].splitlines()
    assert rows[:3] == [
        '     1  [session] Session "Split the tokenizer"',
        "     3  [you]    Split the tokenizer out of parser.py",
        "     4  [plan]   Plan mode on",
    ]
    assert "     9  [agent]  proposes a plan: Split the tokenizer" in rows
    assert "        [review] approved" in rows
    assert "    40  [goal]   Goal blocked: Two tests contradict each other; which one is right? (needs-decision)" in rows
    assert rows[-1] == "    52  [goal]   Goal complete (4/5 rounds used)"
    assert "request/header" not in out and "rev " not in out.split("\n\n", 1)[1]  # no bookkeeping, no revisions


def test_show_chat_of_a_bad_log_stops_at_the_bad_line(sample):
    lines = sample.read_bytes().splitlines(keepends=True)
    lines[9] = b'{"seq": 10, "type": "tool/result"}\n'
    sample.write_bytes(b"".join(lines))
    proc = run("log", "show", "--chat", str(sample))
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("    10  !! Object missing required field `at`")
    assert "[review]" not in proc.stdout  # the review's result is on the bad line


def test_show_missing_file(tmp_path):
    proc = run("log", "show", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("dshd")
    proc = subprocess.run([str(exe), "log", "verify", str(SAMPLE), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True


def test_verify_follows_a_link_the_person_names_and_refuses_a_fifo(sample, tmp_path):
    link = tmp_path / "named.jsonl"
    link.symlink_to(sample)
    proc = run("log", "verify", str(link))
    assert proc.returncode == 0 and "sound: 52 events" in proc.stdout
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for command in ("verify", "show"):
        proc = run("log", command, str(fifo), timeout=20)  # never blocks on the FIFO
        assert proc.returncode == 1 and "is not a regular file" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
