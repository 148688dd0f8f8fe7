"""Several clients, one live session, one answer (D-4, D-5, D-6's disarm rule), in
process over real socket connections: every connection is a DshDaemon on one Host (what
the shared daemon runs per connection), driven by a raw LSP-framed client.

Outcomes are read from the wire (results, the daemon's requests, notifications), from
the session log on disk and from the files the tools would change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dshd.daemon.host import Host
from dshd.services.goals import GoalService
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.shared_host_support import Conn, RpcError, connect

PLAN = "# Plan: one shared review\n\n1. Ask both editors.\n2. Take the first answer.\n"
ORIGINAL = "def greet():\n    print('hi')\n"
EDITED = "def greet():\n    print('hello')\n"


def exit_plan() -> dict:
    return {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}


def edit_call() -> dict:
    return {"toolCalls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "oldText": "print('hi')", "newText": "print('hello')"}}]}


def tools_workspace(root: Path, replies: list[dict]) -> Path:
    write_workspace(root, replies=replies, plugins=["plan", "goals", "tools"])
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text(ORIGINAL)
    return root


@pytest.fixture
async def host():
    host = Host()
    conns: list[Conn] = []
    host.test_conns = conns  # type: ignore[attr-defined]
    yield host
    for conn in conns:
        if not conn.writer.is_closing():
            await conn.close()
    await host.shutdown()


async def join(host: Host, root: Path, name: str | None, **caps) -> Conn:
    conn = await connect(host, root, name, **caps)
    host.test_conns.append(conn)  # type: ignore[attr-defined]
    return conn


async def open_both(host: Host, root: Path) -> tuple[Conn, Conn, str, str]:
    a = await join(host, root, "Alpha")
    b = await join(host, root, "Beta")
    created = await a.call("dsh/session/create", {"title": "shared"})
    opened = await b.call("dsh/session/open", {"sessionId": created["sessionId"]})
    assert opened["agentId"] == created["agentId"]  # the live agent, no session-locked
    return a, b, created["sessionId"], created["agentId"]


def exit_results(events: list[dict]) -> list[dict]:
    calls = {e["data"]["callId"] for e in of_type(events, "tool/call") if e["data"]["name"] == "exit_plan_mode"}
    return [e["data"] for e in of_type(events, "tool/result") if e["data"]["callId"] in calls]


# ---- D-4: several clients, one live session ----------------------------------------------


async def test_two_connections_share_the_live_agent_and_its_news(tmp_path, host):
    write_workspace(tmp_path, replies=[{"text": "hello from the model"}, {"text": "second reply"}] + [{"text": "a round"}] * 8)
    a, b, sid, agent = await open_both(host, tmp_path)

    # Each is told who is attached, itself marked; the list follows every change.
    assert await a.until(lambda: [("Alpha", True), ("Beta", False)] in a.clients_seen())
    assert await b.until(lambda: [("Alpha", False), ("Beta", True)] in b.clients_seen())

    # A prompt from either: both get the session's events (and the turn's answer).
    result = await b.call("dsh/agent/prompt", {"agentId": agent, "text": "hi"})
    assert result["stopReason"] == "end-turn"
    for conn in (a, b):
        await conn.until(lambda c=conn: any(p["event"]["type"] == "turn/close" for p in c.of("dsh/session/event")))
        texts = [p["event"]["data"].get("text") for p in conn.of("dsh/session/event") if p["event"]["type"] == "user/message"]
        assert texts == ["hi"]
    await a.call("dsh/agent/prompt", {"agentId": agent, "text": "again"})
    await b.until(lambda: sum(p["event"]["type"] == "turn/close" for p in b.of("dsh/session/event")) == 2)

    # Plan toggles and goal writes from either, CAS as always.
    assert (await b.call("dsh/plan/set", {"agentId": agent, "active": True}))["outcome"] == "committed"
    await a.until(lambda: a.of("dsh/plan/changed"))
    created_goal = await a.call("dsh/goal/create", {"agentId": agent, "objective": "share", "maxRounds": 5})
    seen = await b.call("dsh/goal/get", {"agentId": agent})
    paused = await b.call("dsh/goal/pause", {"agentId": agent, "ref": {"id": seen["id"], "revision": seen["revision"]}})
    assert paused["phase"] == "paused"
    await a.until(lambda: any(p.get("goal", {}).get("phase") == "paused" for p in a.of("dsh/goal/changed")))
    with pytest.raises(RpcError) as stale:  # A still holds the revision it created
        await a.call("dsh/goal/edit", {"agentId": agent, "ref": {"id": created_goal["id"], "revision": created_goal["revision"]}, "objective": "mine"})
    assert stale.value.error["data"]["kind"] == "stale-revision"

    # Session close from one connection detaches it only; the other goes on.
    await b.call("dsh/session/close", {"agentId": agent})
    assert await a.until(lambda: a.clients_seen()[-1] == [("Alpha", True)])
    assert (await a.call("dsh/plan/get", {"agentId": agent}))["active"] is True
    assert len(of_type(read_log(tmp_path, sid), "turn/close")) >= 2


async def test_a_client_without_a_name_is_client_n(tmp_path, host):
    write_workspace(tmp_path)
    a = await join(host, tmp_path, None)
    created = await a.call("dsh/session/create", {})
    [listing] = await a.until(lambda: a.of("dsh/session/clients"))
    assert listing["agentId"] == created["agentId"] and listing["sessionId"] == created["sessionId"]
    number = a.daemon.client_id.removeprefix("c-")
    assert listing["clients"] == [{"clientId": a.daemon.client_id, "clientName": f"client {number}", "you": True}]


async def test_a_client_name_is_escaped_and_cut_before_others_read_it(tmp_path, host):
    write_workspace(tmp_path)
    a = await join(host, tmp_path, "Alpha")
    created = await a.call("dsh/session/create", {})
    b = await join(host, tmp_path, "evil\u202etxt.exe\nsecond line " + "x" * 200)
    await b.call("dsh/session/open", {"sessionId": created["sessionId"]})
    [(_, _), (name, you)] = (await a.until(lambda: [c for c in a.clients_seen() if len(c) == 2]))[-1]
    assert you is False
    assert name.startswith("evil\\u202etxt.exe\\nsecond line x") and "\u202e" not in name and "\n" not in name
    assert len(name) == 80 and name.endswith("…")
    # Control: a plain name is kept as given.
    assert a.clients_seen()[-1][0] == ("Alpha", True)


# ---- D-5: one answer wins --------------------------------------------------------------------


async def test_first_plan_review_answer_wins_and_the_late_one_is_told(tmp_path, host):
    write_workspace(tmp_path, replies=[exit_plan(), {"text": "Starting."}])
    a, b, sid, agent = await open_both(host, tmp_path)
    await a.call("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    turn = a.start_call("dsh/agent/prompt", {"agentId": agent, "text": "plan it"})

    ask_a = await a.request_for("dsh/questions/ask")
    ask_b = await b.request_for("dsh/questions/ask")
    [question] = ask_a["params"]["questions"]
    assert ask_b["params"]["questions"] == [question]  # the same question to both
    # Both answer: B first (approve), A right after (revise).
    b.answer(ask_b, {"answers": [{"id": question["id"], "choice": "approve"}]})
    await b.until(lambda: b.of("dsh/question/resolved"))
    a.answer(ask_a, {"answers": [{"id": question["id"], "choice": "revise", "feedback": "too late"}]})

    assert (await turn)["stopReason"] == "end-turn"
    resolved = {"agentId": agent, "sessionId": sid, "questionId": question["id"], "kind": "plan-review",
                "outcome": "approve", "by": {"clientName": "Beta"}}  # fmt: skip
    for conn in (a, b):
        assert conn.of("dsh/question/resolved") == [resolved]
    # A's ask was withdrawn after the news; its late answer changed nothing, and it is told so.
    cancels = [n["params"]["id"] for n in a.notes if n["method"] == "$/cancelRequest"]
    assert cancels == [ask_a["id"]]
    assert not [n for n in b.notes if n["method"] == "$/cancelRequest"]
    note = await a.until(lambda: [p["message"] for p in a.of("window/showMessage") if "changed nothing" in p["message"]])
    assert "answered in Beta first (approved)" in note[0]
    assert not [p for p in b.of("window/showMessage") if "changed nothing" in p["message"]]
    [result] = exit_results(read_log(tmp_path, sid))
    assert result["ok"] is True and result["review"] == {"outcome": "approved", "client": "Beta"}
    assert (await a.call("dsh/plan/get", {"agentId": agent}))["active"] is False


async def test_first_approval_answer_wins_reject_before_allow(tmp_path, host):
    tools_workspace(tmp_path, [edit_call(), {"text": "ok"}])
    a, b, sid, agent = await open_both(host, tmp_path)
    turn = a.start_call("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
    ask_a = await a.request_for("dsh/permission/ask")
    ask_b = await b.request_for("dsh/permission/ask")
    assert ask_a["params"] == ask_b["params"]
    call_id = ask_a["params"]["callId"]
    a.answer(ask_a, {"outcome": "reject", "feedback": "not now"})
    b.answer(ask_b, {"outcome": "allow-once"})  # sent at once: both answered
    assert (await turn)["stopReason"] == "end-turn"

    assert (tmp_path / "src" / "app.py").read_text() == ORIGINAL  # the first answer (reject) stands
    [decision] = [e["data"] for e in of_type(read_log(tmp_path, sid), "permission/decision")]
    assert decision["outcome"] == "reject" and decision["by"] == "person" and decision["feedback"] == "not now"
    resolved = {"agentId": agent, "sessionId": sid, "questionId": call_id, "kind": "permission",
                "outcome": "reject", "by": {"clientName": "Alpha"}}  # fmt: skip
    for conn in (a, b):
        await conn.until(lambda c=conn: c.of("dsh/question/resolved"))
        assert conn.of("dsh/question/resolved") == [resolved]
    note = await b.until(lambda: [p["message"] for p in b.of("window/showMessage") if "changed nothing" in p["message"]])
    assert "answered in Alpha first (rejected)" in note[0]


async def test_a_client_attaching_mid_question_is_asked_and_may_answer(tmp_path, host):
    tools_workspace(tmp_path, [edit_call(), {"text": "ok"}])
    a = await join(host, tmp_path, "Alpha")
    created = await a.call("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    turn = a.start_call("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
    ask_a = await a.request_for("dsh/permission/ask")  # A leaves it open

    b = await join(host, tmp_path, "Beta")
    # B's session picker, before B opens it, says the session waits for an approval.
    (row,) = (await b.call("dsh/session/list", {}))["sessions"]
    assert (row["sessionId"], row["activity"], row["question"]) == (sid, "waiting", "approval")
    opened = await b.call("dsh/session/open", {"sessionId": sid})
    assert opened["activity"] == "waiting" and opened["question"] == "approval"
    ask_b = await b.request_for("dsh/permission/ask")  # sent to B when it attached
    assert ask_b["params"] == ask_a["params"]
    # after the answer that told B the agent's id
    answer_at = next(i for i, m in enumerate(b.arrived) if "method" not in m and m.get("result") is opened)
    assert answer_at < b.arrived.index(ask_b)
    b.answer(ask_b, {"outcome": "allow-once"})
    assert (await turn)["stopReason"] == "end-turn"
    assert (tmp_path / "src" / "app.py").read_text() == EDITED
    (row,) = (await a.call("dsh/session/list", {}))["sessions"]
    assert "activity" not in row and "question" not in row  # answered, the turn over: idle
    await a.until(lambda: a.of("dsh/question/resolved"))
    assert a.of("dsh/question/resolved")[0]["by"] == {"clientName": "Beta"}
    assert [n["params"]["id"] for n in a.notes if n["method"] == "$/cancelRequest"] == [ask_a["id"]]


async def test_nobody_able_fails_closed_at_once_and_an_able_client_is_asked(tmp_path, host):
    tools_workspace(tmp_path, [edit_call(), {"text": "ok"}, edit_call(), {"text": "ok"}])
    mute = await join(host, tmp_path, "Mute", questions=False, permissions=False)
    created = await mute.call("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]

    # Control: with an able client attached, the mute one is skipped and the able one asked.
    able = await join(host, tmp_path, "Able")
    await able.call("dsh/session/open", {"sessionId": sid})
    turn = mute.start_call("dsh/agent/prompt", {"agentId": agent, "text": "edit it"})
    ask = await able.request_for("dsh/permission/ask")
    assert not [r for r in mute.asked if r["method"] == "dsh/permission/ask"]
    able.answer(ask, {"outcome": "allow-once"})
    assert (await turn)["stopReason"] == "end-turn"
    assert (tmp_path / "src" / "app.py").read_text() == EDITED

    # The able client leaves: the next approval fails closed at once, nobody asked.
    await able.close()
    (tmp_path / "src" / "app.py").write_text(ORIGINAL)
    started = asyncio.get_running_loop().time()
    assert (await mute.call("dsh/agent/prompt", {"agentId": agent, "text": "edit again"}))["stopReason"] == "end-turn"
    assert asyncio.get_running_loop().time() - started < 5
    assert (tmp_path / "src" / "app.py").read_text() == ORIGINAL
    decisions = [e["data"] for e in of_type(read_log(tmp_path, sid), "permission/decision")]
    assert [(d["outcome"], d["by"]) for d in decisions] == [("allow-once", "person"), ("reject", "fail-closed")]
    refused = of_type(read_log(tmp_path, sid), "tool/result")[-1]["data"]
    assert refused["ok"] is False and "your editor cannot answer approvals" in refused["content"]


async def test_the_only_able_client_leaving_mid_question_fails_it_closed(tmp_path, host):
    tools_workspace(tmp_path, [edit_call(), {"text": "ok"}])
    mute = await join(host, tmp_path, "Mute", questions=False, permissions=False)
    able = await join(host, tmp_path, "Able")
    created = await mute.call("dsh/session/create", {})
    await able.call("dsh/session/open", {"sessionId": created["sessionId"]})
    turn = mute.start_call("dsh/agent/prompt", {"agentId": created["agentId"], "text": "edit it"})
    await able.request_for("dsh/permission/ask")
    await able.close()  # gone without answering
    assert (await turn)["stopReason"] == "end-turn"
    assert (tmp_path / "src" / "app.py").read_text() == ORIGINAL
    [decision] = [e["data"] for e in of_type(read_log(tmp_path, created["sessionId"]), "permission/decision")]
    assert (decision["outcome"], decision["by"]) == ("reject", "fail-closed")


# ---- D-6: the last client out disarms the goal ---------------------------------------------


async def test_the_last_client_leaving_disarms_the_goal(tmp_path, host):
    # The goal's round asks an approval and waits: the goal is armed while it is open.
    tools_workspace(tmp_path, [edit_call(), {"text": "round one done"}] + [{"text": "more"}] * 4)
    a, b, sid, agent = await open_both(host, tmp_path)
    await a.call("dsh/goal/create", {"agentId": agent, "objective": "edit the file", "maxRounds": 5})
    await a.request_for("dsh/permission/ask")
    goals = host.live_agent(agent).features.get(GoalService)
    assert goals.armed

    await a.close()  # control: B is still attached, the goal stays armed
    await b.until(lambda: b.clients_seen()[-1] == [("Beta", True)])
    assert goals.armed
    await b.close()  # the last one: disarmed; the open approval fails closed
    assert not goals.armed
    live = host.live_agent(agent)
    assert live is None or not live.closed  # the session stays held by the daemon
    await asyncio.sleep(0.5)
    events = read_log(tmp_path, sid)
    rounds = [e for e in of_type(events, "user/message") if e["data"].get("goalRound")]
    assert len(rounds) == 1  # no round started with nobody watching
    assert [(d["data"]["outcome"], d["data"]["by"]) for d in of_type(events, "permission/decision")] == [("reject", "fail-closed")]
    assert (tmp_path / "src" / "app.py").read_text() == ORIGINAL


async def test_a_headless_run_is_told_apart_by_its_capability_not_its_name(tmp_path, host):
    # Positive control: a client declaring capabilities.experimental.dsh.headless (named
    # anything) alone on a session: its approval is refused in the headless run's words.
    declared_root = tools_workspace(tmp_path / "declared", [edit_call(), {"text": "ok"}])
    run = await join(host, declared_root, "CI job", questions=False, permissions=False, headless=True)
    created = await run.call("dsh/session/create", {})
    assert (await run.call("dsh/agent/prompt", {"agentId": created["agentId"], "text": "edit it"}))["stopReason"] == "end-turn"
    refused = of_type(read_log(declared_root, created["sessionId"]), "tool/result")[-1]["data"]
    assert refused["ok"] is False and "a headless run (dshd run) approves nothing on its own" in refused["content"]
    # The name alone gives no headless rules: a client calling itself "dshd run" without
    # the capability is an editor that cannot answer.
    named_root = tools_workspace(tmp_path / "named", [edit_call(), {"text": "ok"}])
    named = await join(host, named_root, "dshd run", questions=False, permissions=False)
    created = await named.call("dsh/session/create", {})
    assert (await named.call("dsh/agent/prompt", {"agentId": created["agentId"], "text": "edit it"}))["stopReason"] == "end-turn"
    refused = of_type(read_log(named_root, created["sessionId"]), "tool/result")[-1]["data"]
    assert refused["ok"] is False and "your editor cannot answer approvals" in refused["content"]
    assert "headless" not in refused["content"]
    assert (named_root / "src" / "app.py").read_text() == (declared_root / "src" / "app.py").read_text() == ORIGINAL
