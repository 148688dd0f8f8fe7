"""What a person sees through a real ACP client (both official SDKs): a running tool is
``in_progress`` between ``pending`` and its end; a ``write_file`` over a file sends the
old text in its diff; a prompt's blocks never run together; ``session/list`` has titles;
a plan under review is titled by its heading with the plan as its first content; dshd's
own notes come back after ``session/load`` as agent messages, never as the person's."""

from __future__ import annotations

import asyncio

from tests.acp_door.support import finished, selected, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

TOOLS = ["plan", "goals", "tools"]


def statuses(client, call_id: str) -> list[str]:
    """The statuses the client was told for one call, in order, repeats dropped."""
    seen: list[str] = []
    for update in client.call_updates(call_id):
        status = update.get("status")
        if status and (not seen or seen[-1] != status):
            seen.append(status)
    return seen


async def test_a_running_tool_goes_pending_in_progress_then_completed_or_failed(clients):
    root = write_workspace(
        clients.workspace,
        [
            {"toolCalls": [
                tool_call("run_command", command="sleep 1; echo slept"),
                tool_call("read_file", path="missing.txt"),
                tool_call("write_file", path="refused.txt", content="no"),
            ]},
            {"text": "done"},
        ],
        plugins=TOOLS,
    )
    client = await clients.start()
    # The command may run; the write is refused (both need the person's yes by default).
    client.answer_permission = lambda params: selected("allow-once" if params["toolCall"]["kind"] == "execute" else "reject")
    sid = (await client.new_session())["sessionId"]
    running_seen: list[bool] = []

    async def watch() -> None:
        # While the command sleeps the client already shows it running.
        update = await client.wait_update(lambda p: p["update"].get("status") == "in_progress")
        call_id = update["update"]["toolCallId"]
        running_seen.append(not any(u.get("status") in ("completed", "failed") for u in client.call_updates(call_id)))

    watcher = asyncio.ensure_future(watch())
    assert (await client.prompt(sid, "run it"))["stopReason"] == "end_turn"
    await asyncio.wait_for(watcher, 5)
    assert running_seen == [True]

    command, read, write = client.tool_calls(sid)
    assert statuses(client, command["toolCallId"]) == ["pending", "in_progress", "completed"]
    assert statuses(client, read["toolCallId"]) == ["pending", "in_progress", "failed"]
    # A call the person rejected never ran: it goes from pending to failed.
    assert statuses(client, write["toolCallId"]) == ["pending", "failed"]
    assert not (root / "refused.txt").exists()


async def test_write_file_over_a_file_sends_its_old_text(clients):
    root = write_workspace(
        clients.workspace,
        [
            {"toolCalls": [tool_call("write_file", path="notes.txt", content="new text\n")]},
            {"toolCalls": [tool_call("write_file", path="fresh.txt", content="made\n")]},
            {"text": "done"},
        ],
        plugins=TOOLS,
    )
    (root / "notes.txt").write_text("old text\n")
    client = await clients.start()
    client.answer_permission = lambda params: selected("allow-once")
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "rewrite the notes"))["stopReason"] == "end_turn"

    over, fresh = client.tool_calls(sid)
    assert over["content"] == [
        {"type": "diff", "path": str(root / "notes.txt"), "oldText": "old text\n", "newText": "new text\n"}
    ]
    # The finished call shows the same diff (the file on disk is new by then).
    done_over, done_fresh = finished(client, sid)
    assert done_over["content"][0]["oldText"] == "old text\n"
    assert (root / "notes.txt").read_text() == "new text\n"
    # A new file has no old side.
    assert fresh["content"][0].get("oldText") is None and fresh["content"][0]["newText"] == "made\n"


async def test_prompt_blocks_are_joined_with_a_separator(clients):
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    uri = (clients.workspace / "http" / "client.py").as_uri()
    await client.prompt(sid, [
        {"type": "text", "text": "Look at "},
        {"type": "resource_link", "uri": uri, "name": "http/client.py"},
        {"type": "text", "text": "file and fix it."},
        {"type": "text", "text": "Then run the tests."},
    ])
    [message] = of_type(read_log(clients.workspace, sid), "user/message")
    assert message["data"]["text"] == (
        f"Look at [http/client.py]({uri})\nfile and fix it.\nThen run the tests."
    )


async def test_session_list_entries_carry_titles(clients):
    write_workspace(clients.workspace, [{"text": "ok"}, {"text": "ok"}])
    client = await clients.start()
    planned = (await client.new_session())["sessionId"]
    await client.prompt(planned, "/plan fix the parser")
    await wait_log(clients.workspace, planned, lambda events: of_type(events, "turn/close"))
    plain = (await client.new_session())["sessionId"]
    await client.prompt(plain, "tidy the README")
    listed = {s["sessionId"]: s for s in (await client.list_sessions())["sessions"]}
    assert listed[planned]["title"] == "fix the parser"
    assert listed[plain]["title"] == "tidy the README"
    assert all(s["updatedAt"] for s in listed.values())


async def test_a_plan_review_is_titled_by_its_heading_with_the_plan_first(clients):
    plan = "# Retry the HTTP client\n\n1. Add a policy.\n2. Test it.\n"
    write_workspace(clients.workspace, [{"toolCalls": [tool_call("exit_plan_mode", plan=plan)]}, {"text": "ok"}])
    client = await clients.start()
    client.answer_permission = lambda params: selected("keep-planning")
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")
    await client.prompt(sid, "plan retries")
    [asked] = client.permission_requests
    assert asked["toolCall"]["title"] == "Plan: Retry the HTTP client"
    assert asked["toolCall"]["content"][0] == {"type": "content", "content": {"type": "text", "text": plan}}
    # The tool call the client shows in the transcript has the same title.
    [call] = client.tool_calls(sid)
    assert call["title"] == "Plan: Retry the HTTP client"


async def test_notes_are_not_replayed_as_the_persons_messages(clients):
    write_workspace(clients.workspace, [{"text": "first answer"}, {"text": "round answer"}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    await client.prompt(sid, "my own words")
    await client.goal({"sessionId": sid, "action": "set", "objective": "Keep tidying", "maxRounds": 1})
    await wait_log(clients.workspace, sid, lambda events: len(of_type(events, "turn/close")) == 2
                   and len(of_type(events, "goal/change")) == 2)
    await clients.close_all()

    again = await clients.start()
    await again.load_session(sid)
    users = again.of_kind("user_message_chunk", sid)
    assert [u["content"]["text"] for u in users] == ["my own words"]
    assert users[0]["messageId"]
    agents = again.of_kind("agent_message_chunk", sid)
    [note] = [a for a in agents if (a.get("_meta") or {}).get("dsh")]
    assert note["_meta"]["dsh"]["goalRound"]["round"] == 1
    assert "Goal round 1" in note["content"]["text"] and "Keep tidying" in note["content"]["text"]
    # Each message is its own: the note's id is neither the person's nor a reply's.
    replies = {a["messageId"] for a in agents if a is not note}
    assert note["messageId"] not in replies | {users[0]["messageId"]}
    assert len(replies) == 2


async def test_an_untrusted_folders_model_left_out_is_said_at_each_prompt(clients):
    (clients.workspace / ".dsh" / "config.toml").write_text(
        'plugins = ["plan", "goals"]\n\n[model]\nprovider = "openai"\nmodel = "theirs"\n'
        'baseUrl = "http://127.0.0.1:9/v1"\n'
    )
    client = await clients.start()
    assert client.init_result["_meta"]["dsh"]["trusted"] is False
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "hello"))["stopReason"] == "end_turn"
    replies = [e["data"]["text"] for e in of_type(read_log(clients.workspace, sid), "assistant/message")]
    (reply,) = replies
    assert "not trusted" in reply and "[model] provider" in reply and "[model] baseUrl" in reply
    # ACP cannot carry the editor's trust: the way out is the user config.
    assert "add the folder to [trust] folders in" in reply and "trust the folder in your editor" not in reply
    assert "script exhausted" not in reply
    assert reply in client.agent_text(sid)


async def test_a_folder_with_its_own_script_keeps_it(clients):
    # Positive control: nothing of the model was left out, so the script answers as always.
    write_workspace(clients.workspace, [{"text": "scripted hello"}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    await client.prompt(sid, "hello")
    assert "scripted hello" in client.agent_text(sid)


async def test_pausing_a_goal_over_acp_cancels_its_round(clients):
    # A slow round: the model takes 20 s to answer; the pause must not wait for it.
    write_workspace(clients.workspace, [{"text": "slow round", "delayMs": 20000}, {"text": "next round"}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    goal = (await client.goal({"sessionId": sid, "action": "set", "objective": "Tidy up"}))["goal"]
    await wait_log(clients.workspace, sid, lambda events: of_type(events, "request/header"))

    started = asyncio.get_running_loop().time()
    paused = (await client.goal({"sessionId": sid, "action": "pause", "ref": {"id": goal["id"], "revision": 1}}))["goal"]
    assert asyncio.get_running_loop().time() - started < 5
    assert paused["phase"] == "paused"
    events = read_log(clients.workspace, sid)
    # Answered only once the round was over: closed "cancelled" before the pause was written.
    (close,) = of_type(events, "turn/close")
    assert close["data"]["stopReason"] == "cancelled"
    (pause,) = [e for e in of_type(events, "goal/change") if e["data"]["op"] == "pause"]
    assert close["seq"] < pause["seq"]
    await asyncio.sleep(1.0)
    # No request while paused: one model request in all, and the slow reply never arrived.
    events = read_log(clients.workspace, sid)
    assert len(of_type(events, "request/header")) == 1
    assert "slow round" not in client.agent_text(sid)
    # Positive control: resuming starts the next round, which does reach the model.
    await client.goal({"sessionId": sid, "action": "resume", "ref": {"id": goal["id"], "revision": paused["revision"]}})
    await wait_log(clients.workspace, sid, lambda events: len(of_type(events, "request/header")) >= 2)
