"""The real model: llama.cpp's server (xllamacpp) with Qwen2.5-Coder-0.5B-Instruct, for the
real-model tests (tests/e2e/test_real_model.py) and bench/cache.py.

``./run setup`` installs both (tests/real_model/setup.sh); :func:`model_path` says where
the GGUF is, and :class:`RealServer` runs tests/real_model/serve.py in a child process
that exits when its stdin closes. The server speaks OpenAI's Chat Completions at ``/v1``
and Anthropic's Messages at ``/v1/messages`` (so the anthropic provider's base URL is the
root), and reports the prompt tokens it read from its cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVE = REPO / "tests" / "real_model" / "serve.py"
GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# The server's "model" field is free text: it serves the one model it loaded.
MODEL_NAME = "qwen2.5-coder-0.5b"


def model_path() -> Path:
    cache = Path(os.environ.get("DSHD_REAL_MODEL_CACHE", REPO / ".cache" / "real-model"))
    return cache / GGUF_NAME


def missing() -> str | None:
    """Why the real model cannot run here (None: it can)."""
    try:
        import importlib.util

        if importlib.util.find_spec("xllamacpp") is None:
            return "xllamacpp is not installed (./run setup installs it)"
    except ValueError:
        return "xllamacpp is not installed (./run setup installs it)"
    if not model_path().is_file():
        return f"no model at {model_path()} (./run setup builds it)"
    return None


class RealServer:
    """One llama.cpp server on a free port; ``base`` is its root URL."""

    def __init__(self, ctx: int = 4096, start_timeout: float = 180.0) -> None:
        self.stderr_path = None
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVE), str(model_path()), "--ctx", str(ctx)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        line = self._first_line(start_timeout)
        if not line.startswith("listening "):
            self.close()
            raise RuntimeError("the model server did not start: " + "".join(self._stderr[-20:]))
        self.base = line.split(" ", 1)[1].strip()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def _first_line(self, timeout: float) -> str:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return box[0] if box else ""

    def slot(self) -> dict:
        """The server's one slot as /slots reports it (the last prompt's tokens and timings)."""
        with urllib.request.urlopen(f"{self.base}/slots", timeout=10) as reply:
            return json.loads(reply.read())[0]

    def log_tail(self, lines: int = 40) -> str:
        return "".join(self._stderr[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "RealServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
