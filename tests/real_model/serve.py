"""Runs llama.cpp's own server (the `xllamacpp` wheel) on a GGUF until stdin closes.

    python tests/real_model/serve.py MODEL.gguf [--ctx 4096]

Prints one line, ``listening http://127.0.0.1:PORT``, once the model is loaded and the
server answers; exits when its stdin closes (the parent died or is done), so a test that
is killed never leaves a model server behind. One thread for the model: on two shared
cores two threads spin against each other and run about five times slower.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import xllamacpp

    port = free_port()
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: every request of a run finds the last one's cache
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True  # the model's own chat template: tools, tool-call parsing
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.offline = True
    params.warmup = False
    params.sampling.temp = 0.0  # greedy: the same prompt gets the same reply, run after run
    params.sampling.seed = 1
    server = xllamacpp.Server(params)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                if reply.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            print("the model server did not answer /health in 120 s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(f"listening {base}", flush=True)
    sys.stdin.read()  # until the parent closes it
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
