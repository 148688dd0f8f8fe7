"""MCP tool servers: what dshd adds to a tool call and to starting a session, against the
official SDK talking to the same real servers (tests/mcp/setup.sh installs them) in the
same run.

    .venv/bin/python bench/mcp_calls.py [--calls 200] [--sessions 21]

Both parts run dshd in process (a ``Workspace`` with the scripted model, the mcp plugin,
the servers in a user config of its own): no editor, no wire, so the figures are dshd's
MCP layer and the session around it.

(a) One tool call, server-everything's ``echo``: through the agent's ``McpServers`` (what
    the catalogue tool ``mcp__everything__echo`` runs: the server's session, the timeout,
    the result made a tool result) against ``ClientSession.call_tool`` of the SDK on a
    server it started itself. dshd's server runs in bubblewrap (as every stdio server does by
    default), the SDK's as a plain child. Calls alternate one of each, medians. Target:
    dshd / SDK <= 1.3.
(b) Starting a session with two stdio servers configured (server-everything and
    mcp-server-time): create the session and run its first prompt (which waits for the
    servers), minus the same with no server configured; against the servers' own start
    time, the SDK starting both at once (spawn, initialize, list tools) in the same run.
    Warm: after a first session, so the SDK is already imported (its import is once per
    daemon and printed on its own). The three run in rounds, in turn; the figure is the
    median over rounds of each round's own difference. Target: at most +50 ms.

    The real servers' start (most of it mcp-server-time importing its Python packages)
    varies by 100 ms and more from one start to the next on a small machine, more than the
    margin; so the same rounds run again with two servers that start at once
    (tests/fixtures/mcp_servers/instant.py, the standard library only), which shows what dshd itself
    adds (its steps and bubblewrap's) without that noise.

Prints the figures beside their baselines and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (Not named mcp.py: tests put bench/ on sys.path, where that name would hide the SDK.)
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO))

from tests.mcp_real_support import everything_argv, missing, new_mark, sdk_params, server_toml, time_argv  # noqa: E402

RATIO_TARGET = 1.3
ADDED_TARGET_MS = 50.0


def workspace(root: Path, servers: str):
    """A Workspace on ``root``: the scripted model (an empty script: every prompt ends at
    once), the mcp plugin only, ``servers`` in a user config of its own."""
    from dshd.agent import Workspace, load_config

    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    (root / "script.json").write_text('{"replies": []}')
    (root / ".dsh" / "config.toml").write_text('plugins = ["mcp"]\n\n[model]\nprovider = "scripted"\nscript = "script.json"\n')
    user = root.parent / f"{root.name}-user.toml"
    user.write_text(servers)
    return Workspace(root, load_config(root, user_file=user))


async def sdk_start(stack, params) -> object:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    quiet = stack.enter_context(open(os.devnull, "w"))  # the servers' stderr banners
    read, write = await stack.enter_async_context(stdio_client(params, errlog=quiet))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    await session.list_tools()
    return session


async def _held(params, ready: asyncio.Event, stop: asyncio.Event) -> None:
    """One server started by the SDK and held open until ``stop`` (the SDK's contexts are
    entered and left in one task)."""
    import contextlib

    async with contextlib.AsyncExitStack() as stack:
        await sdk_start(stack, params)
        ready.set()
        await stop.wait()


async def sdk_start_all(argvs, cwd: Path) -> float:
    """Seconds for the SDK to start these servers at once (spawn, initialize, list tools)."""
    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in argvs]
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(_held(sdk_params(argv, cwd), ready, stop)) for argv, ready in zip(argvs, readies)]
    await asyncio.gather(*(ready.wait() for ready in readies))
    elapsed = time.perf_counter() - t0
    stop.set()
    await asyncio.gather(*tasks)
    return elapsed


async def session_start(ws) -> float:
    """Seconds to create a session and run its first prompt to its end; then closes it."""
    gc.collect()
    t0 = time.perf_counter()
    agent = ws.create_session()
    result = await agent.prompt("hello")
    elapsed = time.perf_counter() - t0
    assert result.stop_reason == "end-turn", result
    agent_id = agent.agent_id
    ws.close(agent_id)
    await agent.aclose()
    return elapsed


async def per_call(args: argparse.Namespace, base: Path) -> None:
    import contextlib

    from dshd.mcp.servers import McpServers

    mark = new_mark()
    root = base / "calls"
    ws = workspace(root, server_toml("everything", everything_argv(mark), mark))
    agent = ws.create_session()
    servers = agent.features.get(McpServers)
    await servers.ready()
    [state] = servers.states()
    assert state.state == "ready", state
    message = {"message": "hello from the bench"}
    dshd_s: list[float] = []
    sdk_s: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sdk = await sdk_start(stack, sdk_params(everything_argv(), root))
        for _ in range(10):  # warm both paths
            await servers.call("everything", "echo", message)
            await sdk.call_tool("echo", message)
        for _ in range(args.calls):
            t0 = time.perf_counter()
            outcome = await servers.call("everything", "echo", message)
            dshd_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            result = await sdk.call_tool("echo", message)
            sdk_s.append(time.perf_counter() - t0)
        assert outcome.ok and "hello from the bench" in outcome.content, outcome
        assert not result.is_error
    ws.close(agent.agent_id)
    await agent.aclose()
    d, s = statistics.median(dshd_s) * 1000, statistics.median(sdk_s) * 1000
    ratio = d / s
    print(f"(a) one echo call, medians of {args.calls} (alternating)")
    print(f"    SDK ClientSession.call_tool (baseline)   {s:7.3f} ms   (min {min(sdk_s) * 1000:.3f} ms)")
    print(f"    dshd McpServers.call, server sandboxed   {d:7.3f} ms   (min {min(dshd_s) * 1000:.3f} ms)")
    print(f"    ratio {ratio:.2f}x (target <= {RATIO_TARGET}x): {'ok' if ratio <= RATIO_TARGET else 'OVER'}")


def instant_argv() -> tuple[str, list[str]]:
    return sys.executable, ["-I", str(REPO / "tests" / "fixtures" / "mcp_servers" / "instant.py")]


async def paired_rounds(label: str, servers: dict[str, tuple[str, list[str]]], rounds: int, base: Path) -> float:
    """A session's start with ``servers`` configured, less one with none, less the SDK
    starting the same servers at once: the three in each round, the median over rounds of
    each round's own difference (ms). Prints it with the middle half of the rounds."""
    folder = base / label
    folder.mkdir()
    toml = ""
    for name, argv in servers.items():
        mark = new_mark()
        toml += server_toml(name, (argv[0], [*argv[1], mark]) if name == "everything" else argv, mark)
    with_servers = workspace(folder / "with", toml)
    without = workspace(folder / "without", "")
    runs = {
        "with": lambda: session_start(with_servers),
        "without": lambda: session_start(without),
        "sdk": lambda: sdk_start_all(list(servers.values()), folder),
    }
    for run in runs.values():  # once each, not counted: files cached, the SDK imported
        await run()
    order = list(runs)
    times: dict[str, list[float]] = {name: [] for name in runs}
    added: list[float] = []
    for round_ in range(rounds):
        # In an order that turns each round (so none always follows the same one), each
        # after the last one's processes are gone.
        took = {}
        for name in order[round_ % 3 :] + order[: round_ % 3]:
            await asyncio.sleep(0.05)
            took[name] = await runs[name]()
            times[name].append(took[name])
        added.append((took["with"] - took["without"] - took["sdk"]) * 1000)
    w, wo, sdk = (statistics.median(times[name]) * 1000 for name in ("with", "without", "sdk"))
    median_added = statistics.median(added)
    q1, _, q3 = statistics.quantiles(added, n=4)
    print(f"    {label}: {', '.join(servers)}, {rounds} rounds, medians")
    print(f"      SDK starting both at once (baseline)    {sdk:7.1f} ms")
    print(f"      dshd session, no server                 {wo:7.1f} ms")
    print(f"      dshd session, both servers              {w:7.1f} ms")
    print(f"      added over the servers' own start: {median_added:+.1f} ms (a round's own difference; "
          f"middle half of the rounds {q1:+.1f} .. {q3:+.1f} ms)")  # fmt: skip
    return median_added


async def session_with_servers(args: argparse.Namespace, base: Path) -> None:
    t0 = time.perf_counter()
    import mcp.client.session  # noqa: F401 - what the first server of a daemon pays once

    sdk_import_ms = (time.perf_counter() - t0) * 1000
    print("(b) a session's start with two stdio servers, against the SDK starting the same two")
    real = await paired_rounds(
        "real servers", {"everything": everything_argv(), "time": time_argv()}, args.sessions, base
    )
    instant = await paired_rounds(
        "servers that start at once", {"one": instant_argv(), "two": instant_argv()}, args.sessions, base
    )
    print(f"    added, real servers {real:+.1f} ms (target <= +{ADDED_TARGET_MS:.0f} ms): "
          f"{'ok' if real <= ADDED_TARGET_MS else 'OVER'}; what dshd itself adds, seen without "
          f"the real servers' noise: {instant:+.1f} ms")  # fmt: skip
    print(f"    (once per daemon, not counted: the SDK's import, {sdk_import_ms:.0f} ms here)")


async def main(args: argparse.Namespace) -> None:
    why = missing()
    if why is not None:
        print(f"mcp: the real servers are not installed ({why}); nothing to measure")
        return
    from dshd.sandbox import probe

    found = await probe()
    if not found.ok:
        print(f"mcp: no sandbox here ({found.reason}); dshd would not start sandboxed servers; nothing to measure")
        return
    base = Path(tempfile.mkdtemp(prefix="dshd-bench-mcp-"))
    try:
        await session_with_servers(args, base)
        await per_call(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=21)
    asyncio.run(main(parser.parse_args()))
