"""What the chat says agrees with the rest of the daemon at the same moment, on the real
daemon over stdio: the goal line's token figure is the goal's own total once its round is
over, and a tool call waiting for its approval says so (not "running") until it is decided."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dshd_protocol import METHODS, from_wire

from .conftest import write_workspace
from .support import read_log, wait_idle


async def call(client, method: str, params: dict) -> Any:
    result = await client.request(method, params)
    from_wire(METHODS[method].result, result)
    return result


def chat_items(client, agent: str, kind: str) -> list[dict]:
    """The dsh/chat/item upserts of that kind, in the order they came."""
    return [
        n["params"]["item"]
        for n in client.notifications
        if n["method"] == "dsh/chat/item" and n["params"]["agentId"] == agent and n["params"]["item"]["kind"] == kind
    ]


async def test_goal_line_says_the_goals_final_tokens(workspace: Path, daemons) -> None:
    # The round completes the goal in its first reply (1,000 tokens), then its last reply
    # counts 1,600 more: the goal's total is 2,600.
    write_workspace(workspace, replies=[
        {"text": "Done it.", "toolCalls": [{"name": "goal_complete", "arguments": {}}], "usage": {"inputTokens": 900, "outputTokens": 100}},
        {"text": "The goal is complete.", "usage": {"inputTokens": 1500, "outputTokens": 100}},
    ])  # fmt: skip
    client = await daemons.start()
    created = await call(client, "dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    await call(client, "dsh/chat/get", {"agentId": agent})  # subscribes to the upserts
    await call(client, "dsh/goal/create", {"agentId": agent, "objective": "ship it", "maxRounds": 1})
    await wait_idle(client, agent)
    await asyncio.sleep(0.1)

    final = await call(client, "dsh/goal/get", {"agentId": agent})
    assert (final["phase"], final["tokensUsed"]) == ("complete", 2600)
    # The log's complete event holds the figure of its moment (the control: the two differ).
    completes = [e["data"] for e in read_log(workspace, sid) if e["type"] == "goal/change" and e["data"]["op"] == "complete"]
    assert [c["tokensUsed"] for c in completes] == [1000]

    notes = [n["params"] for n in client.notifications if n["method"] == "dsh/goal/changed" and n["params"]["agentId"] == agent]
    assert notes[-1]["goal"]["tokensUsed"] == 2600

    whole = await call(client, "dsh/chat/get", {"agentId": agent})
    line = next(i for i in whole["items"] if i["kind"] == "goal" and i["op"] == "complete")
    assert line["tokensUsed"] == 2600 and line["text"] == "Goal complete (1/1 rounds used, 2.6k tokens)"
    # The live upserts end with the same line, and a fresh read of the log agrees.
    upserts = [i for i in chat_items(client, agent, "goal") if i["op"] == "complete"]
    assert upserts[0]["tokensUsed"] == 1000 and upserts[-1] == line
    reopened = await call(client, "dsh/session/open", {"sessionId": sid, "reload": True})
    again = await call(client, "dsh/chat/get", {"agentId": reopened["agentId"]})
    assert next(i for i in again["items"] if i["kind"] == "goal" and i["op"] == "complete") == line


class DecidingPerson:
    """Answers dsh/permission/ask when the test says so: ``asked`` is set when the request
    arrives, ``decide(outcome)`` answers it."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self._answer: asyncio.Future | None = None

    async def __call__(self, params: dict) -> dict:
        self._answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return {"outcome": await self._answer}

    def decide(self, outcome: str) -> None:
        assert self._answer is not None
        self._answer.set_result(outcome)


def approvals_workspace(root: Path) -> None:
    edit = {"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": "'hi'", "newText": "'hello'"}}
    write_workspace(root, replies=[{"toolCalls": [edit]}, {"text": "done"}], plugins=["plan", "goals", "tools"])
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text("print('hi')\n")


async def edit_item(client, agent: str) -> dict:
    whole = await call(client, "dsh/chat/get", {"agentId": agent})
    [item] = [i for i in whole["items"] if i["kind"] == "tool-call" and i["name"] == "edit_file"]
    return item


async def test_a_tool_call_waits_for_its_approval_then_runs(workspace: Path, daemons) -> None:
    approvals_workspace(workspace)
    daemons.trusted = True
    person = DecidingPerson()
    client = await daemons.start(approve=person)
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    await call(client, "dsh/chat/get", {"agentId": agent})  # subscribes to the upserts
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"}))
    await asyncio.wait_for(person.asked.wait(), 10)
    await asyncio.sleep(0.2)
    # While the person is asked: the item waits for them, and so does the agent's activity.
    assert (await edit_item(client, agent))["status"] == "waiting"
    assert chat_items(client, agent, "tool-call")[-1]["status"] == "waiting"
    activity = [n["params"] for n in client.notifications if n["method"] == "dsh/agent/activity"]
    assert activity[-1]["activity"] == "waiting"
    assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"  # nothing ran

    person.decide("allow-once")
    assert (await asyncio.wait_for(prompt, 10))["stopReason"] == "end-turn"
    await asyncio.sleep(0.1)
    assert (workspace / "src" / "app.py").read_text() == "print('hello')\n"
    statuses = [i["status"] for i in chat_items(client, agent, "tool-call") if i["name"] == "edit_file" and not i["partial"]]
    # "running" from its call until the approval is asked (no approval known yet), then
    # waiting until the decision, running, ok: never "running" while the person is asked.
    assert statuses[statuses.index("waiting"):] == ["waiting", "running", "ok"]
    assert (await edit_item(client, agent))["status"] == "ok"


async def test_a_refused_call_goes_from_waiting_to_failed(workspace: Path, daemons) -> None:
    approvals_workspace(workspace)
    daemons.trusted = True
    person = DecidingPerson()
    client = await daemons.start(approve=person)
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"}))
    await asyncio.wait_for(person.asked.wait(), 10)
    # The chat's first read comes while the approval is open (built from the log, which
    # holds no ask): the item waits all the same.
    assert (await edit_item(client, agent))["status"] == "waiting"

    person.decide("reject")
    await asyncio.wait_for(prompt, 10)
    await asyncio.sleep(0.1)
    assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"
    statuses = [i["status"] for i in chat_items(client, agent, "tool-call") if i["name"] == "edit_file"]
    assert statuses and "running" not in statuses and statuses[-1] == "failed"
    assert (await edit_item(client, agent))["status"] == "failed"
