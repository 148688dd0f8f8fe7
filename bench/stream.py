"""A 2,000-token streamed reply: through the daemon to a stdio client, against the same
stream consumed directly with the official SDK, in one run.

    .venv/bin/python bench/stream.py [--tokens 2000] [--runs 7]

The loopback OpenAI server (tests/loopback_models.py) runs in its own process and sends
one chunk per token as fast as it can. Baseline: `AsyncOpenAI.chat.completions.create(
stream=True)` in this process, timed from the request to the last chunk held. dshd:
`dshd serve` with provider openai pointed at the same server, timed from `dsh/agent/prompt`
sent to the moment this client holds the last `dsh/agent/delta` (the reply's text
complete). Each side is warmed up first (the daemon imports the SDK on its first call).
Target: ratio <= 1.3.

dshd's OpenAI adapter asks the SDK for chunks as plain JSON (its documented raw request,
``client.post(..., cast_to=object)``) instead of typed chunk objects, which cost more to
build than everything else a token does on its way to the editor. So the daemon's own
overhead is also shown beside that reading of the stream ("raw chunks").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from rpc import Client, dshd_argv  # noqa: E402

SERVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from loopback_models import LoopbackModelServer, Reply
    text = "tok " * {tokens}
    server = LoopbackModelServer("openai").start()
    server.script(*[Reply(text, piece=4) for _ in range(1000)])
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
    """
)


def start_server(tokens: int) -> tuple[subprocess.Popen, str]:
    code = SERVER.format(tests=str(HERE.parent / "tests"), tokens=tokens)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/v1"


BODY = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True, "stream_options": {"include_usage": True}}


async def sdk_once(client, chars: int) -> float:
    t0 = time.perf_counter()
    stream = await client.chat.completions.create(**BODY)
    got = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got += len(chunk.choices[0].delta.content)
            if got == chars:
                elapsed = time.perf_counter() - t0
    assert got == chars, got
    return elapsed


async def raw_once(client, chars: int) -> float:
    """The way dshd's adapter reads the stream: the SDK's raw request, chunks as dicts."""
    import openai

    t0 = time.perf_counter()
    stream = await client.post("/chat/completions", body=BODY, cast_to=object, stream=True, stream_cls=openai.AsyncStream[object])
    got = 0
    async for chunk in stream:
        choices = chunk.get("choices")
        if choices and choices[0]["delta"].get("content"):
            got += len(choices[0]["delta"]["content"])
            if got == chars:
                elapsed = time.perf_counter() - t0
    assert got == chars, got
    return elapsed


def sdk_runs(base_url: str, chars: int, runs: int, once=sdk_once) -> list[float]:
    import openai

    async def go() -> list[float]:
        client = openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)
        await once(client, chars)  # warm-up
        samples = [await once(client, chars) for _ in range(runs)]
        await client.close()
        return samples

    return asyncio.run(go())


def daemon_once(d: Client, agent: str, chars: int) -> float:
    d.next_id += 1
    my_id = d.next_id
    t0 = time.perf_counter()
    d.send({"jsonrpc": "2.0", "id": my_id, "method": "dsh/agent/prompt", "params": {"agentId": agent, "text": "go"}})
    got, elapsed = 0, None
    while True:
        msg = d.read()
        if msg.get("method") == "dsh/agent/delta" and msg["params"]["kind"] == "text":
            got += len(msg["params"]["text"])
            if got == chars:
                elapsed = time.perf_counter() - t0
        elif msg.get("id") == my_id:
            assert msg["result"]["stopReason"] == "end-turn", msg
            assert elapsed is not None, got
            return elapsed


def daemon_runs(base_url: str, chars: int, runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as root:
        config = {"plugins": [], "model": {"provider": "openai", "model": "m", "baseUrl": base_url, "apiKeyEnv": "BENCH_KEY"}}
        d = Client(dshd_argv(), env={**os.environ, "DSHD_LOG_LEVEL": "WARNING", "BENCH_KEY": "bench"}, cwd=root)
        d.request("initialize", {"processId": None, "rootUri": Path(root).as_uri(), "capabilities": {},
                                 "initializationOptions": {"config": config}})  # fmt: skip
        agent = d.request("dsh/session/create", {})["agentId"]
        daemon_once(d, agent, chars)  # warm-up: the SDK is imported on the first call
        samples = [daemon_once(d, agent, chars) for _ in range(runs)]
        d.request("shutdown", None)
        d.send({"jsonrpc": "2.0", "method": "exit"})
        d.close()
    return samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    chars = 4 * args.tokens
    server, base_url = start_server(args.tokens)
    try:
        sdk, raw, daemon = [], [], []
        for _ in range(args.runs):  # interleaved, so all see the same load
            sdk += sdk_runs(base_url, chars, 1)
            raw += sdk_runs(base_url, chars, 1, raw_once)
            daemon += daemon_runs(base_url, chars, 1)
    finally:
        server.stdin.close()
        server.wait(10)
    base, bare, ours = statistics.median(sdk), statistics.median(raw), statistics.median(daemon)
    print(f"{args.tokens}-token streamed reply (one chunk a token), median of {args.runs}:")
    print(f"  SDK directly (baseline)                 {base * 1000:8.1f} ms")
    print(f"  SDK, raw chunks (as dshd reads them)    {bare * 1000:8.1f} ms   ratio {bare / base:5.2f}")
    print(f"  through dshd to a stdio client          {ours * 1000:8.1f} ms   ratio {ours / base:5.2f}  (target <= 1.3)")
    print(f"  dshd's own overhead (vs raw chunks)     {(ours - bare) / args.tokens * 1e6:8.1f} µs a delta   ratio {ours / bare:5.2f}")


if __name__ == "__main__":
    main()
