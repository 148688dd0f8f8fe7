"""`dshd serve` spawn -> `initialize` answered: this working tree against a build from git.

    .venv/bin/python bench/startup.py [--base 0d496fe] [--runs 15]

The baseline is the daemon at commit ``--base`` (default 0d496fe, the code before the
daemon dropped pygls's LanguageServer and lsprotocol; 637c833 is what issue 17 measured), extracted with ``git archive`` into a temp dir and run as
``python -m dshd serve`` with PYTHONPATH at its server/ and protocol/ dirs, interleaved
with this tree's, in the same run, on the scripted model. Also prints where this tree's
start-up goes (``-X importtime``: the heaviest modules imported before initialize is
answered). Target: this tree's median <= 0.5x the baseline's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import Client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"plan": {"section": "Plan first."}, "model": {"provider": "scripted"}}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spawn_once(argv: list[str], env: dict, root: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the daemon) from spawn to initialize answered."""
    t0 = time.perf_counter()
    client = Client(argv, env=env, cwd=root)
    reply = client.request(
        "initialize",
        {"processId": None, "rootUri": Path(root).as_uri(), "capabilities": {}, "initializationOptions": {"config": CONFIG}},
    )
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(client.proc.pid)  # the daemon now waits for our next message
    assert "capabilities" in reply, reply  # the InitializeResult
    client.request("shutdown", None)
    client.send({"jsonrpc": "2.0", "method": "exit"})
    client.close()
    return elapsed, cpu


def extract(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "server", "protocol"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def heaviest_imports(env: dict, top: int = 8) -> list[tuple[float, str]]:
    """Cumulative import time of the top-level modules `dshd serve` imports before it reads
    a message (the daemon's module and what it pulls in), heaviest first."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import dshd.cli, dshd.daemon.app"],
        capture_output=True, text=True, env=env, check=True,
    )
    rows = []
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
        if m and len(m.group(2)) <= 2:  # the modules dshd imports directly, and theirs
            rows.append((int(m.group(1)) / 1000, ("  " * (len(m.group(2)) // 2)) + m.group(3)))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="0d496fe", help="the commit to compare against")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    env = {**os.environ, "DSHD_LOG_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory() as tmp:
        base = extract(args.base, Path(tmp))
        base_env = {**env, "PYTHONPATH": f"{base / 'server'}{os.pathsep}{base / 'protocol'}"}
        here_env = {**env, "PYTHONPATH": f"{ROOT / 'server'}{os.pathsep}{ROOT / 'protocol'}"}
        argv = [sys.executable, "-m", "dshd", "serve"]
        cases = [(f"base {args.base}", base_env), ("this tree", here_env)]
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in cases}
        with tempfile.TemporaryDirectory() as root:
            for _, case_env in cases:  # warm the page cache and the bytecode caches
                spawn_once(argv, case_env, root)
            for _ in range(args.runs):
                for label, case_env in cases:
                    samples[label].append(spawn_once(argv, case_env, root))
        print(f"spawn -> initialize answered, median of {args.runs}, interleaved (scripted model):")
        for what, column in (("wall clock", 0), ("daemon CPU (user+system, /proc)", 1)):
            base_med = statistics.median(sample[column] for sample in samples[cases[0][0]])
            print(f" {what}:")
            for label, values in samples.items():
                figures = [sample[column] for sample in values]
                med = statistics.median(figures)
                print(f"  {label:<16} {med * 1000:7.1f} ms   (min {min(figures) * 1000:6.1f} ms)   ratio {med / base_med:5.2f}")
        print("  (target: this tree <= 0.50x, wall clock; CPU shows the same without the waits of a busy machine)")
        for label, case_env in cases:
            print(f"heaviest imports before the first message, {label} (-X importtime, cumulative):")
            for ms, name in heaviest_imports(case_env):
                print(f"  {ms:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
