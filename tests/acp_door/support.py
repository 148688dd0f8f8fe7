"""Helpers for the ACP tests: the session log on disk, waiting for it, small builders."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.support import of_type, read_log


async def wait_log(root: Path, session_id: str, pred, timeout: float = 20) -> list[dict]:
    """Until ``pred(events)`` holds for the session's log; returns the events."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        events = read_log(root, session_id)
        if pred(events):
            return events
        if loop.time() > deadline:
            raise TimeoutError(f"the log never got there: {[e['type'] for e in events]}")
        await asyncio.sleep(0.05)


def idle(events: list[dict]) -> bool:
    return len(of_type(events, "turn/open")) == len(of_type(events, "turn/close"))


def selected(option_id: str) -> dict:
    """A client's answer to session/request_permission: this option chosen."""
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def finished(client, sid: str) -> list[dict]:
    """The tool_call_update that finished each call, in order."""
    return [u for u in client.of_kind("tool_call_update", sid) if u.get("status") in ("completed", "failed")]


def tool_call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


PLAN = "# Plan: add the parser tests\n\n1. Write a failing test.\n2. Fix the parser."

