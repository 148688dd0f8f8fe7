"""Helpers shared by the end-to-end tests: the session log on disk, events by type,
goal refs, waiting for a session to go idle, a person who never answers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path


def log_path(root: Path, session_id: str) -> Path:
    return root / ".dsh" / "sessions" / session_id / "log.jsonl"


def read_log(root: Path, session_id: str) -> list[dict]:
    """Every complete event of a session, read from its log file (the daemon may be
    appending a line right now: bytes after the last newline are not an event yet)."""
    data = log_path(root, session_id).read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def ref_of(goal: dict) -> dict:
    return {"id": goal["id"], "revision": goal["revision"]}


async def wait_idle(client, agent: str, timeout: float = 5) -> list[dict]:
    """Until the log shows every opened turn closed; returns the events."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        events = (await client.request("dsh/session/events", {"agentId": agent}))["events"]
        if len(of_type(events, "turn/open")) == len(of_type(events, "turn/close")):
            return events
        await asyncio.sleep(0.02)
    raise TimeoutError("the agent did not go idle")


class AbsentPerson:
    """The editor's handler for a request a person never answers: ``asked`` is set when the
    request arrives, ``withdrawn`` when the daemon withdraws it (only a ``$/cancelRequest``
    from the daemon cancels the handler). ``reply`` is what it would answer after 30 s."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply
        self.asked = asyncio.Event()
        self.withdrawn = asyncio.Event()

    async def __call__(self, params: dict) -> dict:
        self.asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.withdrawn.set()
            raise
        return self.reply
