"""What a person reads over ACP is escaped: `dshd acp` with a scripted model that asks to
write ``rtl\\u202etxt.exe`` and to run a command with a newline in it. The permission
request's title and every tool_call title show the escapes; a plain name passes
unchanged; the tool gets the raw text (the file written has the raw name). Both SDK
clients."""

from __future__ import annotations

import json

from tests.acp_door.support import selected, tool_call
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

RTL_NAME = "rtl\u202etxt.exe"
COMMAND = "echo one\necho two"
HIDDEN = "\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\n\r\x1b\x85"


def raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if c in HIDDEN})


async def test_permission_requests_and_titles_show_escapes_and_plain_names_pass(clients):
    root = write_workspace(
        clients.workspace,
        [
            {"toolCalls": [tool_call("write_file", path=RTL_NAME, content="x\n")]},
            {"toolCalls": [tool_call("run_command", command=COMMAND)]},
            {"toolCalls": [tool_call("write_file", path="plain.txt", content="plain\n")]},
            {"text": "done"},
        ],
        plugins=["plan", "goals", "tools"],
    )
    client = await clients.start()
    answers = [selected("allow-once"), selected("reject"), selected("allow-once")]
    client.answer_permission = lambda params: answers.pop(0)
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "go"))["stopReason"] == "end_turn"

    asked = [a["toolCall"] for a in client.permission_requests]
    assert asked[0]["title"] == "Create rtl\\u202etxt.exe"
    assert "echo one" in asked[1]["title"] and "\n" not in asked[1]["title"]
    # The whole command, escaped, goes with the request (a title may show one line of it).
    assert [c["content"]["text"] for c in asked[1]["content"]] == ["echo one\\necho two"]
    assert asked[2]["title"] == "Create plain.txt"  # positive control: a plain name reads as it is
    for request in asked:
        assert raw_controls(json.dumps(request, ensure_ascii=False)) == [], request

    calls = client.tool_calls(sid)
    titles = [c["title"] for c in calls]
    assert titles[0] == "Write rtl\\u202etxt.exe" and titles[2] == "Write plain.txt"
    assert all(raw_controls(t) == [] for t in titles), titles
    # The tool got the raw text: the name on disk, the command as the model wrote it.
    assert (root / RTL_NAME).read_text() == "x\n" and (root / "plain.txt").read_text() == "plain\n"
    logged = [e["data"]["arguments"] for e in of_type(read_log(root, sid), "tool/call")]
    assert logged[0]["path"] == RTL_NAME and logged[1]["command"] == COMMAND
    assert calls[0]["rawInput"]["path"] == RTL_NAME  # raw input is data for programs, not for reading


async def test_an_edit_diff_shows_its_path_escaped_and_a_plain_path_as_it_is(clients):
    root = write_workspace(
        clients.workspace,
        [
            {"toolCalls": [tool_call("write_file", path=RTL_NAME, content="x\n")]},
            {"toolCalls": [tool_call("write_file", path="plain.txt", content="plain\n")]},
            {"text": "done"},
        ],
        plugins=["plan", "goals", "tools"],
    )
    client = await clients.start()
    client.answer_permission = lambda params: selected("allow-once")
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "go"))["stopReason"] == "end_turn"

    diffs = [c for call in client.tool_calls(sid) for c in call.get("content") or [] if c["type"] == "diff"]
    assert {d["path"] for d in diffs} == {str(root / "rtl\\u202etxt.exe"), str(root / "plain.txt")}, diffs
    assert all(raw_controls(d["path"]) == [] for d in diffs)
    assert (root / RTL_NAME).read_text() == "x\n"  # the tool wrote the raw name
