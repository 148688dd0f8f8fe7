"""What the one launcher (the socket wall, bubblewrap's own environment, --args from a
memfd) costs a sandboxed start, against the code before it (commit fa2e4af), in the same run.

    .venv/bin/python bench/sandbox_start.py [--runs 60] [--base fa2e4af] [--mcp-rounds 15]

(a) ``run_command true`` as the agent calls it (``RunCommand``: the policy read from the
    host, the launcher, bubblewrap, the shell's cwd guard), per mode, the network off.
    The base is checked out with ``git worktree add`` into a temporary folder and
    imported from there (PYTHONPATH) in a worker process of its own; this tree's code runs
    in another worker; the two take turns, one call each, so both see the same machine.
    Medians. Target: at most +5 ms per mode.
(b) Starting a session with two stdio MCP servers that start at once
    (tests/fixtures/mcp_servers/instant.py): create the session and run its first prompt,
    which waits for both, in each worker in turn. Medians. Target: at most +10 ms.

Prints the figures, ratios and differences; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_TARGET_MS = 5.0
MCP_TARGET_MS = 10.0
MODES = ("read-only", "workspace-write", "full-access")
INSTANT = REPO / "tests" / "fixtures" / "mcp_servers" / "instant.py"

# The worker: reads one request a line ("run <mode>" or "mcp"), answers the milliseconds.
WORKER = r"""
import asyncio, json, os, sys, tempfile, time
from pathlib import Path
from dshd.agent.tools import Policy, ToolContext
from dshd.tools.run import RunCommand

INSTANT = sys.argv[1]
root = Path(tempfile.mkdtemp(prefix="dshd-bench-sandbox-")).resolve()
(root / ".git").mkdir(); (root / ".dsh").mkdir()
run = RunCommand()

def mcp_workspace():
    from dshd.agent import Workspace, load_config
    from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
    ws = Path(tempfile.mkdtemp(prefix="dshd-bench-mcp-")).resolve()
    (ws / "script.json").write_text(json.dumps({"replies": []}))
    user = ws.parent / (ws.name + ".toml")
    servers = "".join(
        f'[mcp.servers.{n}]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(INSTANT)}]\n' for n in ("one", "two"))
    user.write_text('plugins = ["tools", "mcp"]\n' + servers)
    config = load_config(ws, {"model": {"provider": "scripted", "script": "script.json"}}, user_file=user)
    return Workspace(ws, config, approvals=InProcessApprovals(lambda r: ApprovalAnswer("allow-once")))

async def main():
    mcp_ws = None
    for line in sys.stdin:
        what = line.split()
        if what[0] == "run":
            ctx = ToolContext("bench", 1, 1, root, Policy(what[1], False, ()))
            t = time.perf_counter()
            outcome = await run(ctx, {"command": "true"})
            ms = (time.perf_counter() - t) * 1000
            assert outcome.ok, outcome.content
        else:
            if mcp_ws is None:
                mcp_ws = mcp_workspace()
            t = time.perf_counter()
            agent = mcp_ws.create_session()
            await agent.prompt("go")
            ms = (time.perf_counter() - t) * 1000
            states = [s.state for s in agent.features.get(__import__("dshd.mcp.servers", fromlist=["McpServers"]).McpServers).states()]
            await agent.aclose()
            assert states == ["ready", "ready"], states
        print(ms, flush=True)

asyncio.run(main())
"""


def worker(server_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(server_path)}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(INSTANT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        cwd=server_path,
    )


def ask(proc: subprocess.Popen, request: str) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    if not answer:
        raise SystemExit(f"a worker ended on {request!r}")
    return float(answer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--base", default="fa2e4af")
    parser.add_argument("--mcp-rounds", type=int, default=15)
    args = parser.parse_args()

    known = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{args.base}^{{commit}}"], capture_output=True)
    if known.returncode != 0:
        print(f"sandbox_start: commit {args.base} is not in this clone (a shallow one?): nothing to compare with")
        return 0
    with tempfile.TemporaryDirectory(prefix="dshd-bench-base-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(base_tree), args.base], check=True)
        try:
            old, new = worker(base_tree / "server"), worker(REPO / "server")
            try:
                print(f"run_command true, network off: base {args.base} vs this tree, {args.runs} runs each, medians")
                failed = False
                for mode in MODES:
                    for proc in (old, new):  # warm: imports, the probe, the wall's program
                        ask(proc, f"run {mode}")
                    times: dict[str, list[float]] = {"old": [], "new": []}
                    for _ in range(args.runs):
                        times["old"].append(ask(old, f"run {mode}"))
                        times["new"].append(ask(new, f"run {mode}"))
                    o, n = statistics.median(times["old"]), statistics.median(times["new"])
                    ok = n - o <= RUN_TARGET_MS
                    failed |= not ok
                    print(f"  {mode:16} base {o:6.2f} ms  now {n:6.2f} ms  ratio {n / o:4.2f}  "
                          f"difference {n - o:+6.2f} ms  (target <= +{RUN_TARGET_MS:g} ms: {'ok' if ok else 'OVER'})")
                if args.mcp_rounds:
                    for proc in (old, new):
                        ask(proc, "mcp")
                    times = {"old": [], "new": []}
                    for _ in range(args.mcp_rounds):
                        times["old"].append(ask(old, "mcp"))
                        times["new"].append(ask(new, "mcp"))
                    o, n = statistics.median(times["old"]), statistics.median(times["new"])
                    ok = n - o <= MCP_TARGET_MS
                    print(f"session start, two instant stdio MCP servers, {args.mcp_rounds} rounds each, medians")
                    print(f"  base {o:6.1f} ms  now {n:6.1f} ms  ratio {n / o:4.2f}  difference {n - o:+6.1f} ms  "
                          f"(target <= +{MCP_TARGET_MS:g} ms: {'ok' if ok else 'OVER'})")
            finally:
                for proc in (old, new):
                    if proc.stdin is not None:
                        proc.stdin.close()
                    proc.wait(timeout=60)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
