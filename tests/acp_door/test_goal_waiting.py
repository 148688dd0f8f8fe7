"""What the goal updates the ACP door sends say about waiting and estimated spend: while
a goal round's plan review is open, ``session_info_update._meta.goal`` carries
``waitingFor: "plan-review"`` (status "waiting for you") with ``goalChange.op``
"waiting", and it goes when the person answers; a round whose provider reported no
usage makes the goal's tokens ``tokensEstimated`` (shown as ``~``). Both SDK clients."""

from __future__ import annotations

import asyncio

import pytest
from loopback_models import LoopbackModelServer, Reply

from tests.acp_door.support import PLAN, idle, selected, tool_call, wait_log
from tests.acp_door.test_spend import use_server
from tests.e2e.conftest import write_workspace


pytestmark = pytest.mark.slow  # each starts `dshd acp` and runs a goal round


def goal_updates(client, sid: str) -> list[dict]:
    return [u["_meta"] for u in client.of_kind("session_info_update", sid) if "goalChange" in u.get("_meta", {})]


async def test_a_round_waiting_for_its_plan_review_says_so_until_answered(clients):
    write_workspace(clients.workspace, [{"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}, {"text": "approved, working"}])
    client = await clients.start()
    asked = asyncio.get_running_loop().create_future()
    answer = asyncio.get_running_loop().create_future()

    def hold(params):
        asked.set_result(params)
        return answer

    client.answer_permission = hold
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    await client.goal({"sessionId": sid, "action": "set", "objective": "Ship the parser tests", "maxRounds": 1})
    await asyncio.wait_for(asked, 20)

    waiting = await client.wait_update(
        lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "waiting", timeout=10
    )
    goal = waiting["update"]["_meta"]["goal"]
    assert goal["waitingFor"] == "plan-review"
    assert goal["status"]["short"] == "waiting for you" and goal["status"]["tone"] == "hint"
    since = len(client.updates)
    answer.set_result(selected("approve"))

    gone = await client.wait_update(
        lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "waiting", timeout=10, since=since
    )
    meta = gone["update"]["_meta"]
    assert "waitingFor" not in meta["goal"]  # the control: it goes once answered
    assert meta["goalChange"]["revision"] == waiting["update"]["_meta"]["goalChange"]["revision"]
    await wait_log(clients.workspace, sid, idle)


async def test_a_round_waiting_for_an_approval_says_so_until_answered(clients):
    edit = tool_call("edit_file", path="notes.txt", oldText="one", newText="two")
    root = write_workspace(clients.workspace, [{"toolCalls": [edit]}, {"text": "edited"}], plugins=["plan", "goals", "tools"])
    (root / "notes.txt").write_text("one\n")
    client = await clients.start()
    answer = asyncio.get_running_loop().create_future()
    client.answer_permission = lambda params: answer
    sid = (await client.new_session())["sessionId"]
    await client.goal({"sessionId": sid, "action": "set", "objective": "Edit the notes", "maxRounds": 1})

    waiting = await client.wait_update(
        lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "waiting", timeout=20
    )
    assert waiting["update"]["_meta"]["goal"]["waitingFor"] == "approval"
    assert waiting["update"]["_meta"]["goal"]["status"]["short"] == "waiting for you"
    since = len(client.updates)
    answer.set_result(selected("allow-once"))
    gone = await client.wait_update(
        lambda u: u["update"].get("_meta", {}).get("goalChange", {}).get("op") == "waiting", timeout=10, since=since
    )
    assert "waitingFor" not in gone["update"]["_meta"]["goal"]
    await wait_log(clients.workspace, sid, idle)
    assert (root / "notes.txt").read_text() == "two\n"  # the allowed edit ran


async def test_a_round_without_reported_usage_makes_the_goal_tokens_estimated(clients, tmp_path, monkeypatch):
    with LoopbackModelServer("openai") as server:
        server.script(Reply("round one, no usage reported", usage=None), Reply("round two", usage=(40, 4)))
        use_server(clients, tmp_path, monkeypatch, server)
        client = await clients.start()
        sid = (await client.new_session())["sessionId"]
        await client.goal({"sessionId": sid, "action": "set", "objective": "Tidy the notes", "maxRounds": 1})
        await wait_log(clients.workspace, sid, lambda events: idle(events) and len(events) > 6)
        blocked = await client.wait_update(
            lambda u: (u["update"].get("_meta", {}).get("goal") or {}).get("phase") == "blocked", timeout=20
        )
    goal = blocked["update"]["_meta"]["goal"]
    assert goal["tokensUsed"] > 0 and goal["tokensEstimated"] is True
    assert "~" in goal["status"]["text"]
    # The control: the goal's first update, before any round spent tokens, is no estimate.
    assert "tokensEstimated" not in goal_updates(client, sid)[0]["goal"]
