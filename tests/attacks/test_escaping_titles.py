"""What a person approves is what runs (H-8): the real `dshd serve` over stdio, a scripted
model that asks to write ``rtl\\u202etxt.exe`` (it reads "rtlexe.txt" when shown raw) and to
run a command with a newline in it (its second line hidden below the first). The approval
request, the chat items and the session list show the escapes; the tools get the raw text.
Positive control in the same test: a plain name and a plain title read as they are."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.e2e.test_escaping import COMMAND, RTL_NAME, raw_controls


@pytest.fixture
def daemons(daemons):
    daemons.trusted = True
    return daemons


async def test_approvals_chat_and_list_show_escapes_and_plain_names_pass(workspace, daemons):
    write_workspace(
        workspace,
        [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": RTL_NAME, "content": "x\u202ey\n"}}]},
            {"toolCalls": [{"name": "run_command", "arguments": {"command": COMMAND}}]},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "plain.txt", "content": "plain\n"}}]},
            {"text": "done"},
        ],
        plugins=["plan", "goals", "tools"],
        extra_config='\n[tools]\napprove = ["write", "exec"]\n',
    )
    asked: list[dict] = []

    def person(params: dict) -> dict:
        asked.append(params)
        return {"outcome": "reject"} if params["tool"] == "run_command" else {"outcome": "allow-once"}

    client = await daemons.start(approve=person)
    created = await client.request("dsh/session/create", {"title": "fix \u202eevil\ntitle"})
    plain = await client.request("dsh/session/create", {"title": "a plain title"})
    agent, sid = created["agentId"], created["sessionId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "go"}))["stopReason"] == "end-turn"

    write, run, plain_write = asked
    assert write["title"] == "Create rtl\\u202etxt.exe", write
    assert "rtl\\u202etxt.exe" in write["diff"] and "x\\u202ey" in write["diff"]
    assert "\n" in write["diff"]  # a diff keeps its lines
    assert run["command"] == "echo one\\necho two", run
    assert "echo one" in run["title"] and "\n" not in run["title"]
    # Positive control: a plain name reads as it is.
    assert plain_write["title"] == "Create plain.txt" and "+plain" in plain_write["diff"]
    for params in asked:
        shown = {k: v for k, v in params.items() if k != "diff"}
        assert raw_controls(json.dumps(shown, ensure_ascii=False)) == [], params
        assert raw_controls(params.get("diff", "").replace("\n", "")) == [], params

    # What runs is what was asked: the raw name on disk, the command refused as asked.
    assert (workspace / RTL_NAME).read_text() == "x\u202ey\n" and (workspace / "plain.txt").exists()
    calls = [e["data"] for e in of_type(read_log(workspace, sid), "tool/call")]
    assert calls[0]["arguments"]["path"] == RTL_NAME and calls[1]["arguments"]["command"] == COMMAND

    chat = (await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200}))["items"]
    titles = [i["title"] for i in chat if i["kind"] == "tool-call"]
    assert titles[0] == "Write rtl\\u202etxt.exe" and titles[2] == "Write plain.txt"
    assert "\\n" in titles[1] and "\n" not in titles[1]
    session_item = next(i for i in chat if i["kind"] == "session")
    assert raw_controls(json.dumps(session_item, ensure_ascii=False)) == []

    listed = {s["sessionId"]: s["title"] for s in (await client.request("dsh/session/list", {}))["sessions"]}
    assert listed[sid] == "fix \\u202eevil\\ntitle"
    assert listed[plain["sessionId"]] == "a plain title"
