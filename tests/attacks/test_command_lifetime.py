"""Commands through the real daemon: nothing a command starts outlives it (its exit, its
timeout, the daemon killed with SIGKILL), full access included, and a full-access command
cannot read the daemon's environment from /proc. Leftovers are looked for in the process
table by a marker in their argv."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from dshd.sandbox import run
from tests.e2e.support import read_log
from tests.e2e.test_tools import calls, results, run_turn, tools_workspace
from tests.sandbox_support import fake_failing_bwrap, gone, needs_sandbox, processes_with, sleeper

pytestmark = needs_sandbox


@pytest.fixture
def daemons(daemons):
    daemons.trusted = True  # the [tools] tables here are the person's own settings
    return daemons


def leavers(marker: str) -> str:
    """setsid, double fork, nohup; holding the output pipe or not."""
    return (
        f"setsid {sleeper(marker)} > /dev/null 2>&1 & "
        f"nohup {sleeper(marker)} > /dev/null 2>&1 & "
        f"( {sleeper(marker)} & ) ; "
        f"( setsid {sleeper(marker)} & ) ; "
        "echo started"
    )


@pytest.mark.parametrize("sandbox", ["workspace-write", "full-access"])
async def test_a_command_that_exits_0_is_exit_0_and_leaves_nothing(workspace, daemons, sandbox):
    marker = f"dsh-e2e-exit-{sandbox}-{os.getpid()}"
    tools_workspace(workspace, [calls(("run_command", {"command": leavers(marker), "timeoutMs": 20_000})), {"text": "ok"}],
                    f'sandbox = "{sandbox}"\nnetwork = true\napprove = []')
    client = await daemons.start()
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert result["ok"] and result["content"].startswith(f"exit code 0 ({sandbox} sandbox, network on)"), result
    assert "timed out" not in result["content"] and "started" in result["content"]
    assert await gone(marker) == []


async def test_the_timeout_holds_in_full_access(workspace, daemons):
    marker = f"dsh-e2e-full-timeout-{os.getpid()}"
    command = leavers(marker) + f"; {sleeper(marker)}"
    tools_workspace(workspace, [calls(("run_command", {"command": command, "timeoutMs": 1500})), {"text": "ok"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = []')
    client = await daemons.start()
    loop = asyncio.get_running_loop()
    begun = loop.time()
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert not result["ok"] and result["content"].startswith("timed out after 1500 ms"), result
    assert loop.time() - begun < 20
    assert await gone(marker) == []


@pytest.mark.parametrize("sandbox", ["workspace-write", "full-access"])
@pytest.mark.parametrize("end", ["cancel", "sigkill"])
async def test_nothing_a_command_started_outlives_a_cancel_or_the_daemon_killed(workspace, daemons, sandbox, end):
    marker = f"dsh-e2e-{end}-{sandbox}-{os.getpid()}"
    command = leavers(marker) + f"; {sleeper(marker)}"
    tools_workspace(workspace, [calls(("run_command", {"command": command})), {"text": "never"}],
                    f'sandbox = "{sandbox}"\nnetwork = true\napprove = []')
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}))
    deadline = asyncio.get_running_loop().time() + 15
    while len(processes_with(marker)) < 5:
        assert asyncio.get_running_loop().time() < deadline, processes_with(marker)
        await asyncio.sleep(0.05)
    if end == "cancel":
        await client.request("dsh/agent/cancel", {"agentId": created["agentId"]})
        assert (await asyncio.wait_for(prompt, 10))["stopReason"] == "cancelled"
    else:
        os.kill(client.lsp._server.pid, signal.SIGKILL)  # no atexit, no cleanup: only the kernel acts
        await asyncio.gather(prompt, return_exceptions=True)
    assert await gone(marker) == []


async def test_full_access_cannot_read_the_daemons_environment(workspace, daemons):
    """The daemon's /proc/<pid>/environ holds what it was started with (here a marker
    standing for an API key). A full-access command runs in a PID namespace of its own:
    the daemon is not in its /proc, nor is any process carrying the marker. Control: the
    same command without a sandbox finds the marker in both places."""
    secret = f"dsh-environ-marker-{os.getpid()}"
    command = (
        "cat /proc/$(cat daemon.pid)/environ 2>/dev/null | tr '\\0' '\\n' | grep -c " + secret + "; "
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c " + secret + "; "
        "ls /proc | grep -c '^[0-9]'"
    )
    tools_workspace(workspace, [calls(("run_command", {"command": command})), {"text": "ok"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = []')
    client = await daemons.start(env={"OPENAI_API_KEY": secret})
    (workspace / "daemon.pid").write_text(str(client.lsp._server.pid))  # read by the command when it runs
    plain = await run(["/bin/sh", "-c", command], cwd=workspace, env={"PATH": os.environ["PATH"]}, timeout_s=30, output_cap=4096)
    assert plain.output.split()[:2] == ["1", "1"], plain.output
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    counts = result["content"].splitlines()[1:]
    # Not the daemon's environ (no such pid in there), no process with the marker, a handful of pids.
    assert counts[:2] == ["0", "0"] and int(counts[2]) < 10, result


@pytest.mark.slow
async def test_full_access_with_the_network_on_runs_without_bubblewrap_and_says_so(workspace, daemons, tmp_path):
    """Where bubblewrap cannot run, only full access with the network on still runs a
    command (the person asked for no restriction), and the result says what is missing.
    Control: the same workspace with the network off does not run it."""
    fake = fake_failing_bwrap(tmp_path / "fake-bin")
    path = {"PATH": f"{fake.parent}:{os.environ['PATH']}"}
    tools_workspace(workspace, [calls(("run_command", {"command": "echo ran > ran.txt"})), {"text": "ok"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = []')
    client = await daemons.start(env=path)
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert result["ok"] and result["content"].startswith("exit code 0 (full-access, network on, not sandboxed: bubblewrap cannot"), result
    assert "setting up uid map" in result["content"] and (workspace / "ran.txt").read_text() == "ran\n"
    await client.stop()
    (workspace / "ran.txt").unlink()
    tools_workspace(workspace, [calls(("run_command", {"command": "echo ran > ran.txt"})), {"text": "ok"}],
                    'sandbox = "full-access"\nnetwork = false\napprove = []')
    client = await daemons.start(env=path)
    sid, _ = await run_turn(client)
    [refused] = results(read_log(workspace, sid))
    assert not refused["ok"] and refused["content"].startswith("Not run: no sandbox can be built here")
    assert not (workspace / "ran.txt").exists()
