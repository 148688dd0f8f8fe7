"""Every GoalView the daemon sends carries what people read: ``status`` (text, short,
tone, usage, detail) and ``actions`` (the ones it accepts now), in the daemon's words, so
the editors only render them. Checked on the real daemon over stdio: request results,
``dsh/goal/changed`` notices and ``dsh/session/list`` rows; an action left out is
refused, an offered one accepted (tests/api/test_goal_status.py checks every phase)."""

from __future__ import annotations

import asyncio

import pytest
from pygls.exceptions import JsonRpcException
from dshd_protocol import METHODS, from_wire, types as T

from .support import ref_of


async def call(client, method: str, params: dict):
    result = await client.request(method, params)
    from_wire(METHODS[method].result, result)  # strict: status and actions are required
    return result


def ids(view: dict) -> list[str]:
    return [a["id"] for a in view["actions"]]


async def test_goal_views_carry_the_daemons_words_everywhere(daemons) -> None:
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    blocked = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", timeout=10
    )
    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 1})
    assert goal["status"]["short"] == "active" and goal["status"]["tone"] == "none"
    assert goal["status"]["text"].startswith("0/1 · ") and goal["status"]["text"].endswith(" · active")
    assert ids(goal) == ["edit", "pause", "complete", "block", "clear"]
    assert goal["actions"][0] == {"id": "edit", "label": "Edit the goal…"}

    # The budget runs out: the notice's goal says so, in words, with no resume offered.
    note = (await blocked)["params"]
    from_wire(T.GoalChangedParams, note)
    spent = note["goal"]
    assert spent["status"]["short"] == "blocked: round-budget-exhausted"
    assert spent["status"]["tone"] == "warning"
    assert spent["status"]["usage"].startswith("1 of 1 rounds used")
    assert spent["status"]["detail"][0] == "Goal: ship it"
    assert ids(spent) == ["edit", "raise", "complete", "clear"]
    await asyncio.sleep(0.05)

    view = await call(client, "dsh/goal/get", {"agentId": agent})
    assert view["status"] == spent["status"] and view["actions"] == spent["actions"]
    # Raising the budget makes resume possible: the daemon offers it now.
    edited = await call(client, "dsh/goal/edit", {"agentId": agent, "ref": ref_of(view), "maxRounds": 5})
    assert ids(edited) == ["edit", "resume", "complete", "clear"]
    assert edited["status"]["text"].startswith("1/5 · ")

    # A left-out action is refused, an offered one accepted (the one phase table).
    with pytest.raises(JsonRpcException) as refused:
        await client.request("dsh/goal/pause", {"agentId": agent, "ref": ref_of(edited)})
    assert refused.value.data["kind"] == "invalid-transition"
    completed = await call(client, "dsh/goal/complete", {"agentId": agent, "ref": ref_of(edited)})
    assert completed["status"]["short"] == "complete" and ids(completed) == ["create", "clear"]

    # The session list's goal carries the same words.
    listed = await call(client, "dsh/session/list", {})
    row = next(s for s in listed["sessions"] if s["sessionId"] == created["sessionId"])
    assert row["goal"]["status"]["short"] == "complete" and ids(row["goal"]) == ["create", "clear"]
