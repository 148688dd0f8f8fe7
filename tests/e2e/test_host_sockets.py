"""Network off reaches no socket of the host, through the real daemon: a host process
listens on Unix sockets in /tmp, under /run, in the daemon's $XDG_RUNTIME_DIR and on an
abstract name; the model's command tries each. Controls in the same test: the same probe
run without a sandbox reaches every one, and with network = true the command reaches them
(docs/tools.md: the network on shares the machine's sockets)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dshd.sandbox import run
from tests.e2e.support import read_log
from tests.e2e.test_tools import calls, results, run_turn, tools_workspace
from tests.sandbox_support import PYTHON, UNIX_CONNECT, UnixListeners, connect_results, needs_sandbox, run_folder

pytestmark = [needs_sandbox, pytest.mark.xdist_group("host-sockets")]  # see tests/sandbox/test_sandbox.py


@pytest.fixture
def daemons(daemons):
    daemons.trusted = True  # network = true below is the person's own setting
    return daemons


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["workspace-write", "full-access"])
async def test_a_command_reaches_no_host_unix_socket_with_the_network_off(workspace, daemons, sandbox):
    tag = f"dsh-e2e-h4-{os.getpid()}-{sandbox}"
    runtime = Path("/var/tmp") / f"{tag}-xdg"
    where = {
        "tmp": f"/tmp/{tag}.sock",
        "run": f"{run_folder()}/{tag}/daemon.sock",
        "xdg": f"{runtime}/agent.sock",
        "abstract": f"@{tag}",
    }
    command = f"{PYTHON} probe.py " + " ".join(where.values())
    with UnixListeners(**where):
        outcomes = {}
        for network in ("false", "true"):
            tools_workspace(workspace, [calls(("run_command", {"command": command})), {"text": "ok"}],
                            f'sandbox = "{sandbox}"\nnetwork = {network}\napprove = []')
            (workspace / "probe.py").write_text(UNIX_CONNECT)
            client = await daemons.start(env={"XDG_RUNTIME_DIR": str(runtime)})
            sid, _ = await run_turn(client)
            [result] = results(read_log(workspace, sid))
            assert result["ok"], result
            outcomes[network] = connect_results(result["content"].split("\n", 1)[1])
            await client.stop()
        plain = await run(["/bin/sh", "-c", command], cwd=workspace, env=dict(os.environ), timeout_s=30, output_cap=4096)
    assert set(connect_results(plain.output).values()) == {"OK"}, plain.output  # the probe works
    assert outcomes["false"] == {
        where["tmp"]: "ENOENT", where["run"]: "ENOENT", where["xdg"]: "ENOENT", where["abstract"]: "ECONNREFUSED"
    }
    expected_on = {target: "OK" for target in where.values()}
    if sandbox == "workspace-write":
        expected_on[where["tmp"]] = "ENOENT"  # its /tmp is private, network or not
    assert outcomes["true"] == expected_on
