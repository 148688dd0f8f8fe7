"""What the sandbox adds to every command: `run_command "true"` with today's namespaces
(every mode in its own PID namespace, socket folders hidden with the network off) against
the sandbox argv of before (kept here as :func:`previous_argv`), in the same run.

    .venv/bin/python bench/sandbox_runs.py [--runs 60]

Baseline: `/bin/sh -c true` under the previous argv of each mode (read-only and
workspace-write with a PID namespace; full access with the network off without one; full
access with the network on without bubblewrap at all), through the same runner. Measured:
the argv run_command builds now (reading the socket folders and /proc/net/unix each time),
through the same runner; and the run_command tool as the agent calls it (argument checks,
the cached probe, the result text). Medians, the two taken in turn (one of each, then
again) so noise hits both alike; minimums (the floor, when nothing else competes for the
CPU: on a loaded machine medians wander by milliseconds); and the mean CPU time of the
processes started (bubblewrap and the command), which other load barely moves. Target:
at most +2 ms over the previous sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from dshd.agent.tools import Policy, ToolContext  # noqa: E402
from dshd.sandbox import SandboxPolicy, bwrap_argv, probe, run  # noqa: E402
from dshd.sandbox.sockets import kept_links, listening_sockets, socket_folders  # noqa: E402
from dshd.tools.run import RunCommand, command_env  # noqa: E402

COMMAND = ["/bin/sh", "-c", "true"]


def previous_argv(bwrap: str, mode: str, network: bool, workspace: Path, protect: tuple[Path, ...]) -> list[str]:
    """The sandbox argv before PID namespaces for full access and hidden socket folders."""
    if mode == "full-access":
        if network:
            return COMMAND
        argv = [bwrap, "--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    else:
        argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--new-session"]
        if mode == "workspace-write":
            argv += ["--tmpfs", "/tmp", "--bind", str(workspace), str(workspace)]
            for path in protect:
                argv += ["--ro-bind", str(path), str(path)]
    if not network:
        argv.append("--unshare-net")
    return argv + ["--die-with-parent", "--chdir", str(workspace), "--", *COMMAND]


def current_argv(bwrap: str, mode: str, network: bool, workspace: Path, protect: tuple[Path, ...]) -> list[str]:
    """What run_command builds now, socket look-ups included."""
    hide, mask = (socket_folders(), listening_sockets()) if not network else ((), ())
    policy = SandboxPolicy(mode, network, workspace, protect, hide, mask, kept_links(hide))  # type: ignore[arg-type]
    return bwrap_argv(policy, COMMAND, workspace, bwrap=bwrap)


def children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


async def timed(fn) -> tuple[float, float]:
    """Wall milliseconds, and CPU milliseconds of the processes it started (bubblewrap and
    what it ran, reaped): the work itself, which other load on the machine barely moves."""
    cpu, start = children_cpu_ms(), time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000, children_cpu_ms() - cpu


async def main(runs: int) -> None:
    found = await probe()
    if not found.ok or not found.bwrap:
        print(f"sandbox: no sandbox here ({found.reason}); nothing to measure")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        (root / ".git").mkdir()
        (root / ".dsh").mkdir()
        protect = (root / ".git", root / ".dsh")
        env = command_env()
        tool = RunCommand()
        print(f"sandbox: run_command \"true\", medians of {runs} runs ({len(socket_folders())} socket folders, "
              f"{len(listening_sockets())} listening sockets here)")
        print(f"  {'':28} {'median (wall)':^29}  {'minimum (wall)':^29}  {'CPU, mean':^29}  {'tool now':>9}")
        print(f"  {'mode':28}" + f" {'previous':>9} {'now':>9} {'added':>9} " * 3 + f" {'(median)':>9}")
        for mode, network in (("read-only", False), ("workspace-write", False), ("full-access", False), ("full-access", True)):
            ctx = ToolContext("bench", 1, 1, root, Policy(mode, network, ()))  # type: ignore[arg-type]

            async def before() -> None:
                argv = previous_argv(found.bwrap, mode, network, root, protect)
                result = await run(argv, cwd=root, env=env, timeout_s=30, output_cap=32768)
                assert result.exit_code == 0, result

            async def now() -> None:
                argv = current_argv(found.bwrap, mode, network, root, protect)
                result = await run(argv, cwd=root, env=env, timeout_s=30, output_cap=32768)
                assert result.exit_code == 0, result

            async def through_tool() -> None:
                result = await tool(ctx, {"command": "true"})
                assert result.ok, result.content

            for fn in (before, now, through_tool):
                await fn()  # warm-up
            wall: dict[str, list[float]] = {"before": [], "now": [], "tool": []}
            cpu: dict[str, list[float]] = {"before": [], "now": [], "tool": []}
            for _ in range(runs):
                for key, fn in (("before", before), ("now", now), ("tool", through_tool)):
                    w, c = await timed(fn)
                    wall[key].append(w)
                    cpu[key].append(c)
            b, n, t = (statistics.median(wall[k]) for k in ("before", "now", "tool"))
            bmin, nmin = min(wall["before"]), min(wall["now"])
            bcpu, ncpu = statistics.mean(cpu["before"]), statistics.mean(cpu["now"])
            label = f"{mode} (network {'on' if network else 'off'})"
            print(f"  {label:28} {b:7.1f}ms {n:7.1f}ms {n - b:+7.1f}ms  {bmin:7.1f}ms {nmin:7.1f}ms {nmin - bmin:+7.1f}ms  "
                  f"{bcpu:7.1f}ms {ncpu:7.1f}ms {ncpu - bcpu:+7.1f}ms  {t:7.1f}ms")
        print("  (full access with the network on ran without bubblewrap before: its 'added' is the whole sandbox)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    asyncio.run(main(parser.parse_args().runs))
