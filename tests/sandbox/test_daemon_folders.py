"""W-3 (the sandbox's part): dshd's own folders, the shared daemon's socket folder and the
user's dshd state folder (its key marks dshd's own state), are empty in every sandbox, in
every mode, with the network off and on, for commands and MCP servers alike. Control: on
the host the folders hold their files, and a folder that is not this user's own (a link)
is left alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dshd.agent.tools import Policy, ToolContext
from dshd.tools.run import RunCommand, daemon_folders
from tests.sandbox_support import needs_sandbox

pytestmark = needs_sandbox


@pytest.fixture
def dshd_folders(tmp_path: Path, monkeypatch):
    """A runtime folder outside /run and /tmp (so only the concealing hides it) holding the
    daemon's socket folder, and a state folder holding dshd's key."""
    base = Path("/var/tmp") / f"dshd-w3-{os.getpid()}-{tmp_path.name}"
    runtime, state = base / "runtime", base / "state"
    (runtime / "dshd").mkdir(parents=True)
    (runtime / "dshd" / "0123456789abcdef.sock.lock").write_text("lock")
    (state / "dsh").mkdir(parents=True)
    (state / "dsh" / "state.key").write_text("secret-key")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    yield runtime / "dshd", state / "dsh"
    for path in sorted(base.rglob("*"), key=lambda p: -len(p.parts)):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    base.rmdir()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full-access"])
async def test_dshd_folders_are_empty_in_every_sandbox(tmp_path, dshd_folders, mode):
    sockets, state = dshd_folders
    assert os.listdir(sockets) and os.listdir(state)  # the control: there on the host
    assert {str(sockets), str(state)} <= set(daemon_folders())
    ws = (tmp_path / "ws").resolve()
    (ws / ".dsh").mkdir(parents=True)
    look = f"ls -A {sockets} 2>/dev/null | wc -l; cat {state}/state.key 2>&1 || true"  # empty or gone
    for network in (False, True):
        ctx = ToolContext("test", 1, 1, ws, Policy(mode, network, ()))  # type: ignore[arg-type]
        outcome = await RunCommand()(ctx, {"command": look})
        assert outcome.ok, outcome.content
        lines = outcome.content.splitlines()[1:]
        assert lines[0].strip() == "0", (network, outcome.content)
        assert "secret-key" not in outcome.content and "No such file" in lines[1], (network, outcome.content)


async def test_an_mcp_server_does_not_see_them_either(tmp_path, dshd_folders):
    from tests.mcp_agent_support import INSTANT, servers_of, workspace

    sockets, state = dshd_folders
    report = tmp_path / "ws" / "report.txt"
    # The interpreter and the server as arguments (exec "$@"): where this checkout is under
    # /tmp, dshd shows its folder to the sandbox for a path argument, not for a word in a script.
    script = f'{{ ls -A {sockets} 2>/dev/null | wc -l; ls -A {state} | wc -l; }} > {report}; exec "$@"'
    looker = {"command": "/bin/sh", "args": ["-c", script, "looker", sys.executable, INSTANT]}
    agent = workspace(tmp_path, [{"text": "done"}], {"looker": looker}).create_session()
    try:
        await agent.prompt("go")
        [server] = servers_of(agent).states()
        assert server.state == "ready", server.reason
    finally:
        await agent.aclose()
    assert [line.strip() for line in report.read_text().splitlines()] == ["0", "0"]


def test_a_folder_that_is_not_ours_is_not_hidden(tmp_path, monkeypatch):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "dshd").symlink_to(tmp_path)  # a link where the folder should be
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "no-state"))
    assert str(runtime / "dshd") not in daemon_folders()
    (runtime / "dshd").unlink()
    (runtime / "dshd").mkdir()
    assert str(runtime / "dshd") in daemon_folders()  # the control: a real folder of ours is
