"""W-1: the one launcher. bubblewrap's own environment holds nothing of the daemon's (a
loader variable there runs code outside every namespace), and no value of a command's or
an MCP server's environment (a token) is on any process's command line, which every local
user can read in /proc/<pid>/cmdline.

Each probe has its control in the same test: the environ reader finds a canary in a bare
bubblewrap given the daemon's environment (what dshd did), and the command-line scan finds
a value put on a command line; the canary and the token do reach the command and the
server (so a test where nothing arrived would fail)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dshd.agent.tools import Policy, ToolContext
from dshd.sandbox.launcher import BWRAP_ENV
from dshd.tools.run import RunCommand
from tests.sandbox_support import needs_sandbox

pytestmark = needs_sandbox


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def bwrap_children() -> list[int]:
    """This process's children that are bubblewrap (a command's or a server's)."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
            ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
            exe = os.readlink(f"{entry.path}/exe")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and os.path.basename(exe) == "bwrap":
            found.append(int(entry.name))
    return found


def cmdlines_holding(value: str) -> list[tuple[int, str]]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            line = Path(entry.path, "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if value in line:
            found.append((int(entry.name), line.replace("\0", " ")))
    return found


async def wait_for(predicate, what: str, seconds: float = 15):
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        found = predicate()
        if found:
            return found
        assert asyncio.get_running_loop().time() < deadline, f"never saw {what}"
        await asyncio.sleep(0.02)


async def test_bubblewrap_runs_with_a_fixed_environment_and_the_command_gets_its_own(tmp_path, monkeypatch):
    canary = f"canary-{secrets.token_hex(6)}"
    monkeypatch.setenv("DSHD_CANARY", canary)
    monkeypatch.setenv("GCONV_PATH", str(tmp_path))  # a loader variable in the daemon's environment

    # Control: the reader sees a canary in a bubblewrap given the daemon's environment.
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    bare = subprocess.Popen([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--", "sleep", "5"], env=dict(os.environ))
    try:
        seen = await wait_for(lambda: environ_of(bare.pid) if bare.poll() is None else None, "the bare bubblewrap")
        assert seen.get("DSHD_CANARY") == canary
    finally:
        bare.kill()
        bare.wait()

    ws = (tmp_path / "ws").resolve()
    (ws / ".dsh").mkdir(parents=True)
    ctx = ToolContext("test", 1, 1, ws, Policy("workspace-write", False, ()))  # type: ignore[arg-type]
    command = 'echo "$DSHD_CANARY ${GCONV_PATH-unset}"; sleep 2'
    running = asyncio.ensure_future(RunCommand(["DSHD_CANARY", "GCONV_PATH"])(ctx, {"command": command}))
    try:
        [pid] = await wait_for(bwrap_children, "the command's bubblewrap")
        assert environ_of(pid) == BWRAP_ENV  # nothing of the daemon's, nothing configured
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:3] == [b"--json-status-fd", cmdline[2]] and b"--args" in cmdline
        assert not any(canary.encode() in arg for arg in cmdline)
    finally:
        outcome = await running
    assert outcome.ok, outcome.content
    # The command's own variables arrived (set inside the sandbox); the loader one did not.
    assert outcome.content.splitlines()[1] == f"{canary} unset"


async def test_an_mcp_servers_env_value_is_on_no_command_line(tmp_path):
    from tests.mcp_agent_support import INSTANT, servers_of, workspace

    token = f"tok-{secrets.token_hex(8)}"
    # Control: the scan finds a value put on a command line. A process that starts no other
    # (`sh -c "sleep 5"` forks its sleep: a child killed with the shell or not yet exec'd
    # still shows the shell's command line, token and all, after the shell is gone).
    shown = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)", token])
    try:
        assert await wait_for(lambda: cmdlines_holding(token), "a value on a command line")
    finally:
        shown.kill()
        shown.wait()
    assert not cmdlines_holding(token)

    seen = tmp_path / "ws" / "seen.txt"
    # The interpreter and the server as arguments (exec "$@"): where this checkout is under
    # /tmp, dshd shows its folder to the sandbox for a path argument, not for a word in a script.
    script = f'printf %s "$SERVER_TOKEN" > {seen}; exec "$@"'
    tokened = {"command": "/bin/sh", "args": ["-c", script, "tokened", sys.executable, INSTANT], "env": {"SERVER_TOKEN": token}}
    ws = workspace(tmp_path, [{"text": "done"}], {"tokened": tokened})
    agent = ws.create_session()
    try:
        await agent.prompt("go")
        [state] = servers_of(agent).states()
        assert state.state == "ready", state.reason
        assert seen.read_text() == token  # the token reached the server, in its environment
        assert cmdlines_holding(token) == []  # and no process's command line
        [pid] = bwrap_children()
        assert set(environ_of(pid)) <= {*BWRAP_ENV, "DSHD_MCP_SERVER"}  # the SDK's own names dropped
        assert token not in Path(f"/proc/{pid}/environ").read_text(errors="replace")
    finally:
        await agent.aclose()


def test_only_the_launcher_builds_a_bubblewrap_command():
    """Every sandboxed start goes through the launcher: no module of the package but the
    sandbox's policy (which defines them) and the launcher names the functions that build
    bubblewrap's arguments. Control: the scan finds the launcher's own use."""
    import ast

    package = Path(__file__).resolve().parents[2] / "server" / "dshd"
    builders = {"bwrap_argv", "bwrap_args", "bwrap_options"}
    users = set()
    for path in package.rglob("*.py"):
        names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
        names |= {alias.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
                  for alias in node.names}
        if names & builders:
            users.add(path.relative_to(package).as_posix())
    assert "sandbox/launcher.py" in users  # the scan sees a use
    assert users <= {"sandbox/launcher.py", "sandbox/policy.py", "sandbox/__init__.py"}, users
