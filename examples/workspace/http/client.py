"""A tiny HTTP client: the code the example conversation plans changes to."""

from __future__ import annotations

import urllib.request


class HttpClient:
    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def send(self, path: str) -> bytes:
        with urllib.request.urlopen(f"{self.base_url}/{path.lstrip('/')}", timeout=self.timeout_s) as reply:
            return reply.read()
