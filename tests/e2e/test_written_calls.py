"""A reply that writes a tool call as text instead of making it (what small local models
do): the real daemon's chat shows the reply and a ``notice`` after it naming the tool, the
same after a reload, and `dshd run` prints it on stderr. A reply that shows JSON naming no
offered tool gets none (the control)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dshd_protocol import parse_params
from tests.e2e.conftest import write_workspace
from tests.e2e import test_headless as run_support
from tests.e2e.test_headless import check_lines, headless  # noqa: F401 (the fixture)

WRITTEN = '```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```'
TOOLS = ["plan", "goals", "tools"]  # read_file is offered
JUST_JSON = 'The config looks like `{"name": "retries", "arguments": {"max": 3}}`.'


@pytest.mark.slow
async def test_the_chat_says_the_reply_looks_like_a_written_tool_call(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": WRITTEN}, {"text": JUST_JSON}], plugins=TOOLS)
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent = created["agentId"]
    await client.request("dsh/chat/get", {"agentId": agent})  # subscribed: the upserts come
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "what is in src/app.py?"}))["stopReason"] == "end-turn"
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "show a config"}))["stopReason"] == "end-turn"

    items = (await client.request("dsh/chat/get", {"agentId": agent}))["items"]
    kinds = [i["kind"] for i in items]
    assert kinds == ["session", "user-message", "assistant-message", "notice", "turn-end",
                     "user-message", "assistant-message", "turn-end"]  # fmt: skip
    reply, notice = items[2], items[3]
    assert reply["text"] == WRITTEN  # the reply is shown as the model wrote it
    assert (notice["about"], notice["code"], notice["tool"]) == (reply["id"], "written-tool-call", "read_file")
    assert "read_file" in notice["text"] and "nothing ran" in notice["text"]
    upserts = [n["params"]["item"] for n in client.notifications if n["method"] == "dsh/chat/item"]
    assert notice in upserts
    for n in client.notifications:
        if n["method"] == "dsh/chat/item":
            parse_params("dsh/chat/item", n["params"])  # a valid wire value
    reopened = await client.request("dsh/session/open", {"sessionId": created["sessionId"], "reload": True})
    assert (await client.request("dsh/chat/get", {"agentId": reopened["agentId"]}))["items"] == items


@pytest.mark.slow
def test_dshd_run_prints_the_notice(tmp_path, headless):  # noqa: F811
    root = run_support.workspace(tmp_path, [{"text": WRITTEN}], plugins=TOOLS)
    done = headless.run(root, "what is in src/app.py?")
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == WRITTEN
    assert "dshd run: This reply looks like a call of the read_file tool written as text" in done.stderr
    # --json: the notice is an item line; the control reply (JSON naming no tool) has none.
    root2 = run_support.workspace(tmp_path / "two", [{"text": JUST_JSON}], plugins=TOOLS)
    done = headless.run(root2, "show a config", "--json")
    lines = check_lines(done.stdout, 0)
    assert [line["item"]["kind"] for line in lines if line["type"] == "item"].count("notice") == 0
    assert "looks like a call" not in done.stderr
    root3 = run_support.workspace(tmp_path / "three", [{"text": WRITTEN}], plugins=TOOLS)
    done = headless.run(root3, "again", "--json")
    notices = [line["item"] for line in check_lines(done.stdout, 0) if line["type"] == "item" and line["item"]["kind"] == "notice"]
    assert [n["tool"] for n in notices] == ["read_file"]
