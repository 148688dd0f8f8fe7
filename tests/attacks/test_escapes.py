"""Escapes (W-6): a hostile MCP server's strings (tool names, titles, descriptions, error
texts, stderr) and a model's reply never reach a person's terminal, the daemon's log or an
editor raw. Each test runs the real `dshd` (doctor, run, serve, the shared daemon) with
tests/fixtures/mcp_servers/hostile_text.py configured, reads every byte a person would
see (a real pseudo-terminal, stderr, the log file, the editor's notifications), and
finds no ESC, C1, BEL, bidi or other control character in them; the escaped forms are
there instead.

Positive control, in each test: the fixture's own strings hold the controls (read from
the server directly), and the same probe run over the fixture's raw stderr written to
a pseudo-terminal finds them."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import DSHD, Runtime, connect_command

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "hostile_text.py"
COMMAND = [str(DSHD)] if DSHD.exists() else [sys.executable, "-m", "dshd"]
_spec = importlib.util.spec_from_file_location("hostile_text", SERVER)
hostile = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(hostile)  # type: ignore[union-attr]

# What must never reach a person raw: C0 but tab and line feed (a carriage return counts:
# it overwrites the line), DEL and C1, the bidi controls, the line separators, invisible
# format characters, and bytes that are not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal).
RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
    "\u00ad\u200b\u2060-\u2064\ufeff\udc80-\udcff]"
)
# dshd run's own progress line on a terminal: back to the line's start, clear it.
PROGRESS_CONTROL = "\r\x1b[K"
HOSTILE_CHARS = {"\x1b", "\x9b", "\u202e", "\x07", "\n"}


def raw_controls(data: bytes, *, allow: tuple[str, ...] = ()) -> list[str]:
    """The characters of ``data`` a terminal would act on (or that hide text), by name."""
    text = data.decode("utf-8", "surrogateescape").replace("\r\n", "\n")  # a tty's own \r\n
    for mine in allow:
        text = text.replace(mine, "")
    return sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})


def under_pty(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 90) -> tuple[int, bytes]:
    """Run ``argv`` with stdin, stdout and stderr on a new pseudo-terminal; every byte the
    terminal got, and the exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    got = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{argv} did not end in {timeout} s; it wrote {bytes(got)[-2000:]!r}")
        return proc.wait(10), bytes(got)
    finally:
        os.close(master)


def fixture_strings() -> tuple[list[str], bytes]:
    """The fixture read directly: the names of the tools it lists, and its stderr."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = subprocess.run(
        [sys.executable, str(SERVER)], input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True, timeout=30,
    )  # fmt: skip
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    return [tool["name"] for tool in replies[1]["result"]["tools"]] + [replies[1]["result"]["tools"][0]["title"]], done.stderr


@pytest.fixture(scope="module")
def positive_control(tmp_path_factory) -> None:
    """The fixture carries every control, and the probe finds them on a terminal."""
    names, stderr = fixture_strings()
    assert hostile.HOSTILE_NAME in names and all(c in hostile.HOSTILE_NAME for c in HOSTILE_CHARS)
    assert b"\x1b[2J" in stderr and b"\x1b]52;" in stderr and "\u202e".encode() in stderr and "\x9b".encode() in stderr
    _code, seen = under_pty([sys.executable, str(SERVER), "--die-at-start"], cwd=tmp_path_factory.mktemp("raw"), env=dict(os.environ))
    assert {"U+001B", "U+009B", "U+202E", "U+0007"} <= set(raw_controls(seen)), seen


def config_home(tmp_path: Path, approve: str = "never") -> Path:
    """A user config with two servers run as the person (the escaping does not depend on
    the sandbox): ``h`` lists the hostile tools, ``d`` dies at start saying hostile words."""
    home = tmp_path / "home"
    (home / "dsh").mkdir(parents=True)
    tables = ""
    for name, args in (("h", [str(SERVER)]), ("d", [str(SERVER), "--die-at-start"])):
        tables += (
            f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"
            f'sandbox = "none"\napprove = "{approve}"\n\n'
        )
    (home / "dsh" / "config.toml").write_text(tables)
    return home


CALLS = [
    {"toolCalls": [{"name": "mcp__h__fail", "arguments": {}}]},
    {"toolCalls": [{"name": "mcp__h__crash", "arguments": {}}]},
    {"text": "The model says: " + hostile.HOSTILE},
]


def escaped_forms_in(text: str) -> None:
    assert "\\u001b[2J" in text and "\\u001b]52;" in text and "\\u009b" in text and "\\u202e" in text, text[-3000:]


# ---- dshd doctor -------------------------------------------------------------------------


def test_doctor_on_a_terminal_shows_a_hostile_servers_strings_escaped(tmp_path, positive_control):
    root = write_workspace(tmp_path / "ws", [], plugins=["plan", "goals", "mcp"])
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home(tmp_path))}
    code, seen = under_pty(COMMAND + ["doctor", "--workspace", str(root)], cwd=root, env=env)
    text = seen.decode("utf-8", "replace")
    assert code == 1 and "mcp       h (user, stdio): ready" in text and "mcp       d (user, stdio): FAILED" in text, text
    escaped_forms_in(text)  # the failed server's last words, the left-out tool's name
    assert raw_controls(seen) == [], text

    code, seen = under_pty(COMMAND + ["doctor", "--workspace", str(root), "--json"], cwd=root, env=env)
    assert raw_controls(seen) == [], seen
    [line] = [line for line in seen.decode().splitlines() if line.startswith("{")]
    report = json.loads(line)  # the same value: the server's words as it said them
    [failed] = [s for s in report["mcp"]["servers"] if s["name"] == "d"]
    assert hostile.CONTROLS in failed["reason"]


# ---- dshd run ----------------------------------------------------------------------------


def test_run_on_a_terminal_shows_tool_errors_and_the_models_reply_escaped(tmp_path, positive_control):
    root = write_workspace(tmp_path / "ws", CALLS, plugins=["plan", "goals", "tools", "mcp"])
    runtime = Runtime()  # a private runtime folder: no daemon of the person's is reached
    try:
        env = {**os.environ, **runtime.env, "XDG_CONFIG_HOME": str(config_home(tmp_path))}
        code, seen = under_pty(COMMAND + ["run", "go"], cwd=root, env=env)
        text = seen.decode("utf-8", "replace")
        assert code == 0 and "The model says: " in text, text
        escaped_forms_in(text)
        assert raw_controls(seen, allow=(PROGRESS_CONTROL,)) == [], text
        # The left-out tool's name is one line of its warning; only the model's reply, whose
        # lines are its own, starts a line with the words after the line break.
        assert "\\ndshd: everything approved left out" in text
        assert text.replace("\r\n", "\n").count("\ndshd: everything approved") == 1

        (root / "script.json").write_text(json.dumps({"replies": CALLS}))
        code, seen = under_pty(COMMAND + ["run", "go", "--json"], cwd=root, env=env)
        assert code == 0 and raw_controls(seen) == [], seen
        items = [json.loads(line)["item"] for line in seen.decode().splitlines() if line.startswith('{"type": "item"')]
        replies = [i["text"] for i in items if i["kind"] == "assistant-message" and not i.get("partial")]
        assert replies[-1] == "The model says: " + hostile.HOSTILE  # JSON escapes, the value unchanged
    finally:
        runtime.stop()


def test_run_through_the_shared_daemon_on_a_terminal_shows_its_messages_escaped(tmp_path, positive_control):
    root = write_workspace(tmp_path / "ws", CALLS, plugins=["plan", "goals", "tools", "mcp"])
    runtime = Runtime()
    try:
        env = {**os.environ, **runtime.env, "XDG_CONFIG_HOME": str(config_home(tmp_path))}
        with RawDaemon(root, env=env, command=connect_command()) as editor:  # starts the daemon, stays on it
            editor.initialize()
            code, seen = under_pty(COMMAND + ["run", "go"], cwd=root, env=env)
            editor.request("dsh/session/list", {})
        text = seen.decode("utf-8", "replace")
        # The daemon's window/showMessage about each failed server, as the run's notices.
        assert code == 0 and 'dshd run: MCP server "h" failed' in text and "The model says: " in text, text
        escaped_forms_in(text)
        assert raw_controls(seen, allow=(PROGRESS_CONTROL,)) == [], text
    finally:
        runtime.stop()


# ---- dshd serve, the shared daemon, and the editor's notifications -----------------------


def drive(client: RawDaemon) -> None:
    """A session whose servers start (one listing a hostile tool name, one dying with
    hostile words) and a turn calling the hostile tools (an error, a crash)."""
    client.initialize()
    agent = client.request("dsh/session/create", {})["agentId"]
    assert client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}, timeout=60)["stopReason"] == "end-turn"
    client.request("dsh/session/list", {})  # a round trip: what was sent before it is in


def told_people(client: RawDaemon) -> list[str]:
    return [
        n["params"]["message"] for n in client.notifications
        if n["method"] in ("window/logMessage", "window/showMessage")
    ]  # fmt: skip


def test_serve_stderr_and_the_editors_messages_carry_no_raw_control(tmp_path, positive_control):
    root = write_workspace(tmp_path / "ws", CALLS, plugins=["plan", "goals", "tools", "mcp"])
    env = {"XDG_CONFIG_HOME": str(config_home(tmp_path))}
    with RawDaemon(root, env=env, log_level="WARNING") as client:
        drive(client)
        assert client.shutdown_and_exit(20) == 0
        stderr = bytes(client.stderr_bytes)
        messages = told_people(client)
    escaped_forms_in(stderr.decode("utf-8", "replace"))  # the warnings are there, escaped
    assert raw_controls(stderr) == [], stderr
    assert any("\\u001b[2J" in m for m in messages), messages  # the editor was told of them
    assert [m for m in messages if RAW.search(m.replace("\n", " "))] == []
    # One record is one line: a forged line never starts a line of its own.
    assert not any(line.startswith("dshd: everything approved") for line in stderr.decode().splitlines())


def test_the_shared_daemons_log_file_and_its_editors_messages_carry_no_raw_control(tmp_path, positive_control):
    root = write_workspace(tmp_path / "ws", CALLS, plugins=["plan", "goals", "tools", "mcp"])
    runtime = Runtime()
    try:
        env = {**runtime.env, "XDG_CONFIG_HOME": str(config_home(tmp_path))}
        with RawDaemon(root, env=env, log_level="WARNING", command=connect_command()) as client:
            drive(client)
            messages = told_people(client)
        [log_file] = list(runtime.sockets.glob("*.log"))
        deadline = time.monotonic() + 10
        while "\\u001b[2J" not in log_file.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.05)
        written = log_file.read_bytes()
    finally:
        runtime.stop()
    escaped_forms_in(written.decode("utf-8", "replace"))
    assert raw_controls(written) == [], written
    assert any("\\u001b[2J" in m for m in messages), messages
    assert [m for m in messages if RAW.search(m.replace("\n", " "))] == []


# ---- dshd log show, dshd goal: a log holds the model's and the servers' words -------------


MODEL_TOOL = "evil\x1b]0;OWNED-TITLE\x07\x9b2J\u202e\ndshd: everything approved"  # a tool no one has


def test_log_show_and_goal_on_a_terminal_show_the_logs_strings_escaped(tmp_path, positive_control):
    calls = [{"toolCalls": [{"name": MODEL_TOOL, "arguments": {}}]}] + CALLS
    root = write_workspace(tmp_path / "ws", calls, plugins=["plan", "goals", "tools", "mcp"])
    runtime = Runtime()
    try:
        env = {**os.environ, **runtime.env, "XDG_CONFIG_HOME": str(config_home(tmp_path))}
        done = subprocess.run(COMMAND + ["run", "go", "--json"], cwd=root, env=env, capture_output=True, timeout=90)
        assert done.returncode == 0, done.stderr
        [log] = list((root / ".dsh" / "sessions").glob("*/log.jsonl"))
        events = [json.loads(line) for line in log.read_bytes().splitlines()]
        # Control: the log holds the model's tool name and its reply as they were.
        assert any(e["type"] == "tool/call" and e["data"]["name"] == MODEL_TOOL for e in events)
        assert any(hostile.HOSTILE in e["data"]["text"] for e in events if e["type"] == "assistant/message")

        for how in ([], ["--chat"], ["--goal"]):
            code, seen = under_pty(COMMAND + ["log", "show", str(log), *how], cwd=root, env=env)
            text = seen.decode("utf-8", "replace")
            assert code == 0 and raw_controls(seen) == [], (how, text)
            if how != ["--goal"]:
                assert "\\u001b]0;OWNED-TITLE\\u0007" in text, (how, text)  # shown, escaped
            if not how:  # one event, one line: the model's tool name forges none
                assert "MCP server h failed: its process exited; its last words on stderr: \\u001b[2J" in text, text
                assert "\\ndshd: everything approved" in text and "\ndshd: everything approved" not in text.replace("\r\n", "\n")

        code, seen = under_pty(COMMAND + ["goal", "create", "Fix it " + hostile.HOSTILE], cwd=root, env=env)
        assert code == 0 and raw_controls(seen) == [], seen
        for how in ([], ["--json"]):
            code, seen = under_pty(COMMAND + ["goal", "status", *how], cwd=root, env=env)
            assert code == 0 and raw_controls(seen) == [], (how, seen)
        goal = json.loads(seen.decode())  # --json: the same value, its objective as typed
        assert hostile.CONTROLS in goal["objective"]
    finally:
        runtime.stop()


# ---- by construction: every log handler of dshd escapes ----------------------------------


def plain_formatters(source: str) -> list[int]:
    """Lines of ``source`` that give a log handler a formatter other than the escaping one
    (``RedactingFormatter``), or let ``basicConfig`` make a plain one (``format=``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "setFormatter":
            given = node.args[0] if node.args else None
            made = given.func if isinstance(given, ast.Call) else None
            made_name = made.attr if isinstance(made, ast.Attribute) else getattr(made, "id", None)
            if made_name != "RedactingFormatter":
                found.append(node.lineno)
        elif name == "basicConfig" and any(k.arg in ("format", "style") for k in node.keywords):
            found.append(node.lineno)
    return found


def test_every_log_handler_in_dshd_gets_the_escaping_formatter():
    server = Path(__file__).resolve().parents[2] / "server"
    sources = sorted(server.rglob("*.py"))
    handlers = {p: plain_formatters(p.read_text()) for p in sources}
    assert [f"{p.relative_to(server)}:{line}" for p, lines in handlers.items() for line in lines] == []
    assert sum("RedactingFormatter(" in p.read_text() for p in sources) >= 4  # the daemon, serve, acp, run, the CLIs
    # Control: the check finds a plain formatter and a basicConfig that makes one.
    assert plain_formatters("h.setFormatter(logging.Formatter('%(message)s'))\nlogging.basicConfig(format='%(message)s')") == [1, 2]
    assert plain_formatters("h.setFormatter(RedactingFormatter('%(message)s'))") == []
