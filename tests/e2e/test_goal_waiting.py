"""A goal that waits for the person says so, and a spent budget is raised and resumed in
one action (G-20, G-21), on the real daemon over stdio with the scripted model.

While a round's plan review or a tool call's approval is open, every GoalView carries
``waitingFor`` ("plan-review" / "approval"), its status says "waiting for you" (tone
"hint"), and ``dsh/goal/changed`` sends op "waiting" (revision unchanged) when it
appears and when it goes. A goal blocked for its spent budget offers "raise" right after
"edit"; the client's edit-then-resume (each with its ref) runs the next round."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dshd_protocol import METHODS, from_wire, types as T

from .conftest import write_workspace
from .support import ref_of, wait_idle

PLAN = "# Plan: greet louder\n\n1. Change 'hi' to 'hello' in src/app.py.\n"


async def call(client, method: str, params: dict) -> Any:
    result = await client.request(method, params)
    from_wire(METHODS[method].result, result)  # strict: waitingFor is a wire field
    return result


class HeldAnswer:
    """Answers a request from the daemon only when the test says so."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self._answer: asyncio.Future | None = None
        self.params: dict | None = None

    async def __call__(self, params: dict) -> dict:
        self.params = params
        self._answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return await self._answer

    def give(self, answer: dict) -> None:
        assert self._answer is not None
        self._answer.set_result(answer)
        self.asked.clear()


def goal_notes(client, agent: str) -> list[dict]:
    notes = [n["params"] for n in client.notifications if n["method"] == "dsh/goal/changed" and n["params"]["agentId"] == agent]
    for note in notes:
        from_wire(T.GoalChangedParams, note)
    return notes


async def until(predicate, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the condition never held")
        await asyncio.sleep(0.02)


def ids(view: dict) -> list[str]:
    return [a["id"] for a in view["actions"]]


async def test_waiting_for_a_plan_review_and_an_approval_then_raise_and_resume(workspace: Path, daemons) -> None:
    edit = {"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": "'hi'", "newText": "'hello'"}}
    write_workspace(
        workspace,
        replies=[
            {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]},  # round 1
            {"text": "Plan approved; next round edits."},
            {"toolCalls": [edit]},  # round 2, after the raise
            {"text": "Edited."},
        ],
        plugins=["plan", "goals", "tools"],
    )
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    daemons.trusted = True
    review, approval = HeldAnswer(), HeldAnswer()
    client = await daemons.start(answer=review, approve=approval)
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"}))["stopReason"] == "command"

    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "greet louder", "maxRounds": 1})
    assert "waitingFor" not in goal and goal["status"]["short"] == "active"  # control: nothing asked yet

    # ---- a plan review is open: the goal waits for the person --------------------------------
    await asyncio.wait_for(review.asked.wait(), 10)
    await until(lambda: any(n["op"] == "waiting" for n in goal_notes(client, agent)))
    waiting = await call(client, "dsh/goal/get", {"agentId": agent})
    assert waiting["waitingFor"] == "plan-review"
    assert (waiting["status"]["short"], waiting["status"]["tone"]) == ("waiting for you", "hint")
    assert waiting["status"]["text"].endswith(" · waiting for you")
    assert "Active, waiting for you: a plan review is open." in waiting["status"]["detail"]
    [appeared] = [n for n in goal_notes(client, agent) if n["op"] == "waiting"]
    assert appeared["goal"]["waitingFor"] == "plan-review" and appeared["revision"] == waiting["revision"]

    question = review.params["questions"][0]
    review.give({"answers": [{"id": question["id"], "choice": "approve"}]})
    await until(lambda: len([n for n in goal_notes(client, agent) if n["op"] == "waiting"]) == 2)
    gone = [n for n in goal_notes(client, agent) if n["op"] == "waiting"][-1]
    assert "waitingFor" not in gone["goal"] and gone["revision"] == appeared["revision"]
    assert gone["goal"]["status"]["short"] != "waiting for you"

    # ---- the round budget runs out: raise is offered after edit ---------------------------------
    await until(lambda: any(n["op"] == "block" for n in goal_notes(client, agent)))
    await wait_idle(client, agent)
    blocked = await call(client, "dsh/goal/get", {"agentId": agent})
    assert blocked["blockedReason"]["code"] == "round-budget-exhausted" and "waitingFor" not in blocked
    assert ids(blocked) == ["edit", "raise", "complete", "clear"]
    assert blocked["actions"][1] == {"id": "raise", "label": "Raise the budget and resume…"}

    # The client's raise: edit with the blocked ref, then resume with the edit's ref.
    raised = await call(client, "dsh/goal/edit", {"agentId": agent, "ref": ref_of(blocked), "maxRounds": 2})
    assert raised["revision"] == blocked["revision"] + 1 and "raise" not in ids(raised) and "resume" in ids(raised)
    resumed = await call(client, "dsh/goal/resume", {"agentId": agent, "ref": ref_of(raised)})
    assert (resumed["phase"], resumed["activation"], resumed["revision"]) == ("active", "armed", raised["revision"] + 1)

    # ---- round 2 asks to approve an edit: waiting again, for an approval ------------------------
    await asyncio.wait_for(approval.asked.wait(), 10)
    await until(lambda: len([n for n in goal_notes(client, agent) if n["op"] == "waiting"]) == 3)
    again = await call(client, "dsh/goal/get", {"agentId": agent})
    assert again["waitingFor"] == "approval" and again["roundsStarted"] == 2
    assert "Active, waiting for you: an approval is open." in again["status"]["detail"]
    assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"  # nothing ran yet
    approval.give({"outcome": "allow-once"})
    await until(lambda: len([n for n in goal_notes(client, agent) if n["op"] == "waiting"]) == 4)
    await until(lambda: sum(n["op"] == "block" for n in goal_notes(client, agent)) == 2)
    await wait_idle(client, agent)
    assert (workspace / "src" / "app.py").read_text() == "print('hello')\n"
    done = await call(client, "dsh/goal/get", {"agentId": agent})
    assert "waitingFor" not in done and done["roundsStarted"] == 2
    spells = [n.get("goal", {}).get("waitingFor") for n in goal_notes(client, agent) if n["op"] == "waiting"]
    assert spells == ["plan-review", None, "approval", None]  # each appearance and each going, once


async def test_a_paused_goal_waits_for_nothing(workspace: Path, daemons) -> None:
    """Pausing withdraws the round's open approval: "waiting" goes. A question in the
    person's own turn later is no goal's waiting: the paused goal's view stays paused and no
    "waiting" is sent (control: the agent's activity shows that approval open)."""
    edit = {"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": "'hi'", "newText": "'hello'"}}
    write_workspace(workspace, replies=[{"toolCalls": [edit]}, {"toolCalls": [edit]}, {"text": "done"}],
                    plugins=["plan", "goals", "tools"])  # fmt: skip
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    daemons.trusted = True
    approval = HeldAnswer()
    client = await daemons.start(approve=approval)
    created = await call(client, "dsh/session/create", {})
    agent = created["agentId"]
    goal = await call(client, "dsh/goal/create", {"agentId": agent, "objective": "greet", "maxRounds": 3})
    await asyncio.wait_for(approval.asked.wait(), 10)  # round 1 asks
    await until(lambda: [n["op"] for n in goal_notes(client, agent)].count("waiting") == 1)
    current = await call(client, "dsh/goal/get", {"agentId": agent})
    assert current["waitingFor"] == "approval"
    paused = await call(client, "dsh/goal/pause", {"agentId": agent, "ref": ref_of(current)})
    assert paused["phase"] == "paused" and "waitingFor" not in paused
    await wait_idle(client, agent)
    waits = [n for n in goal_notes(client, agent) if n["op"] == "waiting"]
    assert [n["goal"].get("waitingFor") for n in waits] == ["approval", None]  # gone before the pause
    assert [n["op"] for n in goal_notes(client, agent)].index("pause") > goal_notes(client, agent).index(waits[-1])

    approval.asked.clear()
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "say hello"}))
    await asyncio.wait_for(approval.asked.wait(), 10)
    await asyncio.sleep(0.2)
    activity = [n["params"] for n in client.notifications if n["method"] == "dsh/agent/activity"]
    assert (activity[-1]["activity"], activity[-1].get("question")) == ("waiting", "approval")  # it is asked
    still = await call(client, "dsh/goal/get", {"agentId": agent})
    assert still["phase"] == "paused" and "waitingFor" not in still and still["status"]["short"] == "paused"
    approval.give({"outcome": "allow-once"})
    await asyncio.wait_for(prompt, 10)
    assert [n["op"] for n in goal_notes(client, agent)].count("waiting") == 2  # none for the person's own turn
    assert (workspace / "src" / "app.py").read_text() == "print('hello')\n"
