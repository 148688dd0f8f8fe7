"""Host sockets from a sandboxed command, through the real daemon: a host process listens
on Unix sockets in /tmp, under /run, in the daemon's $XDG_RUNTIME_DIR and on an abstract
name; the model's command tries each. With the network off no mode reaches one, and with
the network on read-only and workspace-write reach none either: the command cannot make a
Unix socket at all (EPERM). Only full-access with the network on keeps the host's sockets
(docs/tools.md). Control in the same test: the same probe run without a sandbox reaches
every one. (tests/attacks/test_host_sockets.py tries the sockets a list of folders and
names would miss: renamed, linked, relative, late, and a real ssh control master.)"""

from __future__ import annotations

import os
import shutil
import tempfile
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
@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write", "full-access"])
async def test_a_command_reaches_no_host_unix_socket_but_in_full_access_with_the_network_on(workspace, daemons, sandbox):
    tag = f"dsh-e2e-h4-{os.getpid()}-{sandbox}"
    # The daemon's own runtime folder: it makes its folders there too, so the test makes it
    # and removes it whole.
    runtime = Path(tempfile.mkdtemp(prefix=f"{tag}-xdg-", dir="/var/tmp"))
    where = {
        "tmp": f"/tmp/{tag}.sock",
        "run": f"{run_folder()}/{tag}/daemon.sock",
        "xdg": f"{runtime}/agent.sock",
        "abstract": f"@{tag}",
    }
    command = f"{PYTHON} probe.py " + " ".join(where.values())
    try:
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
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    assert set(connect_results(plain.output).values()) == {"OK"}, plain.output  # the probe works
    # The command's own socket() is refused: no path or name to find, hide or cover.
    assert outcomes["false"] == {target: "EPERM" for target in where.values()}
    on = "OK" if sandbox == "full-access" else "EPERM"  # network means TCP and UDP, not the host's sockets
    assert outcomes["true"] == {target: on for target in where.values()}
