"""`dshd goal` (D-8), run as the real `dshd` console script.

On a log nobody holds it writes to the log itself, and its `status --json` is the GoalView
a daemon gives an editor for the same session. When the workspace's shared daemon holds
the session (an editor opened it through `dshd connect`), it goes through the daemon: the
editor is told at once, and the answer is the live agent's. A session held by a process
that is not the shared daemon is refused, naming it, and nothing is written.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dshd.agent import new_session_id
from dshd.services.store import SessionStore
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events
from tests.shared_daemon_support import DSHD, Runtime, connect_command

pytestmark = pytest.mark.slow

COMMAND = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]


@pytest.fixture
def runtime():
    # A private runtime folder: the person's own daemons are never reached.
    r = Runtime()
    yield r
    r.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


def new_session(workspace: Path) -> str:
    session_id = new_session_id()
    SessionStore.create(workspace / ".dsh" / "sessions", session_id, title="goal cli").close()
    return session_id


def goal(runtime: Runtime, workspace: Path, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        COMMAND + ["goal", *args],
        cwd=workspace,
        env={**os.environ, **runtime.env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def answer(proc: subprocess.CompletedProcess, status: int = 0):
    assert proc.returncode == status, proc.stderr
    return json.loads(proc.stdout)


def not_running(proc: subprocess.CompletedProcess):
    """A resume (or raise) written where no client will run its rounds: the answer, exit 3
    and the words saying what happens next."""
    assert "nothing runs yet" in proc.stderr and "dshd run --session " in proc.stderr, proc.stderr
    return answer(proc, 3)


def goal_ops(workspace: Path, session_id: str) -> list[str]:
    return [e["data"]["op"] for e in log_events(workspace, session_id) if e["type"] == "goal/change"]


def test_goal_commands_on_a_log_nobody_holds(runtime, workspace):
    older = new_session(workspace)
    session = new_session(workspace)  # changed last: the one meant without --session
    assert answer(goal(runtime, workspace, "status", "--json")) is None
    created = answer(goal(runtime, workspace, "create", "Make", "the", "tests", "pass", "--max-rounds", "5", "--json"))
    assert created["objective"] == "Make the tests pass" and created["maxRounds"] == 5 and created["revision"] == 1
    # No agent runs here: the goal waits for a person to resume it in an editor.
    assert created["activation"] == "disarmed" and created["status"]["short"] == "waiting for you to resume"
    paused = answer(goal(runtime, workspace, "pause", "--session", session, "--json"))
    assert (paused["phase"], paused["revision"]) == ("paused", 2)
    edited = answer(goal(runtime, workspace, "edit", "--max-rounds", "9", "--objective", "Ship it", "--json"))
    assert (edited["maxRounds"], edited["objective"], edited["phase"], edited["revision"]) == (9, "Ship it", "paused", 3)
    resumed = not_running(goal(runtime, workspace, "resume", "--json"))
    assert (resumed["phase"], resumed["revision"]) == ("active", 4)
    people = goal(runtime, workspace, "status")
    assert people.returncode == 0 and people.stdout.startswith(f"{created['id']} · {resumed['status']['text']}\n")
    assert "  Goal: Ship it\n" in people.stdout
    assert goal_ops(workspace, session) == ["create", "pause", "edit", "resume"]
    assert goal_ops(workspace, older) == []

    # status --json is the GoalView a daemon gives an editor for this session.
    status = answer(goal(runtime, workspace, "status", "--json"))
    with RawDaemon(workspace) as editor:
        editor.initialize()
        agent = editor.request("dsh/session/open", {"sessionId": session})["agentId"]
        assert editor.request("dsh/goal/get", {"agentId": agent}) == status
        assert editor.shutdown_and_exit() == 0

    completed = answer(goal(runtime, workspace, "complete", "--json"))
    assert completed["phase"] == "complete" and [a["id"] for a in completed["actions"]] == ["create", "clear"]
    cleared = answer(goal(runtime, workspace, "clear", "--json"))
    assert cleared == {"ref": {"id": created["id"], "revision": 6}}
    assert answer(goal(runtime, workspace, "status", "--json")) is None
    assert goal_ops(workspace, session) == ["create", "pause", "edit", "resume", "complete", "clear"]


def test_goal_commands_go_through_the_shared_daemon_that_holds_the_session(runtime, workspace):
    session = new_session(workspace)
    # A goal made while nobody holds the session: after the editor's load it is disarmed,
    # so nothing runs rounds while the commands below change it.
    made = answer(goal(runtime, workspace, "create", "Polish the parser", "--max-rounds", "40", "--json"))
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()
        agent = editor.request("dsh/session/open", {"sessionId": session})["agentId"]
        daemon_pid = runtime.daemon_pid()

        paused = answer(goal(runtime, workspace, "pause", "--json"))
        assert (paused["id"], paused["phase"], paused["revision"]) == (made["id"], "paused", 2)
        # Through the daemon: the attached editor was told at once, with the same view,
        # and saw the command attach as a client of its own name (a request of the
        # editor's reads what came before its answer).
        assert editor.request("dsh/goal/get", {"agentId": agent}) == paused
        changed = [n["params"] for n in editor.notifications if n["method"] == "dsh/goal/changed"]
        assert changed and changed[-1]["op"] == "pause" and changed[-1]["goal"] == paused
        assert changed[-1]["agentId"] == agent and changed[-1]["sessionId"] == session
        joined = [n["params"] for n in editor.notifications if n["method"] == "dsh/session/clients"]
        assert any("dshd goal" in [c["clientName"] for c in p["clients"]] for p in joined)

        edited = answer(goal(runtime, workspace, "edit", "--max-rounds", "41", "--session", session, "--json"))
        assert editor.request("dsh/goal/get", {"agentId": agent}) == edited
        assert answer(goal(runtime, workspace, "status", "--json")) == edited

        # A goal created through the daemon is armed by the live agent (only it can be):
        # one round runs, then the round budget blocks it.
        answer(goal(runtime, workspace, "clear", "--json"))
        created = answer(goal(runtime, workspace, "create", "Round", "once", "--max-rounds", "1", "--json"))
        assert created["activation"] == "armed" and created["revision"] == 1
        editor.request("dsh/session/list", {})
        assert any(
            n["params"].get("op") == "create" and n["params"]["goal"]["id"] == created["id"]
            for n in editor.notifications
            if n["method"] == "dsh/goal/changed"
        )
        assert runtime.daemon_pids() == [daemon_pid]  # the command started no daemon of its own
        assert editor.shutdown_and_exit() == 0
    assert goal_ops(workspace, session)[:5] == ["create", "pause", "edit", "clear", "create"]


def test_a_session_held_by_another_process_is_refused_and_nothing_is_written(runtime, workspace):
    session = new_session(workspace)
    answer(goal(runtime, workspace, "create", "Hold on", "--json"))
    log = workspace / ".dsh" / "sessions" / session / "log.jsonl"
    with RawDaemon(workspace) as serve:  # `dshd serve`: a daemon of its own, no socket
        serve.initialize()
        serve.request("dsh/session/open", {"sessionId": session})
        before = log.read_bytes()
        refused = goal(runtime, workspace, "pause", "--json")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        error = json.loads(refused.stdout)["error"]
        assert error["kind"] == "session-locked" and error["pid"] == serve.proc.pid
        assert f"process {serve.proc.pid}" in refused.stderr
        assert log.read_bytes() == before
        assert serve.shutdown_and_exit() == 0
    # The same command once the session is free: it was the lock that refused it.
    assert answer(goal(runtime, workspace, "pause", "--json"))["phase"] == "paused"


def test_bad_input_is_a_clear_error_never_a_traceback(runtime, workspace, tmp_path):
    session = new_session(workspace)
    cases = {
        ("pause", "--json"): ("no-goal", "has no goal"),
        ("status", "--session", "s-nope", "--json"): ("invalid-params", "session id"),
        ("status", "--session", new_session_id(), "--json"): ("invalid-params", "no session"),
        ("create", "x", "--max-rounds", "0", "--json"): ("invalid-params", "maxRounds"),
    }
    for args, (kind, words) in cases.items():
        proc = goal(runtime, workspace, *args)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert error["kind"] == kind and words in error["message"], (args, error)
    # Usage errors exit 2 (argparse), also an edit that changes nothing.
    for args in (("edit",), ("create",), ("create", "x", "--max-rounds", "many"), ("frobnicate",)):
        proc = goal(runtime, workspace, *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
    # Goals turned off: the same refusal the daemon gives.
    off = write_workspace(tmp_path / "off", plugins=["plan"])
    new_session(off)
    proc = goal(runtime, off, "status", "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["kind"] == "plugin-not-loaded"
    # A workspace with no session at all.
    empty = write_workspace(tmp_path / "empty")
    proc = goal(runtime, empty, "status")
    assert proc.returncode == 1 and "no session in" in proc.stderr
    # From a folder inside the workspace the command finds it (the nearest .dsh up).
    inside = workspace / "src" / "deep"
    inside.mkdir(parents=True)
    proc = goal(runtime, inside, "status", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) is None, proc.stderr
    # The good case in the same workspace as the refusals: the probe itself works.
    assert answer(goal(runtime, workspace, "create", "x", "--json"))["objective"] == "x"
    assert goal_ops(workspace, session) == ["create"]


def poll_goal(editor: RawDaemon, agent: str, predicate, timeout: float = 20) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while True:
        view = editor.request("dsh/goal/get", {"agentId": agent})
        if view is not None and predicate(view):
            return view
        assert time.monotonic() < deadline, f"the goal never got there: {view}"
        time.sleep(0.05)


def test_goal_raise_edits_then_resumes_on_the_log_and_through_the_daemon(runtime, workspace):
    """G-21 from a terminal: `dshd goal raise` on a goal blocked for its spent budget is an
    edit with the ref read, then a resume with the edit's ref."""
    write_workspace(workspace, replies=[{"text": "round one"}, {"text": "round two"}, {"text": "round three"}])
    session = new_session(workspace)
    with RawDaemon(workspace) as serve:  # a daemon of its own: the budget of 1 round is spent
        serve.initialize()
        agent = serve.request("dsh/session/open", {"sessionId": session})["agentId"]
        serve.request("dsh/goal/create", {"agentId": agent, "objective": "Say it thrice", "maxRounds": 1})
        blocked = poll_goal(serve, agent, lambda v: v["phase"] == "blocked")
        assert serve.shutdown_and_exit() == 0
    assert blocked["blockedReason"]["code"] == "round-budget-exhausted" and [a["id"] for a in blocked["actions"]][:2] == ["edit", "raise"]
    people = goal(runtime, workspace, "status")
    assert "Next: Edit the goal…, Raise the budget and resume…" in people.stdout

    # A budget that stays spent is refused before anything is written.
    stays = goal(runtime, workspace, "raise", "--rounds", "1", "--json")
    assert stays.returncode == 1 and "Traceback" not in stays.stderr
    assert json.loads(stays.stdout)["error"] == {**json.loads(stays.stdout)["error"], "kind": "invalid-params", "field": "rounds"}
    assert goal_ops(workspace, session) == ["create", "block"]

    # On the log nobody holds: both writes; nothing runs rounds here, so it waits disarmed.
    raised = not_running(goal(runtime, workspace, "raise", "--rounds", "2", "--json"))
    assert (raised["phase"], raised["maxRounds"], raised["revision"]) == ("active", 2, blocked["revision"] + 2)
    assert raised["activation"] == "disarmed" and "blockedReason" not in raised
    assert goal_ops(workspace, session) == ["create", "block", "edit", "resume"]
    # A goal not blocked for its budget: refused, nothing written.
    not_spent = goal(runtime, workspace, "raise", "--rounds", "9", "--json")
    assert not_spent.returncode == 1 and json.loads(not_spent.stdout)["error"]["kind"] == "invalid-transition"
    assert goal_ops(workspace, session) == ["create", "block", "edit", "resume"]
    assert goal(runtime, workspace, "raise").returncode == 2  # no budget given: a usage error

    # Through the shared daemon holding the session: the live agent runs the raised round.
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()
        agent = editor.request("dsh/session/open", {"sessionId": session})["agentId"]
        waiting = editor.request("dsh/goal/get", {"agentId": agent})
        editor.request("dsh/goal/resume", {"agentId": agent, "ref": {"id": waiting["id"], "revision": waiting["revision"]}})
        spent = poll_goal(editor, agent, lambda v: v["phase"] == "blocked" and v["roundsStarted"] == 2)
        again = answer(goal(runtime, workspace, "raise", "--rounds", "3", "--json"))
        assert (again["phase"], again["activation"], again["revision"]) == ("active", "armed", spent["revision"] + 2)
        third = poll_goal(editor, agent, lambda v: v["phase"] == "blocked" and v["roundsStarted"] == 3)
        assert third["maxRounds"] == 3
        ops = [n["params"]["op"] for n in editor.notifications if n["method"] == "dsh/goal/changed"]
        assert ops[ops.index("edit"):][:3] == ["edit", "resume", "round"]  # the editor saw both writes, then the round
        assert editor.shutdown_and_exit() == 0
    assert goal_ops(workspace, session) == ["create", "block", "edit", "resume", "block", "edit", "resume", "block"]


def test_goal_resume_with_no_client_attached_says_nothing_runs_and_exits_3(runtime, workspace):
    """V-5: resumed on the log nobody holds, the goal waits: the command says so, names
    what picks it up (an editor, or `dshd run --session ID`), and exits 3. That is true:
    nothing ran, and `dshd run --session ID` then runs the goal to its end. Control: the
    same resume with an editor on the session (through the shared daemon) exits 0."""
    write_workspace(workspace, replies=[{"text": "round one"}, {"text": "round two"}], plugins=["plan", "goals"])
    session = new_session(workspace)
    answer(goal(runtime, workspace, "create", "Say", "it", "--max-rounds", "1", "--json"))
    answer(goal(runtime, workspace, "pause", "--json"))
    proc = goal(runtime, workspace, "resume")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert "waiting for you to resume" in proc.stdout  # the goal's own status, as editors show it
    said = " ".join(proc.stderr.split())
    assert said.startswith("dshd goal resume: the goal is resumed, but nothing runs yet: no editor or run has the session open."), said
    assert f"an editor opens session {session} and you resume the goal there" in said
    assert f"`dshd run --session {session}`" in said
    # docs/headless.md shows these words: the same, but for the session's id.
    docs = (Path(__file__).resolve().parents[2] / "docs" / "headless.md").read_text()
    [shown] = [line for line in docs.splitlines() if line.startswith("dshd goal resume: ")]
    example = re.search(r"s-[0-9a-z]{26}", shown).group(0)
    assert proc.stderr == shown.replace(example, session) + "\n"
    assert goal_ops(workspace, session) == ["create", "pause", "resume"]  # nothing ran: no round
    # What it says picks the session up does: the goal's round runs, and the budget ends it.
    ran = subprocess.run(COMMAND + ["run", "--session", session, "--json"], cwd=workspace,
                         env={**__import__("os").environ, **runtime.env}, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 4, ran.stdout + ran.stderr  # the round budget (1) spent
    result = json.loads(ran.stdout.splitlines()[-1])
    assert (result["goal"]["roundsStarted"], result["goal"]["blockedReason"]["code"]) == (1, "round-budget-exhausted")
    assert [i["item"]["text"] for i in map(json.loads, ran.stdout.splitlines()[1:-1])
            if i["item"]["kind"] == "assistant-message" and not i["item"]["partial"]] == ["round one"]
    assert goal_ops(workspace, session) == ["create", "pause", "resume", "block"]

    # Control: an editor on the session through the shared daemon runs what is resumed.
    answer(goal(runtime, workspace, "edit", "--max-rounds", "2", "--json"))
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()
        agent = editor.request("dsh/session/open", {"sessionId": session})["agentId"]
        resumed = goal(runtime, workspace, "resume", "--json")
        assert resumed.returncode == 0 and "nothing runs" not in resumed.stderr, resumed.stderr
        assert json.loads(resumed.stdout)["activation"] == "armed"
        poll_goal(editor, agent, lambda v: v["phase"] == "blocked" and v["roundsStarted"] == 2)
        assert editor.shutdown_and_exit() == 0


def test_goal_resume_through_the_shared_daemon_with_no_client_on_the_session_changes_nothing(runtime, workspace):
    """The shared daemon still holds the session after its editor left: a resume there would
    arm the live agent, start a round with nobody watching, and be disarmed when the command
    leaves (it did: a turn ran after "nothing runs yet"). Refused before anything is
    written, exit 3, the way out named; `dshd run --session ID` then runs the goal."""
    write_workspace(workspace, replies=[{"text": "round one"}, {"text": "round two"}], plugins=["plan", "goals"])
    session = new_session(workspace)
    answer(goal(runtime, workspace, "create", "Say", "it", "--max-rounds", "1", "--json"))
    paused = answer(goal(runtime, workspace, "pause", "--json"))
    with RawDaemon(workspace, env=runtime.env, command=connect_command()) as editor:
        editor.initialize()
        editor.request("dsh/session/open", {"sessionId": session})
        assert editor.shutdown_and_exit() == 0  # the editor left; the daemon keeps the session
    daemons = runtime.daemon_pids()
    assert daemons
    proc = goal(runtime, workspace, "resume", "--json")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["phase"] == "paused" and json.loads(proc.stdout)["revision"] == paused["revision"]
    said = " ".join(proc.stderr.split())
    assert said.startswith(f"dshd goal resume: nothing was changed and nothing runs: session {session} is open in the workspace's shared daemon"), said
    assert f"`dshd run --session {session}`" in said
    time.sleep(1.5)  # a round started by a resume would be in the log by now
    assert goal_ops(workspace, session) == ["create", "pause"]
    assert not [e for e in log_events(workspace, session) if e["type"] == "turn/open"]
    assert runtime.daemon_pids() == daemons  # it went through that daemon (and started none)
    # What it names runs the goal: the run attaches to the daemon's session and resumes it.
    ran = subprocess.run(COMMAND + ["run", "--session", session, "--json"], cwd=workspace,
                         env={**__import__("os").environ, **runtime.env}, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 4, ran.stdout + ran.stderr  # its one round ran, the budget spent
    assert json.loads(ran.stdout.splitlines()[0])["via"] == "daemon"
    assert goal_ops(workspace, session) == ["create", "pause", "resume", "block"]
