"""The sandbox (layer 1) against the real kernel: bubblewrap argv per mode, what each mode
blocks (asserting the errno a command sees, and running the same probe unsandboxed to
prove the probe itself works), network isolation against a loopback listener this test
starts, and commands killed with everything they started (checked in the process table)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from dshd.sandbox import SandboxPolicy, bwrap_argv, probe, run
from dshd.sandbox.runner import kill_all
from tests.sandbox_support import (
    CONNECT,
    PYTHON,
    WRITE,
    Listener,
    fake_failing_bwrap,
    gone,
    needs_sandbox,
    processes_with,
    sleeper,
)


def policy(ws: Path, mode: str, network: bool = False) -> SandboxPolicy:
    protect = tuple(ws / name for name in (".git", ".dsh") if (ws / name).exists())
    return SandboxPolicy(mode, network, ws, protect)  # type: ignore[arg-type]


async def sandboxed(ws: Path, mode: str, argv: list[str], network: bool = False, timeout: float = 30):
    command = bwrap_argv(policy(ws, mode, network), argv, ws) or argv
    return await run(command, cwd=ws, env=dict(os.environ), timeout_s=timeout, output_cap=64 * 1024)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    (root / ".git").mkdir(parents=True)
    (root / ".dsh").mkdir()
    return root


# ---- the argv (pure) ----------------------------------------------------------------------


def test_workspace_write_mounts_in_the_order_that_works(tmp_path):
    ws = Path("/tmp/w")
    argv = bwrap_argv(SandboxPolicy("workspace-write", False, ws, (ws / ".git", ws / ".dsh")), ["true"], ws)
    assert argv[:3] == ["bwrap", "--ro-bind", "/"]
    joined = " ".join(argv)
    # tmpfs /tmp first, then the workspace (under /tmp here), then .git and .dsh read-only again
    assert joined.index("--tmpfs /tmp") < joined.index("--bind /tmp/w /tmp/w") < joined.index("--ro-bind /tmp/w/.git")
    assert joined.index("--ro-bind /tmp/w/.git") < joined.index("--ro-bind /tmp/w/.dsh")
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    assert argv[-2:] == ["--", "true"]


def test_modes_and_network_in_the_argv():
    ws = Path("/w")
    read_only = bwrap_argv(SandboxPolicy("read-only", True, ws), ["true"], ws)
    assert "--bind" not in read_only and "--tmpfs" not in read_only and "--unshare-net" not in read_only
    full_off = bwrap_argv(SandboxPolicy("full-access", False, ws), ["true"], ws)
    assert full_off[1:4] == ["--bind", "/", "/"] and "--unshare-net" in full_off and "--unshare-pid" not in full_off
    assert bwrap_argv(SandboxPolicy("full-access", True, ws), ["true"], ws) is None
    with pytest.raises(ValueError):
        bwrap_argv(SandboxPolicy("none", False, ws), ["true"], ws)  # type: ignore[arg-type]


# ---- what each mode blocks -------------------------------------------------------------------


@needs_sandbox
async def test_read_only_blocks_the_workspace_and_home_with_erofs(ws, tmp_path):
    home = Path(os.environ.get("HOME", "/root"))
    home_target = home / f".dsh-sandbox-probe-{os.getpid()}"
    for target in (ws / "new.txt", home_target, Path("/tmp") / f"dsh-probe-{os.getpid()}"):
        result = await sandboxed(ws, "read-only", [PYTHON, "-c", WRITE, str(target)])
        assert result.output.strip() == "EROFS", (target, result)
        assert not target.exists()
    # The same probe without a sandbox writes: the probe itself works.
    plain = await run([PYTHON, "-c", WRITE, str(ws / "new.txt")], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=4096)
    assert plain.output.strip() == "OK" and (ws / "new.txt").read_text() == "x"


@needs_sandbox
async def test_workspace_write_allows_the_workspace_only(ws):
    home_target = Path(os.environ.get("HOME", "/root")) / f".dsh-sandbox-probe-{os.getpid()}"
    cases = [
        (ws / "src.txt", "OK"),
        (ws / ".git" / "config", "EROFS"),
        (ws / ".dsh" / "config.toml", "EROFS"),
        (home_target, "EROFS"),
        (Path("/etc") / f"dsh-probe-{os.getpid()}", "EROFS"),
    ]
    for target, expected in cases:
        result = await sandboxed(ws, "workspace-write", [PYTHON, "-c", WRITE, str(target)])
        assert result.output.strip() == expected, (target, result)
    assert (ws / "src.txt").read_text() == "x"
    assert not (ws / ".git" / "config").exists() and not home_target.exists()
    # /tmp is writable but private: what the command writes there is gone afterwards.
    private = Path("/tmp") / f"dsh-private-{os.getpid()}"
    result = await sandboxed(ws, "workspace-write", [PYTHON, "-c", WRITE, str(private)])
    assert result.output.strip() == "OK" and not private.exists()
    # Unsandboxed, the same probe writes .git: the probe works.
    plain = await run([PYTHON, "-c", WRITE, str(ws / ".git" / "config")], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=4096)
    assert plain.output.strip() == "OK"


@needs_sandbox
async def test_full_access_writes_everywhere_but_keeps_the_network_off(ws):
    result = await sandboxed(ws, "full-access", [PYTHON, "-c", WRITE, str(ws / ".git" / "config")])
    assert result.output.strip() == "OK"
    with Listener() as listener:
        off = await sandboxed(ws, "full-access", [PYTHON, "-c", CONNECT, str(listener.port)])
        assert off.output.strip() == "ECONNREFUSED"


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_network_is_refused_unless_enabled(ws, mode):
    with Listener() as listener:
        port = str(listener.port)
        plain = await run([PYTHON, "-c", CONNECT, port], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=4096)
        assert plain.output.strip() == "OK"  # the probe reaches the listener without a sandbox
        refused = await sandboxed(ws, mode, [PYTHON, "-c", CONNECT, port])
        assert refused.output.strip() == "ECONNREFUSED"  # its own loopback: nobody listens there
        allowed = await sandboxed(ws, mode, [PYTHON, "-c", CONNECT, port], network=True)
        assert allowed.output.strip() == "OK"


# ---- nothing left behind -------------------------------------------------------------------


@pytest.mark.parametrize("mode", [pytest.param("workspace-write", marks=needs_sandbox), "full-access"])
async def test_timeout_kills_the_command_and_its_children(ws, mode):
    marker = f"dsh-timeout-{mode}-{os.getpid()}"
    script = f"{sleeper(marker)} & {sleeper(marker)} & setsid {sleeper(marker)} & echo started; wait"
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await sandboxed(ws, mode, ["/bin/sh", "-c", script], network=True, timeout=1.5)
    assert result.timed_out and result.exit_code is None and "started" in result.output
    assert loop.time() - started < 10
    assert await gone(marker) == []


@pytest.mark.parametrize("mode", [pytest.param("read-only", marks=needs_sandbox), "full-access"])
async def test_background_children_die_with_the_command(ws, mode):
    marker = f"dsh-background-{mode}-{os.getpid()}"
    result = await sandboxed(ws, mode, ["/bin/sh", "-c", f"{sleeper(marker)} > /dev/null 2>&1 & echo done"], network=True)
    assert result.exit_code == 0 and result.output.strip() == "done"
    assert await gone(marker) == []


@pytest.mark.parametrize("mode", [pytest.param("workspace-write", marks=needs_sandbox), "full-access"])
async def test_cancel_kills_the_command_and_its_children(ws, mode):
    marker = f"dsh-cancel-{mode}-{os.getpid()}"
    task = asyncio.ensure_future(sandboxed(ws, mode, ["/bin/sh", "-c", f"{sleeper(marker)} & {sleeper(marker)}"], network=True))
    deadline = asyncio.get_running_loop().time() + 10
    while len(processes_with(marker)) < 2:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(marker) == []


async def test_kill_all_stops_every_running_command(ws):
    marker = f"dsh-kill-all-{os.getpid()}"
    task = asyncio.ensure_future(sandboxed(ws, "full-access", ["/bin/sh", "-c", sleeper(marker)], network=True))
    while not processes_with(marker):
        await asyncio.sleep(0.05)
    kill_all()  # what the daemon's exit does
    result = await asyncio.wait_for(task, 10)
    assert result.signal == 9 and processes_with(marker) == []


async def test_output_keeps_the_tail(ws):
    result = await run(
        ["/bin/sh", "-c", "seq 1 100000"], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=1000
    )
    assert result.exit_code == 0 and result.output_bytes == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert result.kept_bytes == 1000 and result.output.endswith("99999\n100000\n")


# ---- the probe -------------------------------------------------------------------------------


@needs_sandbox
async def test_probe_finds_a_working_bubblewrap():
    found = await probe()
    assert found.ok and found.bwrap and found.reason == ""


async def test_probe_reports_why_and_how_to_fix(tmp_path, monkeypatch):
    fake_failing_bwrap(tmp_path / "bin")
    found = await probe(str(tmp_path / "bin" / "bwrap"))
    assert not found.ok and "setting up uid map: Permission denied" in found.reason
    assert "full-access" in found.fix
    missing = await probe(str(tmp_path / "nowhere" / "bwrap"))
    assert not missing.ok and "not installed" in missing.reason and "apt install bubblewrap" in missing.fix
