"""The ACP front door against the LSP one, in one run, on the scripted model.

    .venv/bin/python bench/acp_turns.py [--prompts 60] [--starts 5]

1. Prompt -> first text a client can show: `dshd acp`'s `session/prompt` -> first
   `agent_message_chunk`, against `dshd serve`'s `dsh/agent/prompt` -> first
   `dsh/agent/delta` of kind text (or, where the daemon streams no deltas, the
   `dsh/session/event` of the `assistant/message`). Interleaved, one prompt each per
   round, so machine noise hits both alike. Target: ratio (acp / serve) <= 1.2.
2. Spawn -> `initialize` answered, for both doors (the ACP SDK's pydantic schema is
   imported at start: most of the difference).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from rpc import Client as LspClient  # bench/rpc.py: blocking Content-Length client

REPLY = "Here is a reply of ordinary length, the kind a model streams back to a person."


class AcpClient(LspClient):
    """The same blocking client, framed as ACP frames: one JSON object per line."""

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError("dshd acp closed stdout")
        return json.loads(line)


def dshd(command: str) -> list[str]:
    exe = Path(sys.executable).with_name("dshd")
    return [str(exe), command] if exe.exists() else [sys.executable, "-m", "dshd", command]


def workspace(root: Path, replies: int) -> Path:
    (root / ".dsh").mkdir(parents=True)
    (root / "script.json").write_text(json.dumps({"replies": [{"text": REPLY}] * replies}))
    (root / ".dsh" / "config.toml").write_text(
        textwrap.dedent(
            """\
            plugins = ["plan", "goals"]
            [model]
            provider = "scripted"
            script = "script.json"
            """
        )
    )
    return root


def first_after(notes: list[tuple[int, dict]], t0: int, is_text) -> float:
    for at, msg in notes:
        if at >= t0 and is_text(msg):
            return (at - t0) / 1e6
    raise RuntimeError("no text arrived")


def serve_text(msg: dict) -> bool:
    params = msg.get("params") or {}
    if msg["method"] == "dsh/agent/delta":
        return params.get("kind") == "text"
    return msg["method"] == "dsh/session/event" and params.get("event", {}).get("type") == "assistant/message"


def acp_text(msg: dict) -> bool:
    return msg["method"] == "session/update" and msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk"


def start_serve(root: Path, env: dict) -> tuple[LspClient, float]:
    t0 = time.perf_counter()
    client = LspClient(dshd("serve"), env=env, cwd=str(root))
    client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
    took = time.perf_counter() - t0
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return client, took


def start_acp(root: Path, env: dict) -> tuple[AcpClient, float]:
    t0 = time.perf_counter()
    client = AcpClient(dshd("acp") + ["--stdio"], env=env, cwd=str(root))
    client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return client, time.perf_counter() - t0


def median_ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples):7.2f} ms  (min {min(samples):6.2f}, max {max(samples):7.2f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=60)
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "DSHD_LOG_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory(prefix="dshd-bench-acp-") as tmp:
        serve_root = workspace(Path(tmp) / "serve", args.prompts + 5)
        acp_root = workspace(Path(tmp) / "acp", args.prompts + 5)
        serve, _ = start_serve(serve_root, env)
        acp, _ = start_acp(acp_root, env)
        agent = serve.request("dsh/session/create", {})["agentId"]
        sid = acp.request("session/new", {"cwd": str(acp_root), "mcpServers": []})["sessionId"]
        serve_ms: list[float] = []
        acp_ms: list[float] = []
        serve_streams = False
        for i in range(args.prompts + 3):  # the first rounds warm both up
            t0 = time.monotonic_ns()
            serve.request("dsh/agent/prompt", {"agentId": agent, "text": f"question {i}"})
            s = first_after(serve.notifications, t0, serve_text)
            serve_streams = serve_streams or any(m["method"] == "dsh/agent/delta" for _, m in serve.notifications)
            t0 = time.monotonic_ns()
            acp.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"question {i}"}]})
            a = first_after(acp.notifications, t0, acp_text)
            serve.notifications.clear()
            acp.notifications.clear()
            if i >= 3:
                serve_ms.append(s)
                acp_ms.append(a)
        serve.request("shutdown", None)
        serve.send({"jsonrpc": "2.0", "method": "exit"})
        serve.close()
        acp.close()
        serve_first = "dsh/agent/delta" if serve_streams else "assistant/message event (no deltas)"
        print(f"prompt -> first text, {args.prompts} prompts each, interleaved:")
        print(f"  dshd serve  dsh/agent/prompt -> {serve_first:<22} {median_ms(serve_ms)}")
        print(f"  dshd acp    session/prompt -> {'agent_message_chunk':<22} {median_ms(acp_ms)}")
        print(f"  ratio acp / serve (medians): {statistics.median(acp_ms) / statistics.median(serve_ms):.2f}  (target <= 1.2)")

        serve_start: list[float] = []
        acp_start: list[float] = []
        for i in range(args.starts):
            client, took = start_serve(serve_root, env)
            serve_start.append(took * 1000)
            client.request("shutdown", None)
            client.send({"jsonrpc": "2.0", "method": "exit"})
            client.close()
            client, took = start_acp(acp_root, env)
            acp_start.append(took * 1000)
            client.close()
        print(f"spawn -> initialize answered, {args.starts} starts each:")
        print(f"  dshd serve  {median_ms(serve_start)}")
        print(f"  dshd acp    {median_ms(acp_start)}")
        print(f"  ratio acp / serve (medians): {statistics.median(acp_start) / statistics.median(serve_start):.2f}")


if __name__ == "__main__":
    main()
