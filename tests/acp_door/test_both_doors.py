"""One workspace, two front doors: a session made through `dshd serve` opens through
`dshd acp` with the same plan state and goal, and the other way round (one process
holds a session at a time; each door is stopped before the other opens it)."""

from __future__ import annotations

from tests.acp_door.support import idle, wait_log
from tests.e2e.conftest import Daemon, write_workspace
from tests.e2e.support import of_type, read_log, ref_of as ref


async def test_serve_then_acp_then_serve(clients):
    root = write_workspace(clients.workspace, [{"text": "hello from serve"}, {"text": "hello from acp"}])
    serve = Daemon(root)
    dsh = await serve.start()
    made = await dsh.request("dsh/session/create", {"title": "two doors"})
    sid, agent = made["sessionId"], made["agentId"]
    await dsh.request("dsh/agent/prompt", {"agentId": agent, "text": "first, through serve"})
    await dsh.request("dsh/plan/set", {"agentId": agent, "active": True})
    await dsh.request("dsh/goal/create", {"agentId": agent, "objective": "Ship both doors", "maxRounds": 1})
    # One round (the script is spent: "(script exhausted)"), then the budget blocks it.
    await wait_log(root, sid, lambda events: idle(events) and len(of_type(events, "goal/change")) == 2)
    await serve.stop_all()

    client = await clients.start()
    loaded = await client.load_session(sid)
    assert loaded["modes"]["currentModeId"] == "plan"
    assert loaded["configOptions"][0]["currentValue"] == "plan"
    goal = loaded["_meta"]["goal"]
    assert (goal["objective"], goal["phase"], goal["revision"], goal["roundsStarted"]) == ("Ship both doors", "blocked", 2, 1)
    assert goal["blockedReason"]["code"] == "round-budget-exhausted"
    users = client.of_kind("user_message_chunk", sid)
    assert [u["content"]["text"] for u in users] == ["first, through serve"]  # only what the person said
    # dshd's own notes come back as agent messages of their own, saying who wrote them:
    # the plan narration, then goal round 1.
    notes = [u for u in client.of_kind("agent_message_chunk", sid) if (u.get("_meta") or {}).get("dsh")]
    assert [u["_meta"]["dsh"]["plugin"] for u in notes] == ["plan", "goals"]
    assert notes[1]["_meta"]["dsh"]["goalRound"]["round"] == 1
    assert len({u["messageId"] for u in notes} | {users[0]["messageId"]}) == 3
    [info] = client.of_kind("session_info_update", sid)
    assert info["title"] == "two doors" and info["_meta"]["goal"] == goal

    await client.set_mode(sid, "default")
    edited = (await client.goal({"sessionId": sid, "action": "edit", "ref": ref(goal), "maxRounds": 3}))["goal"]
    await client.prompt(sid, "then, through acp")
    await clients.close_all()

    dsh = await serve.start()
    opened = await dsh.request("dsh/session/open", {"sessionId": sid})
    assert opened["plan"] == {"active": False}
    assert (opened["goal"]["revision"], opened["goal"]["maxRounds"], opened["goal"]["phase"]) == (3, 3, "blocked")
    assert opened["goal"] == {**edited, "updatedAt": opened["goal"]["updatedAt"]}
    texts = [e["data"]["text"] for e in of_type(read_log(root, sid), "user/message")]
    assert texts[0] == "first, through serve" and texts[-1] == "then, through acp"
    await serve.stop_all()


async def test_acp_then_serve(clients):
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": "Made in ACP", "maxRounds": 1}))["goal"]
    await wait_log(clients.workspace, sid, lambda events: idle(events) and len(of_type(events, "goal/change")) == 2)
    await clients.close_all()

    serve = Daemon(clients.workspace)
    dsh = await serve.start()
    listed = (await dsh.request("dsh/session/list", {}))["sessions"]
    assert [s["sessionId"] for s in listed] == [sid]
    opened = await dsh.request("dsh/session/open", {"sessionId": sid})
    assert opened["plan"] == {"active": True}
    assert (opened["goal"]["id"], opened["goal"]["objective"], opened["goal"]["phase"]) == (goal["id"], "Made in ACP", "blocked")
    assert opened["goal"]["activation"] == "disarmed"  # every load starts disarmed
    await serve.stop_all()
