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
from dshd.sandbox import runner
from dshd.sandbox.runner import kill_all
from dshd.sandbox.sockets import kept_links, listening_sockets, socket_folders
from dshd.agent.tools import Policy, ToolContext
from dshd.tools.run import RunCommand
from tests.sandbox_support import (
    CONNECT,
    appeared,
    PYTHON,
    UNIX_CONNECT,
    WRITE,
    Listener,
    UnixListeners,
    connect_results,
    run_folder,
    fake_failing_bwrap,
    gone,
    needs_sandbox,
    processes_with,
    sleeper,
)

# These tests make Unix sockets and links on the host (/run, /var/tmp) that a sandbox with
# the network off covers one by one: run on two workers, one test's socket vanishing while
# another's sandbox is being built made that bubblewrap fail (as designed: before the
# command). One group keeps them, and tests/e2e/test_host_sockets.py, on one worker in turn.
pytestmark = pytest.mark.xdist_group("host-sockets")


def policy(ws: Path, mode: str, network: bool = False) -> SandboxPolicy:
    """The policy run_command builds: the host's socket folders and listening sockets
    hidden when the network is off."""
    protect = tuple(ws / name for name in (".git", ".dsh") if (ws / name).exists())
    hide, mask = (socket_folders(), listening_sockets()) if not network else ((), ())
    return SandboxPolicy(mode, network, ws, protect, hide, mask, kept_links(hide))  # type: ignore[arg-type]


async def sandboxed(ws: Path, mode: str, argv: list[str], network: bool = False, timeout: float = 30):
    command = bwrap_argv(policy(ws, mode, network), argv, ws)
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
    for network in (False, True):
        full = bwrap_argv(SandboxPolicy("full-access", network, ws), ["true"], ws)
        # Every mode, full access too: its own PID namespace and /proc, tied to the daemon.
        assert full[1:4] == ["--bind", "/", "/"] and ("--unshare-net" in full) is not network
        assert {"--unshare-pid", "--die-with-parent", "--new-session"} <= set(full)
        assert full[full.index("--proc") + 1] == "/proc"
    with pytest.raises(ValueError):
        bwrap_argv(SandboxPolicy("none", False, ws), ["true"], ws)  # type: ignore[arg-type]


def test_network_off_hides_the_socket_folders_but_not_the_workspace_in_them():
    ws = Path("/tmp/w")
    hide = (Path("/run"), Path("/tmp"), Path("/run/user/1000"))
    mask = (Path("/home/me/.ssh/cm.sock"), Path("/tmp/w/own.sock"), Path("/run/x.sock"))
    for mode in ("read-only", "workspace-write", "full-access"):
        argv = bwrap_argv(SandboxPolicy(mode, False, ws, (), hide, mask), ["true"], ws)
        joined = " ".join(argv)
        # Each folder once (/run/user/1000 goes with /run), then the workspace bound again.
        assert joined.count("--tmpfs /run ") == 1 and joined.count("--tmpfs /tmp ") == 1 and "/run/user" not in joined
        bind = "--bind /tmp/w /tmp/w" if mode != "read-only" else "--ro-bind /tmp/w /tmp/w"
        assert joined.index("--tmpfs /tmp ") < joined.index(bind)
        # A socket elsewhere is covered (not in full access: its root is the host's, writable);
        # those in a hidden folder or the workspace are not touched.
        assert ("--ro-bind /dev/null /home/me/.ssh/cm.sock" in joined) is (mode != "full-access")
        assert "own.sock" not in joined and "x.sock" not in joined
        if mode == "full-access":
            assert "--remount-ro" not in argv
        else:  # outside full access the hidden folders are read-only, after the binds into them
            assert joined.index(bind) < joined.index("--remount-ro /run")
            assert ("--remount-ro /tmp" in joined) is (mode == "read-only")  # workspace-write: private, writable
    # A link right inside a hidden folder is made again there (after the tmpfs, before it
    # turns read-only); one elsewhere is not the sandbox's business.
    linked = bwrap_argv(SandboxPolicy("read-only", False, ws, (), hide, (), (("/nix/store/x-system", Path("/run/current-system")),
                                                                             ("/y", Path("/home/me/link")))), ["true"], ws)
    joined = " ".join(linked)
    assert joined.index("--tmpfs /run ") < joined.index("--symlink /nix/store/x-system /run/current-system") < joined.index("--remount-ro /run")
    assert "/home/me/link" not in joined
    # Network on: nothing hidden (the docs say the host's sockets are then reachable).
    on = bwrap_argv(SandboxPolicy("read-only", True, ws, (), hide, mask), ["true"], ws)
    assert "--tmpfs" not in on and "/dev/null" not in on


def test_socket_folders_resolve_links_and_nest(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    link = tmp_path / "link"
    link.symlink_to(runtime)
    found = socket_folders({"XDG_RUNTIME_DIR": str(link)})
    assert runtime.resolve() in found or any(f in runtime.resolve().parents for f in found)
    assert all(not any(o != f and o in f.parents for o in found) for f in found)
    assert Path("/var/run") not in found or not Path("/var/run").is_symlink()
    assert socket_folders({"XDG_RUNTIME_DIR": "relative/dir"}) == socket_folders({})


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


async def run_tool(
    ws: Path, mode: str, network: bool, command: str, timeout_ms: int | None = None, unix_sockets: tuple[str, ...] = ()
):
    """run_command as the agent calls it (the wiring of dshd.tools.run: the one launcher,
    policy, socket wall, socket folders, environment), in ``mode``; ``unix_sockets``: the
    user config's [tools] unixSockets."""
    ctx = ToolContext("test", 1, 1, ws, Policy(mode, network, ()))  # type: ignore[arg-type]
    arguments = {"command": command} | ({"timeoutMs": timeout_ms} if timeout_ms else {})
    return await RunCommand(unix_sockets=unix_sockets)(ctx, arguments)


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full-access"])
async def test_network_off_reaches_no_host_unix_socket(ws, mode, monkeypatch):
    """W-2: with the network off a command can make no Unix socket at all (the seccomp
    wall: EPERM), so it reaches none the host listens on (in /tmp, under /run, in
    $XDG_RUNTIME_DIR, anywhere else, abstract), nor its workspace's own; with the network
    on the same in read-only and workspace-write, and full-access keeps the host's.
    Controls: unsandboxed the same probe reaches every one; under the person's "*"
    downgrade the old best-effort hiding is what is left (folders emptied, other sockets
    covered, not in full-access); a socket the person lists is reached, the others not."""
    tag = f"dsh-h4-{os.getpid()}-{mode}"
    runtime = Path("/var/tmp") / f"{tag}-xdg"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # a runtime dir outside /run: hidden as well
    where = {
        "tmp": f"/tmp/{tag}.sock",
        "run": f"{run_folder()}/{tag}/bus.sock",
        "xdg": f"{runtime}/agent.sock",
        "elsewhere": f"/var/tmp/{tag}-home/ssh-control.sock",  # no socket folder
        "abstract": f"@{tag}",
        "workspace": str(ws / "own.sock"),
    }
    (ws / "probe.py").write_text(UNIX_CONNECT)
    probe_command = f"{PYTHON} probe.py " + " ".join(where.values())
    with UnixListeners(**where):
        plain = await run([PYTHON, "probe.py", *where.values()], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=4096)
        assert set(connect_results(plain.output).values()) == {"OK"}, plain.output  # the probe works
        for network in (False, True):
            outcome = await run_tool(ws, mode, network, probe_command)
            assert outcome.ok, outcome.content
            seen = connect_results(outcome.content.split("\n", 1)[1])
            reached = "OK" if network and mode == "full-access" else "EPERM"
            assert seen == {target: reached for target in where.values()}, (network, outcome.content)

        # The person's downgrade, "*": Unix sockets allowed, the rest hidden as well as can be.
        off = await run_tool(ws, mode, False, probe_command, unix_sockets=("*",))
        assert "no socket wall" not in off.content  # the wall is there, AF_UNIX allowed in it
        assert connect_results(off.content.split("\n", 1)[1]) == {
            where["tmp"]: "ENOENT",
            where["run"]: "ENOENT",
            where["xdg"]: "ENOENT",
            # /dev/null lies over it; not in full access (what docs/tools.md says it cannot promise)
            where["elsewhere"]: "OK" if mode == "full-access" else "ECONNREFUSED",
            where["abstract"]: "ECONNREFUSED",  # its own network namespace has no such name
            where["workspace"]: "OK",
        }, off.content
        on = await run_tool(ws, mode, True, probe_command, unix_sockets=("*",))
        expected = {target: "OK" for target in where.values()}
        if mode == "workspace-write":
            expected[where["tmp"]] = "ENOENT"
        assert connect_results(on.content.split("\n", 1)[1]) == expected, on.content

        # A listed socket: that one reached, with the network on and off; the others not.
        # One listed that is not there now (its program not running) changes nothing.
        listed = (where["run"], f"/var/tmp/{tag}-not-there.sock")
        for network in (False, True):
            some = await run_tool(ws, mode, network, probe_command, unix_sockets=listed)
            seen = connect_results(some.content.split("\n", 1)[1])
            assert seen[where["run"]] == "OK", some.content
            if not (network and mode == "full-access"):
                assert seen[where["tmp"]] == seen[where["xdg"]] == "ENOENT", some.content
                assert seen[where["elsewhere"]] == ("OK" if mode == "full-access" else "ECONNREFUSED"), some.content


@needs_sandbox
async def test_a_tmpdir_the_sandbox_emptied_is_not_passed(ws, monkeypatch, tmp_path):
    """TMPDIR is on the allowlist, but one under a folder the sandbox replaced (here /tmp)
    would name a folder that is not there: it is left out, so programs use /tmp. Kept
    when the command can see it: inside the workspace, or nothing replaced."""
    outside = tmp_path / "tmpdir"
    outside.mkdir()
    show = 'echo "${TMPDIR-unset}"'
    monkeypatch.setenv("TMPDIR", str(outside))
    for mode, network in (("workspace-write", True), ("read-only", False), ("full-access", False)):
        result = await run_tool(ws, mode, network, show)
        assert result.content.splitlines()[1] == "unset", (mode, result.content)
    kept = await run_tool(ws, "full-access", True, show)
    assert kept.content.splitlines()[1] == str(outside)
    monkeypatch.setenv("TMPDIR", str(ws / "tmp"))
    inside = await run_tool(ws, "workspace-write", False, show)
    assert inside.content.splitlines()[1] == str(ws / "tmp")


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "full-access"])
async def test_links_in_a_hidden_folder_that_lead_elsewhere_stay(ws, mode):
    """/run emptied, its links that lead out of the hidden folders are made again (NixOS
    finds its programs through /run/current-system); one that leads to a socket is not.
    Control: without a sandbox both links work."""
    if not os.access("/run", os.W_OK):
        pytest.skip("making a link right inside /run needs root here")
    tag = f"dsh-links-{os.getpid()}-{mode}"
    target = Path("/var/tmp") / tag
    target.mkdir()
    (target / "tool").write_text("found\n")
    program_link, socket_link = Path("/run") / f"{tag}-system", Path("/run") / f"{tag}-agent"
    try:
        program_link.symlink_to(target)
        with UnixListeners(agent=str(target / "agent.sock")):
            socket_link.symlink_to(target / "agent.sock")
            (ws / "probe.py").write_text(UNIX_CONNECT)
            command = f"cat {program_link}/tool; {PYTHON} probe.py {socket_link}"
            plain = await run(["/bin/sh", "-c", command], cwd=ws, env=dict(os.environ), timeout_s=30, output_cap=4096)
            assert plain.output == f"found\n{socket_link} OK\n"
            result = await run_tool(ws, mode, False, command)
            assert result.content.split("\n", 1)[1] == f"found\n{socket_link} EPERM", result.content
            # Under the "*" downgrade (Unix sockets allowed) the link to a socket is not made.
            result = await run_tool(ws, mode, False, command, unix_sockets=("*",))
            assert result.content.split("\n", 1)[1] == f"found\n{socket_link} ENOENT", result.content
    finally:
        for link in (program_link, socket_link):
            link.unlink(missing_ok=True)
        (target / "tool").unlink()
        target.rmdir()


# ---- nothing left behind -------------------------------------------------------------------


# Every way a command may leave something running: in the background, in a session of its
# own (setsid), orphaned by a double fork, under nohup; some keep the output pipe, the
# detached ones let go of it (only a PID namespace catches those).
def leavers(marker: str) -> str:
    return (
        f"{sleeper(marker)} & "
        f"setsid {sleeper(marker)} > /dev/null 2>&1 & "
        f"nohup {sleeper(marker)} > /dev/null 2>&1 & "
        f"( {sleeper(marker)} & ) ; "
        f"( setsid {sleeper(marker)} > /dev/null 2>&1 & ) ; "
        f"( setsid {sleeper(marker)} & ) ; "
        "echo started"
    )


LEAVERS = 6
# (mode, network): every sandbox mode, each with the network off and on.
SANDBOXES = [
    pytest.param(mode, network, marks=needs_sandbox, id=f"{mode}-net-{'on' if network else 'off'}")
    for mode in ("read-only", "workspace-write", "full-access")
    for network in (False, True)
]


async def started(marker: str, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 15
    while len(processes_with(marker)) < count:
        assert asyncio.get_running_loop().time() < deadline, processes_with(marker)
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("mode, network", SANDBOXES)
async def test_nothing_outlives_a_command_that_exits(ws, mode, network):
    """H-6: exit 0 right away, whatever it left behind (some of it holding the output pipe):
    reported as exit 0, not timed out, and every leftover gone."""
    marker = f"dsh-exit-{mode}-{network}-{os.getpid()}"
    result = await sandboxed(ws, mode, ["/bin/sh", "-c", leavers(marker)], network=network, timeout=20)
    assert result.exit_code == 0 and not result.timed_out and result.output.strip() == "started", result
    assert result.duration_s < 10
    assert await gone(marker) == []


@pytest.mark.parametrize("mode, network", SANDBOXES)
async def test_timeout_kills_the_command_and_everything_it_started(ws, mode, network):
    marker = f"dsh-timeout-{mode}-{network}-{os.getpid()}"
    loop = asyncio.get_running_loop()
    begun = loop.time()
    result = await sandboxed(ws, mode, ["/bin/sh", "-c", leavers(marker) + f"; {sleeper(marker)}"], network=network, timeout=2)
    assert result.timed_out and result.exit_code is None and "started" in result.output
    assert loop.time() - begun < 10
    assert await gone(marker) == []


@pytest.mark.parametrize("mode, network", SANDBOXES)
async def test_cancel_kills_the_command_and_everything_it_started(ws, mode, network):
    marker = f"dsh-cancel-{mode}-{network}-{os.getpid()}"
    script = leavers(marker) + f"; {sleeper(marker)}"
    task = asyncio.ensure_future(sandboxed(ws, mode, ["/bin/sh", "-c", script], network=network))
    await started(marker, LEAVERS + 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(marker) == []


async def test_without_a_sandbox_the_runner_still_ends_what_holds_the_output(tmp_path):
    """No bubblewrap (full access with the network on where it cannot run): an exit 0 is
    still exit 0 even though a detached child holds the pipe, and that child (setsid, then
    orphaned: not in the process group, not a descendant any more) is found by the pipe
    it holds and killed. Control: the same child started with its output elsewhere is not
    found this way (what only a PID namespace catches, as docs/tools.md says)."""
    marker = f"dsh-bare-{os.getpid()}"
    holder = f"( setsid {sleeper(marker)} & ) ; {sleeper(marker)} & echo started"
    result = await run(["/bin/sh", "-c", holder], cwd=Path("/"), env=dict(os.environ), timeout_s=20, output_cap=4096)
    assert result.exit_code == 0 and not result.timed_out and result.duration_s < 10
    assert await gone(marker) == []
    escaped = f"dsh-bare-escaped-{os.getpid()}"
    # The shell waits until the child is in its own session (it touches `ready` after
    # setsid): otherwise the runner's kill of the process group at the shell's exit can
    # land before the setsid, and there is no escaped child to look for.
    ready = tmp_path / "ready"
    escape = f'( setsid /bin/sh -c "touch {ready}; exec {sleeper(escaped)}" > /dev/null 2>&1 & ); '
    wait = f"while [ ! -e {ready} ]; do sleep 0.01; done"
    result = await run(["/bin/sh", "-c", escape + wait], cwd=Path("/"),
                       env=dict(os.environ), timeout_s=20, output_cap=4096)
    try:
        assert result.exit_code == 0 and len(await appeared(escaped)) == 1
    finally:
        for pid in processes_with(escaped):
            os.kill(pid, 9)


async def test_an_exit_in_the_last_instant_is_not_a_timeout(ws):
    """The result says timed out only when the timer fired on a running command: a command
    that ends as the timer is due is reported by how it ended."""
    for _ in range(5):
        result = await run(["/bin/sh", "-c", "sleep 0.2; exit 0"], cwd=ws, env=dict(os.environ), timeout_s=0.2, output_cap=64)
        assert result.timed_out == (result.exit_code is None)
        assert result.exit_code in (0, None) and result.signal is None


async def test_kill_all_stops_every_running_command(ws):
    marker = f"dsh-kill-all-{os.getpid()}"
    task = asyncio.ensure_future(run(["/bin/sh", "-c", sleeper(marker)], cwd=ws, env={}, timeout_s=30, output_cap=64))
    # Running, and known to the runner (the process shows in /proc a moment before the
    # runner has its pid: on a loaded machine the test could otherwise be faster).
    while not processes_with(marker) or not runner._live:
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


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_a_covered_socket_that_vanishes_before_the_sandbox_starts_is_listed_again(ws, mode, monkeypatch):
    """Under the "*" downgrade (Unix sockets allowed, the others covered as well as can
    be): a host socket listed to be covered (network off) can be gone when bubblewrap starts,
    which then fails before the command: the sockets are listed again and the sandbox built
    once more. If it fails again, the call says the sandbox could not be set up and that
    nothing ran (the command's marker is never written)."""
    from dshd.sandbox import host as host_module  # where a start lists the sockets

    vanished = Path(f"/var/tmp/dshd-vanished-{os.getpid()}-{mode}.sock")
    assert not os.path.lexists(vanished)
    listed: list[int] = []

    def first_vanished() -> tuple[Path, ...]:
        listed.append(1)
        return (vanished,) if len(listed) == 1 else listening_sockets()

    monkeypatch.setattr(host_module, "listening_sockets", first_vanished)
    marker = "echo ran" if mode == "read-only" else "echo ran > ran.txt; echo ran"
    outcome = await run_tool(ws, mode, False, marker, unix_sockets=("*",))
    assert outcome.ok, outcome.content
    assert outcome.content.splitlines()[-1] == "ran" and len(listed) == 2

    # Positive control of the failure: a socket that is gone every time.
    (ws / "ran.txt").unlink(missing_ok=True)
    listed.clear()
    monkeypatch.setattr(host_module, "listening_sockets", lambda: listed.append(1) or (vanished,))
    failed = await run_tool(ws, mode, False, "echo ran > ran.txt", unix_sockets=("*",))
    assert not failed.ok and failed.content.startswith("Not run: the sandbox could not be set up")
    assert "Can't create file" in failed.content and len(listed) == 2
    assert not (ws / "ran.txt").exists()


@needs_sandbox
async def test_a_command_that_fails_like_bubblewrap_is_never_run_twice(ws):
    """Only bubblewrap's status pipe says a command did not run: a command that prints what
    bubblewrap prints and exits 1 ran, and is reported as its own failure, once."""
    outcome = await run_tool(ws, "workspace-write", False, "echo x >> count.txt; echo \"bwrap: Can't create file at /x\" >&2; exit 1")
    assert not outcome.ok and outcome.content.startswith("exit code 1")
    assert (ws / "count.txt").read_text() == "x\n"
