"""JSON-RPC round trips over stdio: dshd vs a bare stdlib echo, in one run.

    .venv/bin/python bench/rpc.py [--calls 2000]

1. Baseline: a bare stdlib JSON-RPC echo server (Content-Length framing, json, a
   blocking read loop) as a child process over pipes.
2. dshd: `dshd serve` over the same kind of pipes, `dsh/plan/get` on a live agent.
Both are driven by the same minimal client, so the ratio compares the servers.
3. Goal write -> `dsh/goal/changed`: from the moment the daemon's fsync of the
   goal/change returned (CLOCK_MONOTONIC, written by the daemon to a trace file when
   DSHD_TRACE_DURABLE is set) to the moment this client holds the notification (same
   clock). Also the whole request (send -> notification held), which includes the fsync,
   and a raw write+fdatasync of one line on the same disk, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ECHO_SERVER = textwrap.dedent(
    """
    import json, sys
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        length = None
        while True:
            line = inp.readline()
            if not line:
                sys.exit(0)
            if line in (b"\\r\\n", b"\\n"):
                break
            k, _, v = line.partition(b":")
            if k.lower() == b"content-length":
                length = int(v)
        msg = json.loads(inp.read(length))
        if "id" in msg:
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": msg.get("params")}).encode()
            out.write(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
            out.flush()
    """
)


class Client:
    """Blocking Content-Length client; collects notifications while waiting."""

    def __init__(self, argv: list[str], env: dict | None = None, cwd: str | None = None) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
        )
        self.next_id = 0
        self.notifications: list[tuple[float, dict]] = []

    def send(self, msg: dict) -> None:
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> dict:
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("server closed stdout")
            if line in (b"\r\n", b"\n"):
                break
            k, _, v = line.partition(b":")
            if k.lower() == b"content-length":
                length = int(v)
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == my_id and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            if "method" in msg and "id" not in msg:
                self.notifications.append((time.monotonic_ns(), msg))

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=10)


def timed_calls(client: Client, method: str, params, n: int) -> list[float]:
    for _ in range(100):  # warm-up
        client.request(method, params)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.request(method, params)
        samples.append(time.perf_counter() - t0)
    return samples


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def fmt(samples: list[float]) -> str:
    return f"p50 {pct(samples, 0.5) * 1e6:8.1f} us   p99 {pct(samples, 0.99) * 1e6:8.1f} us"


def dshd_argv() -> list[str]:
    exe = Path(sys.executable).with_name("dshd")
    return [str(exe), "serve"] if exe.exists() else [sys.executable, "-m", "dshd", "serve"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--goal-writes", type=int, default=400)
    args = ap.parse_args()

    echo = Client([sys.executable, "-c", ECHO_SERVER])
    base = timed_calls(echo, "echo", {"agentId": "a-x"}, args.calls)
    echo.close()

    with tempfile.TemporaryDirectory() as ws:
        trace = Path(ws) / "durable.trace"
        env = {**os.environ, "DSHD_LOG_LEVEL": "WARNING", "DSHD_TRACE_DURABLE": str(trace)}
        d = Client(dshd_argv(), env=env, cwd=ws)
        d.request(
            "initialize",
            {"processId": None, "rootUri": Path(ws).as_uri(), "capabilities": {}},
        )
        d.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        agent = d.request("dsh/session/create", {"title": "bench"})["agentId"]
        dshd = timed_calls(d, "dsh/plan/get", {"agentId": agent}, args.calls)

        # A paused goal, then edits: each is one durable goal/change and one notification,
        # with no continuation rounds running beside them.
        view = d.request("dsh/goal/create", {"agentId": agent, "objective": "bench", "maxRounds": 1_000_000})
        view = d.request("dsh/goal/get", {"agentId": agent})
        view = d.request("dsh/goal/pause", {"agentId": agent, "ref": {"id": view["id"], "revision": view["revision"]}})
        rev = view["revision"]
        whole, held = [], {}
        for i in range(args.goal_writes):
            d.notifications.clear()
            t0 = time.monotonic_ns()
            d.request(
                "dsh/goal/edit",
                {"agentId": agent, "ref": {"id": view["id"], "revision": rev}, "objective": f"bench {i}"},
            )
            rev += 1
            got = [t for t, m in d.notifications if m["method"] == "dsh/goal/changed" and m["params"].get("revision") == rev]
            if got:
                held[rev] = got[0]
                whole.append((got[0] - t0) / 1e9)
        events = d.request("dsh/session/events", {"agentId": agent})["events"]
        seq_of_revision = {
            e["data"]["goal"]["revision"]: e["seq"] for e in events if e["type"] == "goal/change" and "goal" in e["data"]
        }
        d.request("shutdown", None)
        d.send({"jsonrpc": "2.0", "method": "exit"})
        d.close()
        durable_at = {}
        for line in trace.read_text().splitlines():
            _sid, seq, ns = line.split()
            durable_at[int(seq)] = int(ns)
        latencies = [
            (held[r] - durable_at[seq_of_revision[r]]) / 1e9 for r in held if seq_of_revision.get(r) in durable_at
        ]

        raw = []
        path = Path(ws) / "raw.jsonl"
        line = b'{"type":"goal/change","seq":1,"at":"2026-11-29T00:00:00.000Z","data":{"version":1}}\n'
        with open(path, "ab") as f:
            for _ in range(200):
                t0 = time.perf_counter()
                f.write(line)
                f.flush()
                os.fdatasync(f.fileno())
                raw.append(time.perf_counter() - t0)

    print(f"round trips, {args.calls} sequential calls each")
    print(f"  bare stdlib echo        {fmt(base)}")
    print(f"  dshd dsh/plan/get       {fmt(dshd)}")
    print(f"  ratio dshd/bare         p50 {pct(dshd, .5) / pct(base, .5):5.2f}x   p99 {pct(dshd, .99) / pct(base, .99):5.2f}x   (target p50 <= 6x)")
    print(f"goal writes ({len(latencies)} dsh/goal/edit): fsync returned -> client holds dsh/goal/changed")
    print(f"  fsync -> notification held      {fmt(latencies)}   (target p99 <= 5 ms)")
    print(f"  request sent -> notification    {fmt(whole)}   (includes the fsync)")
    print(f"  raw write+fdatasync, same disk  {fmt(raw)}")


if __name__ == "__main__":
    main()
