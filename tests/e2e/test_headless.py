"""`dshd run` (headless runs) as a script or a CI job runs it: the real command, in a
workspace, with the scripted model and with a loopback OpenAI-compatible server.

Each test has a private $XDG_RUNTIME_DIR (no shared daemon is found: the run is
in-process) and a private $XDG_CONFIG_HOME (the user config, where a test trusts its
workspace or picks the loopback model). Covered: every exit code (0 1 2 3 4 130) and
their precedence; `--json` lines validated against protocol's dshd-run.schema.json;
nobody to ask (approvals refused at once, the turn goes on; a plan never approved);
Ctrl-C during a slow reply and during a command (the log verifies, the turn is closed
`cancelled`, no process left); a run through a running shared daemon whose attached
editor answers its approval; `examples/workspace` as docs/headless.md runs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from dshd_protocol.run_lines import load_run_schema
from tests.e2e.conftest import write_workspace
from tests.e2e.support import log_path, of_type, read_log
from tests.sandbox_support import needs_sandbox, processes_with
from tests.shared_daemon_support import Runtime

DSHD = Path(sys.executable).with_name("dshd")


def _has_run_command() -> bool:
    probe = subprocess.run([str(DSHD), "run", "--help"], capture_output=True, text=True, timeout=60)
    return probe.returncode == 0 and "--max-rounds" in probe.stdout


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _has_run_command(), reason="this dshd has no `dshd run`")]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"
TOOLS = ["plan", "goals", "tools"]
PLAN = "# Plan: add a cache\n\n1. Wrap the parser\n2. Test it\n"
KEY_ENV = "DSHD_E2E_MODEL_KEY"
KEY = "sk-headless-e2e-key-0123456789"
VALIDATOR = Draft202012Validator(load_run_schema())


def reply(text: str = "", *calls: tuple[str, dict], usage: tuple[int, int] | None = None, delay_ms: int = 0) -> dict:
    out: dict = {"text": text} if text else {}
    if calls:
        out["toolCalls"] = [{"name": name, "arguments": args} for name, args in calls]
    if usage:
        out["usage"] = {"inputTokens": usage[0], "outputTokens": usage[1]}
    if delay_ms:
        out["delayMs"] = delay_ms
    return out


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str
    lines: list[dict] = field(default_factory=list)

    @property
    def result(self) -> dict:
        assert self.lines and self.lines[-1]["type"] == "result", (self.stdout, self.stderr)
        return self.lines[-1]

    @property
    def session(self) -> dict:
        assert self.lines and self.lines[0]["type"] == "session", (self.stdout, self.stderr)
        return self.lines[0]

    def items(self, kind: str | None = None) -> list[dict]:
        return [line["item"] for line in self.lines if line["type"] == "item" and (kind is None or line["item"]["kind"] == kind)]


def check_lines(stdout: str, code: int) -> list[dict]:
    """Every stdout line is one JSON object valid against the shipped schema; the first is
    the session line, the last the result line naming this exit code and that session."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    for line in lines:
        errors = sorted(VALIDATOR.iter_errors(line), key=str)
        assert not errors, (line, [e.message for e in errors[:3]])
    assert lines, "no JSON lines"
    assert lines[-1]["type"] == "result" and lines[-1]["exitCode"] == code
    if len(lines) == 1:  # failed before it had a session: the result line alone
        assert code == 1 and lines[0]["sessionId"] is None and "error" in lines[0]
        return lines
    assert lines[0]["type"] == "session"
    assert [line["type"] for line in lines[1:-1]] == ["item"] * (len(lines) - 2)
    assert lines[-1]["sessionId"] == lines[0]["sessionId"]
    return lines


class Headless:
    """Runs `dshd run` in a workspace with a private runtime and user config folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.runtime = Runtime()
        self.config_home = tmp_path / "config-home"
        (self.config_home / "dsh").mkdir(parents=True)
        self.extra_env: dict[str, str] = {}

    def user_config(self, text: str) -> None:
        (self.config_home / "dsh" / "config.toml").write_text(textwrap.dedent(text))

    def trust(self, root: Path, more: str = "") -> None:
        self.user_config(f"[trust]\nfolders = [{json.dumps(str(root))}]\n" + more)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSHD_")}
        return {**env, "XDG_CONFIG_HOME": str(self.config_home), "DSHD_LOG_LEVEL": "WARNING",
                **self.runtime.env, **self.extra_env}

    def start(self, root: Path, *args: str, stdin=subprocess.DEVNULL) -> subprocess.Popen:
        return subprocess.Popen([str(DSHD), "run", *args], cwd=root, env=self.env, stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def run(self, root: Path, *args: str, input: str | None = None, timeout: float = 60) -> Finished:
        proc = self.start(root, *args, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = proc.communicate(input.encode() if input is not None else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"dshd run did not end in {timeout} s: {out.decode()[-2000:]} {err.decode()[-2000:]}")
        done = Finished(proc.returncode, out.decode(), err.decode())
        assert "Traceback" not in done.stderr, done.stderr
        if "--json" in args and done.stdout.strip():
            done.lines = check_lines(done.stdout, done.code)
        return done

    def close(self) -> None:
        self.runtime.stop()


@pytest.fixture
def headless(tmp_path: Path):
    h = Headless(tmp_path)
    yield h
    h.close()


def workspace(tmp_path: Path, replies: list[dict], plugins: list[str] | None = None, extra: str = "") -> Path:
    root = write_workspace(tmp_path / "ws", replies=replies, plugins=plugins, extra_config=extra)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text("def greet():\n    return 'hi'\n")
    return root


def verify_log(root: Path, session_id: str) -> None:
    done = subprocess.run([str(DSHD), "log", "verify", str(log_path(root, session_id))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def closes(root: Path, session_id: str) -> list[str]:
    return [e["data"]["stopReason"] for e in of_type(read_log(root, session_id), "turn/close")]


def pgroup_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # Zombies count as gone: only the test (their parent) could still reap them.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[2]) == pgid and stat[0] not in (b"Z", b"X"):
                return True
    return False


# ---- 0: the turn ended, or the goal is complete --------------------------------------------


def test_a_prompt_prints_the_reply_and_exits_0(tmp_path, headless):
    root = workspace(tmp_path, [reply("Hello from the script.", usage=(12, 5))])
    done = headless.run(root, "hi")
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "Hello from the script."  # only the assistant's text on stdout
    # The prompt also comes from stdin ("-"), and --json prints the lines the schema names.
    root2 = workspace(tmp_path / "two", [reply("From stdin.", usage=(12, 5))])
    done = headless.run(root2, "-", "--json", input="hi from a pipe\n")
    assert done.code == 0, done.stderr
    result = done.result
    assert result["stopReason"] == "end-turn" and result["usage"] == {"inputTokens": 12, "outputTokens": 5}
    assert result["durationMs"] >= 0
    [user] = done.items("user-message")
    assert user["text"].strip() == "hi from a pipe"
    assert [i["text"] for i in done.items("assistant-message") if not i["partial"]] == ["From stdin."]
    sid = done.session["sessionId"]
    verify_log(root2, sid)
    assert closes(root2, sid) == ["end-turn"]


def test_a_goal_that_completes_exits_0_and_the_result_has_the_goal(tmp_path, headless):
    root = workspace(tmp_path, [reply("Round one.", ("goal_complete", {})), reply("Done.")])
    done = headless.run(root, "--goal", "Make the greeting friendlier", "--json")
    assert done.code == 0, done.stderr
    goal = done.result["goal"]
    assert goal["phase"] == "complete" and goal["objective"] == "Make the greeting friendlier"
    assert goal["activation"] == "disarmed"  # nothing runs after the run
    verify_log(root, done.session["sessionId"])


def test_a_second_run_goes_on_in_the_last_session(tmp_path, headless):
    root = workspace(tmp_path, [reply("First."), reply("Second.")])
    first = headless.run(root, "one", "--json")
    again = headless.run(root, "two", "--last", "--json")
    assert first.code == 0 and again.code == 0, again.stderr
    assert again.session["sessionId"] == first.session["sessionId"]
    by_id = headless.run(root, "three", "--session", first.session["sessionId"], "--json")
    assert by_id.code == 0 and by_id.session["sessionId"] == first.session["sessionId"]
    texts = [e["data"]["text"] for e in of_type(read_log(root, first.session["sessionId"]), "user/message")]
    assert [t.strip() for t in texts] == ["one", "two", "three"]


# ---- 1: an error, with its kind --------------------------------------------------------------


def test_a_config_error_exits_1_naming_its_kind(tmp_path, headless):
    root = workspace(tmp_path, [reply("never")], extra="\n[goals]\nmaxRounds = \"forty\"\n")
    done = headless.run(root, "hi")
    assert done.code == 1
    assert "invalid-config" in done.stderr and "maxRounds" in done.stderr
    assert done.stdout == ""  # no reply was printed
    # Control: the same workspace without the bad key runs.
    ok = headless.run(workspace(tmp_path / "ok", [reply("fine")]), "hi")
    assert ok.code == 0 and ok.stdout.strip() == "fine"


def test_bad_arguments_exit_1_without_running(tmp_path, headless):
    root = workspace(tmp_path, [reply("never")])
    for args in (["--goal", "g", "--max-rounds", "0"], ["hi", "--session", "not a session id"],
                 ["--goal", "g", "--max-tokens", "x"], ["hi", "--goal", "both"], []):
        done = headless.run(root, *args)
        assert done.code == 1, (args, done.code)  # usage errors are 1 (2 means a blocked goal)
        assert "invalid-params" in done.stderr, (args, done.stderr)
        as_json = headless.run(root, *args, "--json")
        assert as_json.code == 1 and as_json.result["error"]["kind"] == "invalid-params"
    assert not (root / ".dsh" / "sessions").exists() or not any((root / ".dsh" / "sessions").iterdir())


# ---- 2: the goal blocked (its code printed) --------------------------------------------------


def test_a_blocked_goal_exits_2_and_prints_its_code(tmp_path, headless):
    block = ("goal_block", {"code": "needs-credentials", "message": "The deploy key is missing."})
    root = workspace(tmp_path, [reply("I cannot go on.", block), reply("Blocked.")])
    done = headless.run(root, "--goal", "Deploy the site")
    assert done.code == 2, done.stderr
    assert "needs-credentials" in done.stdout + done.stderr
    root2 = workspace(tmp_path / "json", [reply("I cannot go on.", block), reply("Blocked.")])
    done = headless.run(root2, "--goal", "Deploy the site", "--json")
    assert done.code == 2
    assert done.result["goal"]["phase"] == "blocked"
    assert done.result["goal"]["blockedReason"]["code"] == "needs-credentials"


# ---- 3: a person was needed ------------------------------------------------------------------


def test_a_plan_is_never_approved_the_run_stops_with_it_exit_3(tmp_path, headless):
    root = workspace(tmp_path, [reply("Here is the plan.", ("exit_plan_mode", {"plan": PLAN})), reply("I went on anyway.")])
    done = headless.run(root, "--plan", "Add a cache")
    assert done.code == 3, done.stderr
    assert "# Plan: add a cache" in done.stdout and "1. Wrap the parser" in done.stdout
    assert "not reviewed" in done.stderr
    root2 = workspace(tmp_path / "json", [reply("Here is the plan.", ("exit_plan_mode", {"plan": PLAN})), reply("I went on anyway.")])
    done = headless.run(root2, "--plan", "Add a cache", "--json")
    assert done.code == 3
    assert done.result["plan"] == PLAN
    [review] = done.items("plan-review")[-1:]
    assert review["outcome"] != "approved"
    events = read_log(root2, done.session["sessionId"])
    reviews = [e["data"].get("review", {}).get("outcome") for e in of_type(events, "tool/result")]
    assert "approved" not in reviews and "failed" in reviews
    # Plan mode stays on for every request after it (nothing is implemented), and no
    # further turn runs: the run ends with the turn the plan came in.
    assert [e["data"]["planActive"] for e in of_type(events, "request/header")] == [True, True]
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True]
    assert len(of_type(events, "turn/open")) == 1
    verify_log(root2, done.session["sessionId"])


def test_an_approval_nobody_can_give_is_refused_at_once_the_turn_goes_on_exit_3(tmp_path, headless):
    write = ("write_file", {"path": "src/new.py", "content": "X = 1\n"})
    root = workspace(tmp_path, [reply("Writing.", write), reply("I could not write it.")], plugins=TOOLS)
    started = time.monotonic()
    done = headless.run(root, "make src/new.py", "--json")
    assert time.monotonic() - started < 30  # refused at once, not after a question timeout
    assert done.code == 3, done.stderr
    assert not (root / "src" / "new.py").exists()
    assert done.result["stopReason"] == "end-turn"  # the turn went on to its end
    assert [(n["kind"], n["tool"]) for n in done.result["personNeeded"]] == [("permission", "write_file")]
    [permission] = done.items("permission")
    assert permission["outcome"] == "reject"
    assert [i["text"] for i in done.items("assistant-message") if not i["partial"]][-1] == "I could not write it."
    [result] = [e["data"] for e in of_type(read_log(root, done.session["sessionId"]), "tool/result")]
    assert result["ok"] is False and "approv" in result["content"].lower()
    # Control: a read (not in the approve list) runs in the same kind of run, exit 0.
    read = ("read_file", {"path": "src/app.py"})
    ok = headless.run(workspace(tmp_path / "read", [reply("Reading.", read), reply("It greets.")], plugins=TOOLS), "read it", "--json")
    assert ok.code == 0 and not ok.result.get("personNeeded")
    tool = [i for i in ok.items("tool-call") if not i["partial"]][-1]  # its last upsert
    assert tool["status"] == "ok" and "return 'hi'" in tool["result"]


# ---- 4: a budget spent -----------------------------------------------------------------------


def test_a_round_budget_spent_exits_4(tmp_path, headless):
    root = workspace(tmp_path, [reply("Round one."), reply("Round two."), reply("Round three.")])
    done = headless.run(root, "--goal", "Never done", "--max-rounds", "2", "--json")
    assert done.code == 4, done.stderr
    goal = done.result["goal"]
    assert goal["phase"] == "blocked" and goal["blockedReason"]["code"] == "round-budget-exhausted"
    assert goal["maxRounds"] == 2 and goal["roundsStarted"] == 2


def test_a_token_budget_spent_exits_4(tmp_path, headless):
    root = workspace(tmp_path, [reply("Expensive.", usage=(400, 200)), reply("Again.", usage=(400, 200))])
    done = headless.run(root, "--goal", "Never done", "--max-tokens", "500", "--json")
    assert done.code == 4, done.stderr
    assert done.result["goal"]["blockedReason"]["code"] == "token-budget-exhausted"
    assert done.result["usage"]["inputTokens"] >= 400


def test_a_person_needed_wins_over_a_budget_spent(tmp_path, headless):
    """Precedence 130, 1, 3, 4, 2: an approval refused in a goal that then spends its rounds is 3."""
    write = ("write_file", {"path": "src/new.py", "content": "X = 1\n"})
    root = workspace(tmp_path, [reply("Writing.", write), reply("Round two.")], plugins=TOOLS)
    done = headless.run(root, "--goal", "Write it", "--max-rounds", "1", "--json")
    assert done.code == 3, done.stderr
    assert done.result["goal"]["blockedReason"]["code"] == "round-budget-exhausted"


# ---- 130: Ctrl-C -----------------------------------------------------------------------------


def wait_for(check, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen, timeout: float = 20) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"dshd run ignored Ctrl-C: {err.decode()[-2000:]}")
    return proc.returncode, out.decode(), err.decode()


def only_session(root: Path) -> str:
    sessions = root / ".dsh" / "sessions"
    wait_for(lambda: sessions.exists() and any(sessions.iterdir()), what="the session")
    [sid] = [p.name for p in sessions.iterdir() if p.is_dir()]
    return sid


def test_ctrl_c_during_a_slow_reply_cancels_the_turn_disarms_and_exits_130(tmp_path, headless):
    root = workspace(tmp_path, [reply("Too slow.", delay_ms=60_000)])
    proc = headless.start(root, "--goal", "Wait forever", "--json")
    sid = only_session(root)
    wait_for(lambda: of_type(read_log(root, sid), "turn/open"), what="the turn")
    code, out, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err
    lines = check_lines(out, 130)
    assert lines[-1]["stopReason"] == "cancelled"
    assert lines[-1]["goal"]["activation"] == "disarmed"
    verify_log(root, sid)
    assert closes(root, sid) == ["cancelled"]
    wait_for(lambda: not pgroup_alive(proc.pid), 10, "the run's processes to end")
    # Nothing runs by itself afterwards: the log does not grow.
    size = log_path(root, sid).stat().st_size
    time.sleep(1)
    assert log_path(root, sid).stat().st_size == size


@needs_sandbox
def test_ctrl_c_during_a_command_kills_it_and_exits_130(tmp_path, headless):
    marker = f"headless-marker-{os.getpid()}-{time.monotonic_ns()}"
    # The interpreter itself, not the venv's link to it: a checkout under /tmp is not in
    # the sandbox (its /tmp is private), the real interpreter is.
    command = f"touch started && {os.path.realpath(sys.executable)} -c 'import time; time.sleep(300)' {marker}"
    root = workspace(tmp_path, [reply("Running.", ("run_command", {"command": command, "timeoutMs": 120_000})),
                                reply("never")], plugins=TOOLS, extra="\n[tools]\napprove = []\n")
    headless.trust(root)  # approve = [] is the person's own choice here
    proc = headless.start(root, "run the tests")
    wait_for(lambda: (root / "started").exists() and processes_with(marker), what="the command to start")
    code, out, err = interrupt(proc)
    assert code == 130, err
    sid = only_session(root)
    verify_log(root, sid)
    assert closes(root, sid) == ["cancelled"]
    wait_for(lambda: not processes_with(marker), 10, "the command to be killed")
    wait_for(lambda: not pgroup_alive(proc.pid), 10, "the run's processes to end")
    assert "never" not in out


# ---- the loopback OpenAI-compatible server ---------------------------------------------------


@pytest.fixture
def loopback():
    from loopback_models import LoopbackModelServer

    with LoopbackModelServer("openai") as server:
        yield server


def loopback_workspace(tmp_path: Path, headless: Headless, server, plugins: list[str] | None = None) -> Path:
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(f"plugins = {json.dumps(plugins or ['plan', 'goals'])}\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def greet():\n    return 'hi'\n")
    # The model is the person's choice: the user config names the loopback server.
    headless.user_config(f"""\
        [model]
        provider = "openai"
        model = "loopback-model"
        baseUrl = "{server.base_url}"
        apiKeyEnv = "{KEY_ENV}"
        timeoutS = 10
        maxRetries = 0
        """)
    headless.extra_env[KEY_ENV] = KEY
    return root


def test_loopback_a_reply_exits_0_and_the_key_stays_out_of_the_output(tmp_path, headless, loopback):
    from loopback_models import Reply

    loopback.script(Reply(text="Hello over HTTP.", usage=(30, 7)))
    root = loopback_workspace(tmp_path, headless, loopback)
    done = headless.run(root, "hi", "--json")
    assert done.code == 0, done.stderr
    assert done.result["usage"] == {"inputTokens": 30, "outputTokens": 7}
    assert [i["text"] for i in done.items("assistant-message") if not i["partial"]] == ["Hello over HTTP."]
    assert loopback.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in done.stdout + done.stderr


def test_loopback_a_refused_key_exits_1_with_kind_auth(tmp_path, headless, loopback):
    from loopback_models import Failure

    loopback.script(Failure(401, message="invalid api key"))
    root = loopback_workspace(tmp_path, headless, loopback)
    done = headless.run(root, "hi", "--json")
    assert done.code == 1, done.stderr
    assert done.result["stopReason"] == "model-error"
    assert done.result["error"]["kind"] == "auth"
    assert KEY not in done.stdout + done.stderr
    loopback.script(Failure(401, message="invalid api key"))
    text = headless.run(root, "hi")
    assert text.code == 1 and "auth" in text.stderr


def test_loopback_an_approval_refused_exits_3_and_a_round_budget_exits_4(tmp_path, headless, loopback):
    from loopback_models import Call, Reply

    loopback.script(Reply(text="Writing.", tool_calls=[Call("write_file", {"path": "src/x.py", "content": "X = 1\n"})]),
                    Reply(text="I could not."))
    root = loopback_workspace(tmp_path, headless, loopback, plugins=TOOLS)
    done = headless.run(root, "write it", "--json")
    assert done.code == 3, done.stderr
    assert not (root / "src" / "x.py").exists()
    second = loopback.requests[1].json["messages"]
    assert any(m["role"] == "tool" and "approv" in m["content"].lower() for m in second)

    loopback.script(Reply(text="Round one."), Reply(text="Round two."))
    done = headless.run(root, "--goal", "Never done", "--max-rounds", "1", "--json")
    assert done.code == 4, done.stderr
    assert done.result["goal"]["blockedReason"]["code"] == "round-budget-exhausted"


def test_loopback_a_blocked_goal_exits_2(tmp_path, headless, loopback):
    from loopback_models import Call, Reply

    loopback.script(Reply(text="Stuck.", tool_calls=[Call("goal_block", {"code": "needs-review", "message": "Ask a person."})]),
                    Reply(text="Blocked."))
    root = loopback_workspace(tmp_path, headless, loopback)
    done = headless.run(root, "--goal", "Ship it", "--json")
    assert done.code == 2, done.stderr
    assert done.result["goal"]["blockedReason"]["code"] == "needs-review"


def test_loopback_ctrl_c_during_a_streaming_reply_exits_130(tmp_path, headless, loopback):
    from loopback_models import Reply

    loopback.script(Reply(text="x" * 4000, piece=4, chunk_delay=0.05))
    root = loopback_workspace(tmp_path, headless, loopback)
    proc = headless.start(root, "hi", "--json")
    loopback.wait_requests(1)
    time.sleep(0.3)  # mid-stream
    code, out, err = interrupt(proc)
    assert code == 130, err
    lines = check_lines(out, 130)
    sid = lines[0]["sessionId"]
    verify_log(root, sid)
    assert closes(root, sid) == ["cancelled"]
    assert loopback.wait_closed(0) is not None  # the HTTP stream was dropped, not read on
    wait_for(lambda: not pgroup_alive(proc.pid), 10, "the run's processes to end")


# ---- through the workspace's shared daemon ----------------------------------------------------


def test_a_run_through_the_daemon_is_answered_by_the_attached_editor(tmp_path, headless):
    from tests.e2e.test_shared_session import DshClient

    write = ("write_file", {"path": "src/new.py", "content": "X = 1\n"})
    root = workspace(tmp_path, [reply("Writing.", write), reply("Written."),
                                reply("Writing.", write), reply("Not written.")], plugins=TOOLS)
    editor = DshClient(root, headless.runtime)
    try:
        assert "result" in editor.initialize(questions=True, permissions=True)
        created = editor.request("dsh/session/create", {"title": "watched"})
        editor.request("dsh/chat/get", {"agentId": created["agentId"]})  # follow the chat, as an editor's chat view does
        proc = headless.start(root, "make src/new.py", "--session", created["sessionId"], "--json")
        ask = editor.ask("dsh/permission/ask", timeout=60)
        assert ask["params"]["tool"] == "write_file"
        editor.reply_to(ask, {"outcome": "allow-once"})
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        lines = check_lines(out.decode(), 0)
        assert lines[0]["via"] == "daemon" and lines[0]["sessionId"] == created["sessionId"]
        assert (root / "src" / "new.py").read_text() == "X = 1\n"
        # The editor watched the run live: the run's chat items reached it too.
        def seen() -> list[str]:
            return [n["item"]["text"] for n in editor.of("dsh/chat/item")
                    if n["item"]["kind"] == "assistant-message" and not n["item"]["partial"]]

        assert editor.pump(lambda: "Written." in seen())
        assert seen() == ["Writing.", "Written."]
        clients = editor.of("dsh/session/clients")
        assert any(c["clientName"] == "dshd run" for n in clients for c in n["clients"])
        # Control: a run in a session no editor is attached to is refused at once (exit 3).
        (root / "src" / "new.py").unlink()
        alone = headless.run(root, "make src/new.py", "--json")
        assert alone.code == 3 and alone.session["via"] == "daemon"
        assert not (root / "src" / "new.py").exists()
    finally:
        editor.close_stdin()
        editor.wait(10)


# ---- the example workspace, as docs/headless.md runs it --------------------------------------


def test_the_example_workspace_runs_as_the_docs_say(tmp_path, headless):
    """As a fresh clone has it: the committed files of examples/workspace only."""
    repo = EXAMPLE.parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", "HEAD", "examples/workspace"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    root = tmp_path / "examples" / "workspace"
    assert (root / ".dsh" / "config.toml").exists() and not (root / ".dsh" / "sessions").exists()
    done = headless.run(root, "--plan", "Add retries to the HTTP client")
    assert done.code == 3, done.stderr
    assert "# Plan: retries for the HTTP client" in done.stdout
    docs = (Path(__file__).resolve().parents[2] / "docs" / "headless.md").read_text()
    assert 'dshd run --plan "Add retries to the HTTP client"' in docs


def test_a_run_past_its_timeout_exits_1_with_its_turn_cancelled(tmp_path, headless):
    root = workspace(tmp_path, [reply("Too slow.", delay_ms=60_000)])
    started = time.monotonic()
    done = headless.run(root, "hi", "--timeout", "2", "--json")
    assert done.code == 1 and done.result["error"]["kind"] == "timeout"
    assert time.monotonic() - started < 30
    sid = done.session["sessionId"]
    verify_log(root, sid)
    assert closes(root, sid) == ["cancelled"]


def test_a_goal_run_through_the_daemon_goes_on_when_the_editor_leaves(tmp_path, headless):
    """The last *other* client leaving does not disarm the goal a headless run is attached to."""
    from tests.e2e.test_shared_session import DshClient

    root = workspace(tmp_path, [reply("Round one.", delay_ms=1500), reply("Round two."),
                                reply("", ("goal_complete", {})), reply("Done.")])
    editor = DshClient(root, headless.runtime)
    assert "result" in editor.initialize(questions=True, permissions=True)
    created = editor.request("dsh/session/create", {})
    sid = created["sessionId"]
    proc = headless.start(root, "--goal", "Two rounds", "--session", sid, "--json")
    wait_for(lambda: of_type(read_log(root, sid), "turn/open"), what="round one")
    editor.close_stdin()  # the person closes the editor mid-round
    assert editor.wait(10) == 0
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    lines = check_lines(out.decode(), 0)
    assert lines[0]["via"] == "daemon"
    assert lines[-1]["goal"]["phase"] == "complete"
    assert set(closes(root, sid)) == {"end-turn"} and len(closes(root, sid)) >= 3  # every round ran to its end
    verify_log(root, sid)


def test_ctrl_c_of_a_run_through_the_daemon_cancels_its_turn_and_leaves_the_daemon_serving(tmp_path, headless):
    from tests.e2e.test_shared_session import DshClient

    root = workspace(tmp_path, [reply("Too slow.", delay_ms=60_000), reply("Still here.")])
    editor = DshClient(root, headless.runtime)
    try:
        assert "result" in editor.initialize(questions=True, permissions=True)
        created = editor.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        proc = headless.start(root, "--goal", "Wait", "--session", sid, "--json")
        wait_for(lambda: of_type(read_log(root, sid), "turn/open"), what="the round")
        code, out, err = interrupt(proc)
        assert code == 130, err
        lines = check_lines(out, 130)
        assert lines[0]["via"] == "daemon" and lines[-1]["goal"]["activation"] == "disarmed"
        assert closes(root, sid) == ["cancelled"]
        verify_log(root, sid)
        # The daemon and the editor go on: the editor's own prompt runs.
        answer = editor.request("dsh/agent/prompt", {"agentId": agent, "text": "still there?"})
        assert answer["stopReason"] == "end-turn"
        assert closes(root, sid) == ["cancelled", "end-turn"]
    finally:
        editor.close_stdin()
        editor.wait(10)


def test_on_a_terminal_stderr_shows_a_progress_line_and_stdout_stays_the_text(tmp_path, headless):
    import pty
    import threading

    read = ("read_file", {"path": "src/app.py"})
    root = workspace(tmp_path, [reply("Reading.", read, usage=(100, 20), delay_ms=300),
                                reply("It greets.", usage=(150, 10), delay_ms=300)], plugins=TOOLS)
    (root / "sub").mkdir()
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(DSHD), "run", "what does greet do"], cwd=root / "sub", env=headless.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=60)
    reader.join(5)
    os.close(master)
    assert proc.returncode == 0
    progress = seen.decode(errors="replace")
    assert "\r\x1b[K" in progress  # a line redrawn in place
    assert "tokens" in progress and "turn 1" in progress
    assert "Traceback" not in progress
    # stdout is the assistant's text only; the run found the workspace from a subfolder.
    assert out.decode().splitlines() == ["Reading.", "It greets."]
    [sid] = [p.name for p in (root / ".dsh" / "sessions").iterdir()]
    verify_log(root, sid)


def test_interrupted_wins_over_a_person_needed(tmp_path, headless):
    """130 before 3: an approval was refused, then Ctrl-C during the slow reply after it."""
    write = ("write_file", {"path": "src/new.py", "content": "X = 1\n"})
    root = workspace(tmp_path, [reply("Writing.", write), reply("Slow.", delay_ms=60_000)], plugins=TOOLS)
    proc = headless.start(root, "make src/new.py", "--json")
    sid = only_session(root)
    wait_for(lambda: of_type(read_log(root, sid), "tool/result"), what="the refused call")
    time.sleep(0.3)
    code, out, err = interrupt(proc)
    assert code == 130, err
    lines = check_lines(out, 130)
    assert [n["kind"] for n in lines[-1]["personNeeded"]] == ["permission"]  # it still says what was refused
    assert closes(root, sid) == ["cancelled"]


def test_loopback_an_error_wins_over_a_person_needed(tmp_path, headless, loopback):
    """1 before 3: an approval was refused, then the model call after it failed."""
    from loopback_models import Call, Failure, Reply

    loopback.script(Reply(text="Writing.", tool_calls=[Call("write_file", {"path": "src/x.py", "content": "X = 1\n"})]),
                    Failure(500, message="the server broke"))
    root = loopback_workspace(tmp_path, headless, loopback, plugins=TOOLS)
    done = headless.run(root, "write it", "--json")
    assert done.code == 1, done.stderr
    assert done.result["error"]["kind"] == "server"
    assert [n["kind"] for n in done.result["personNeeded"]] == ["permission"]


def test_sigterm_is_handled_as_ctrl_c(tmp_path, headless):
    root = workspace(tmp_path, [reply("Too slow.", delay_ms=60_000)])
    proc = headless.start(root, "hi", "--json")
    sid = only_session(root)
    wait_for(lambda: of_type(read_log(root, sid), "turn/open"), what="the turn")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err.decode()
    assert check_lines(out.decode(), 130)[-1]["stopReason"] == "cancelled"
    assert closes(root, sid) == ["cancelled"]
    verify_log(root, sid)


def test_a_goal_in_plan_mode_stops_at_its_plan_no_round_follows(tmp_path, headless):
    root = workspace(tmp_path, [reply("The plan.", ("exit_plan_mode", {"plan": PLAN})), reply("More planning."),
                                reply("Round two, implementing.")])
    done = headless.run(root, "--plan", "--goal", "Add a cache", "--json")
    assert done.code == 3, done.stderr
    assert done.result["plan"] == PLAN
    assert done.result["goal"]["activation"] == "disarmed" and done.result["goal"]["phase"] == "active"
    events = read_log(root, done.session["sessionId"])
    assert len(of_type(events, "turn/open")) == 1  # the round the plan came in, and no other
    assert "Round two, implementing." not in done.stdout
    assert all(e["data"]["planActive"] for e in of_type(events, "request/header"))


def test_the_docs_flags_are_the_commands_flags():
    """docs/headless.md's flag table and its examples name only flags `dshd run` has, and
    every flag it has is in the table."""
    import re

    docs = (Path(__file__).resolve().parents[2] / "docs" / "headless.md").read_text()
    helped = subprocess.run([str(DSHD), "run", "--help"], capture_output=True, text=True, timeout=60).stdout
    have = set(re.findall(r"(--[a-z][a-z-]+)", helped)) - {"--help"}
    table = set(re.findall(r"^\| `(--[a-z-]+)", docs, re.M))
    assert table == have, (table, have)
    used = {flag for line in docs.splitlines() if "dshd run " in line for flag in re.findall(r"\s(--[a-z][a-z-]+)", line)}
    assert used and used <= have, used - have


def test_an_unknown_session_or_no_last_session_exits_1(tmp_path, headless):
    root = workspace(tmp_path, [reply("never")])
    done = headless.run(root, "hi", "--last", "--json")
    assert done.code == 1 and done.result["error"]["kind"], done.stderr
    done = headless.run(root, "hi", "--session", "s-01m8sf4p6ajrvnth97x0ap5rvy", "--json")
    assert done.code == 1 and done.result["error"]["kind"], done.stderr
    assert "s-01m8sf4p6ajrvnth97x0ap5rvy" in done.stderr


@needs_sandbox
def test_a_runs_commands_are_in_the_editors_sandbox(tmp_path, headless):
    outside = tmp_path / f"outside-{os.getpid()}"
    command = f"touch inside.txt; touch {outside}; echo done"
    root = workspace(tmp_path, [reply("Running.", ("run_command", {"command": command})), reply("Ran.")],
                     plugins=TOOLS, extra="\n[tools]\napprove = []\n")
    headless.trust(root)  # approve = [] is the person's choice; the sandbox stays workspace-write
    done = headless.run(root, "touch them", "--json")
    assert done.code == 0, done.stderr
    assert (root / "inside.txt").exists()  # control: the workspace is writable
    assert not outside.exists()  # outside it is not
