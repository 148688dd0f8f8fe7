"""dsh/chat/get and dsh/chat/item against the real daemon: the items a client builds from
the upserts are the items a fresh dsh/chat/get returns, a plan review shows as a pending
card while the person reads it, and a reload gives the same items under the same ids."""

from __future__ import annotations

import pytest

import asyncio
from pathlib import Path

from dshd_protocol import parse_params

from .conftest import write_workspace

PLAN = "# Plan: cache the parser\n\n1. Add an LRU.\n2. Measure.\n"


def upserted(client, agent: str) -> list[dict]:
    """The chat a client shows from the notifications alone: replace by id, append new ids."""
    order: list[str] = []
    shown: dict[str, dict] = {}
    for note in client.notifications:
        if note["method"] == "dsh/chat/item" and note["params"]["agentId"] == agent:
            parse_params("dsh/chat/item", note["params"])  # a valid wire value
            item = note["params"]["item"]
            if item["id"] not in shown:
                order.append(item["id"])
            shown[item["id"]] = item
    return [shown[i] for i in order]


@pytest.mark.slow
async def test_upserts_follow_the_conversation_and_a_reload_keeps_the_ids(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}, {"text": "Starting."}])
    release = asyncio.Event()

    async def person(params: dict) -> dict:
        await release.wait()
        return {"answers": [{"id": q["id"], "choice": "approve"} for q in params["questions"]]}

    client = await daemons.start(answer=person)
    created = await client.request("dsh/session/create", {"title": "chat"})
    agent, sid = created["agentId"], created["sessionId"]
    first = await client.request("dsh/chat/get", {"agentId": agent})
    assert [i["kind"] for i in first["items"]] == ["session"] and first["items"][0]["text"] == 'Session "chat"'

    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    pending = client.wait_for(
        # The card first streams in (partial, the plan growing with the call's arguments).
        lambda n: n["method"] == "dsh/chat/item" and n["params"]["item"]["kind"] == "plan-review"
        and not n["params"]["item"]["partial"], timeout=20
    )
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "Cache the parser."}))
    card = (await pending)["params"]["item"]
    assert card["outcome"] == "pending" and card["outcomeText"] == "waiting for your review" and card["plan"] == PLAN
    assert card["questionId"] == f"plan-review-{card['callId']}" and card["title"] == "Plan: cache the parser"
    during = await client.request("dsh/chat/get", {"agentId": agent})
    assert during["items"][-1] == card  # a client that opens the chat now sees the same card
    release.set()
    assert (await prompt)["stopReason"] == "end-turn"

    final = await client.request("dsh/chat/get", {"agentId": agent})
    assert upserted(client, agent) == final["items"][1:]  # everything after the first get came as upserts
    kinds = [i["kind"] for i in final["items"]]
    assert kinds == ["session", "plan-mode", "user-message", "plan-review", "plan-mode", "assistant-message", "turn-end"]
    review = final["items"][3]
    assert review["id"] == card["id"] and review["outcome"] == "approved"
    assert {n["params"]["sessionId"] for n in client.notifications if n["method"] == "dsh/chat/item"} == {sid}

    reopened = await client.request("dsh/session/open", {"sessionId": sid, "reload": True})
    again = await client.request("dsh/chat/get", {"agentId": reopened["agentId"]})
    assert again["items"] == final["items"]  # same ids, same words: they come from the log alone


@pytest.mark.slow
async def test_no_chat_items_until_a_client_asks(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "one"}, {"text": "two"}])
    client = await daemons.start()
    quiet = (await client.request("dsh/session/create", {}))["agentId"]
    await client.request("dsh/agent/prompt", {"agentId": quiet, "text": "hello"})
    assert not [n for n in client.notifications if n["method"] == "dsh/chat/item"]
    # Asking subscribes: the history comes in the answer, the next turn as upserts.
    history = await client.request("dsh/chat/get", {"agentId": quiet})
    assert [i["kind"] for i in history["items"]] == ["session", "user-message", "assistant-message", "turn-end"]
    await client.request("dsh/agent/prompt", {"agentId": quiet, "text": "again"})
    assert [i["kind"] for i in upserted(client, quiet)] == ["user-message", "assistant-message", "turn-end"]
