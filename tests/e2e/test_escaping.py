"""What a person reads is escaped: the real `dshd serve` over stdio, a scripted model that
asks to write ``rtl\\u202etxt.exe`` (it reads "rtlexe.txt" when shown raw) and to run a
command with a newline in it (its second line hidden below the first). The approval
request shows the escapes, the chat items and the session list too; a plain name passes
unchanged; the tools themselves get the raw text (the file written has the raw name).
The approvals, chat items and session list are tests/attacks/test_escaping_titles.py.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

RTL_NAME = "rtl\u202etxt.exe"
COMMAND = "echo one\necho two"
HIDDEN = "\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\n\r\x1b\x85"


def raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if c in HIDDEN})


@pytest.fixture
def daemons(daemons):
    daemons.trusted = True
    return daemons


async def test_a_listing_shows_a_name_with_a_newline_as_one_escaped_name(workspace, daemons):
    newline_name = "a\nb.txt"
    write_workspace(
        workspace,
        [
            {"toolCalls": [{"name": "list_files", "arguments": {"path": "files"}}]},
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "files/" + newline_name}}]},
            {"text": "done"},
        ],
        plugins=["plan", "goals", "tools"],
    )
    files = workspace / "files"
    files.mkdir()
    for name in (newline_name, RTL_NAME, "plain.txt", "a", "b.txt"):
        (files / name).write_text(f"this is {name!r}\n")
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "list"}))["stopReason"] == "end-turn"

    listing, read = (e["data"] for e in of_type(read_log(workspace, sid), "tool/result"))
    assert listing["ok"] is True, listing
    names = listing["content"].splitlines()[1:]
    # One line per file: the name with a newline is one escaped name, not "a" and "b.txt"
    # twice over; the plain names (the control) read as they are.
    assert sorted(names) == sorted(["files/a", "files/a\\nb.txt", "files/b.txt", "files/plain.txt", "files/rtl\\u202etxt.exe"])
    assert listing["content"].splitlines()[0].startswith("5 files")
    # The name as the model writes it back in JSON reaches the raw file.
    assert read["ok"] is True and "this is 'a\\nb.txt'" in read["content"]

    chat = (await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200}))["items"]
    shown_listing = next(i for i in chat if i["kind"] == "tool-call" and i["name"] == "list_files")["result"]
    assert "files/a\\nb.txt" in shown_listing.splitlines() and raw_controls(shown_listing.replace("\n", "")) == []


async def test_a_plan_review_shows_the_plan_escaped_with_its_lines(workspace, daemons):
    plan = "# Plan: rename \u202eevil.py\n\n1. Move\u2066 it\n2. Fix the imports\n"
    write_workspace(workspace, [{"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": plan}}]}, {"text": "ok"}])
    asked: list[dict] = []

    def person(params: dict) -> dict:
        asked.extend(params["questions"])
        return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}

    client = await daemons.start(answer=person)
    created = await client.request("dsh/session/create", {})
    agent = created["agentId"]
    await client.request("dsh/plan/set", {"agentId": agent, "active": True})
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "plan it"}))["stopReason"] == "end-turn"
    [question] = asked
    assert question["title"] == "Plan: rename \\u202eevil.py"
    assert question["plan"].splitlines() == ["# Plan: rename \\u202eevil.py", "", "1. Move\\u2066 it", "2. Fix the imports"]
    assert raw_controls(question["plan"].replace("\n", "")) == []
    # The control: the plain line of the plan reads as written; the plan approved is the raw one.
    calls = of_type(read_log(workspace, created["sessionId"]), "tool/call")
    assert calls[0]["data"]["arguments"]["plan"] == plan


async def test_search_shows_a_path_with_a_newline_as_one_escaped_path(workspace, daemons):
    newline_name = "a\nb.txt"
    write_workspace(
        workspace,
        [
            {"toolCalls": [{"name": "search", "arguments": {"pattern": "needle", "path": "files"}}]},
            {"text": "done"},
        ],
        plugins=["plan", "goals", "tools"],
    )
    files = workspace / "files"
    files.mkdir()
    for name in (newline_name, RTL_NAME, "plain.txt"):
        (files / name).write_text("hay\nneedle here\n")
    # A decoy outside the searched folder: split at its newline, the name's tail "b.txt"
    # would be taken for this file and its match reported.
    (workspace / "b.txt").write_text("hay\nneedle here\n")
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    assert (await client.request("dsh/agent/prompt", {"agentId": agent, "text": "find"}))["stopReason"] == "end-turn"

    [found] = (e["data"] for e in of_type(read_log(workspace, sid), "tool/result"))
    assert found["ok"] is True, found
    header, *matches = found["content"].splitlines()
    # One line per match, each path escaped (the newline would make "a" and "b.txt:2:..."
    # two lines); the plain path (the control) reads as it is.
    assert header.startswith("3 matches"), header
    assert sorted(matches) == sorted(
        ["files/a\\nb.txt:2:needle here", "files/plain.txt:2:needle here", "files/rtl\\u202etxt.exe:2:needle here"]
    )
    chat = (await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200}))["items"]
    shown_result = next(i for i in chat if i["kind"] == "tool-call" and i["name"] == "search")["result"]
    assert "files/a\\nb.txt:2:needle here" in shown_result.splitlines()
    assert raw_controls(shown_result.replace("\n", "")) == []
