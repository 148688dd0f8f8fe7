"""Tools describe themselves (agent/tools.py, ``Tool.describe``): a tool added in one
place is titled, kinded and located alike by the chat projection (through the hub) and
by the ACP door (its tool_call updates and its permission requests), with no table to
edit anywhere else. A real Workspace and agent with the scripted model; the ACP peer is
only a list the updates are written to."""

from __future__ import annotations

from pathlib import Path

import msgspec
from acp.schema import ToolCallLocation, ToolCallStart

from dshd.acp.live import LiveSession
from dshd.acp.updates import UpdateTranslator
from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from dshd.agent.tools import Tool, ToolDescription, ToolLocation, ToolOutcome, default_description
from dshd.api.chat import ChatProjection
from dshd.daemon.to_wire import chat_item as to_json
from dshd.api.hub import Hub
from dshd.plugins import known_tools
from tests.agent_support import make_workspace

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "dshd"
URL = "https://example.test/rtl\u202etxt"  # a bidi control: what a person reads is escaped
FETCH = {"name": "fetch_page", "arguments": {"url": URL, "saveTo": "notes/page.md"}}


def describe_fetch(arguments):
    return ToolDescription(f"Fetch {arguments.get('url', 'a page')}", "fetch", (ToolLocation(arguments["saveTo"], 3),))


async def fetch_page(ctx, arguments):
    return ToolOutcome.success("fetched")


class Door:
    """The hub's door: takes what the hub sends and keeps nothing (the chat is read with hub.chat)."""

    def __getattr__(self, name):
        return lambda *args: None


class Peer:
    def __init__(self) -> None:
        self.updates: list = []

    def update(self, session_id, update) -> None:
        self.updates.append(update)


def tool_calls(updates) -> list[ToolCallStart]:
    return [u for u in updates if isinstance(u, ToolCallStart)]


async def test_a_new_tool_is_described_alike_by_the_chat_and_the_acp_door(tmp_path):
    approvals = InProcessApprovals(lambda request: ApprovalAnswer("allow-once"))
    ws = make_workspace(tmp_path, [{"toolCalls": [FETCH]}, {"text": "done"}], approvals=approvals, config={"tools": {"approve": ["exec"]}})
    agent = ws.create_session()
    # The one place the tool is written: here. No door, table or fixture names it.
    agent.tools.add(Tool("fetch_page", "Fetch a web page.", {"type": "object"}, fetch_page, mutability="exec", describe=describe_fetch))
    assert not [p for p in PACKAGE.rglob("*.py") if "fetch_page" in p.read_text()]
    hub = Hub(Door())
    hub.attach(agent)
    await agent.prompt("get it")

    title = "Fetch https://example.test/rtl\\u202etxt"
    [item] = [to_json(i) for i in hub.chat(agent)[0] if to_json(i)["kind"] == "tool-call"]
    assert (item["name"], item["title"], item["status"]) == ("fetch_page", title, "ok")

    peer = Peer()
    session = LiveSession(agent, peer, tmp_path)  # type: ignore[arg-type]
    session.replay()  # session/load: the history as updates
    events = [msgspec.to_builtins(e) for e in agent.store.events()]
    live = sum((session.translator.event(e) for e in events), [])  # as the live session sends them
    for call in tool_calls(peer.updates) + tool_calls(live):
        assert (call.title, call.kind) == (title, "fetch")
        assert call.locations == [ToolCallLocation(path=str(tmp_path / "notes/page.md"), line=3)]
        assert call.raw_input == FETCH["arguments"]  # data for programs stays raw
    assert len(tool_calls(peer.updates)) == len(tool_calls(live)) == 1
    [asked] = approvals.asked  # the permission request carries the tool's kind too
    assert (asked.tool, asked.kind) == ("fetch_page", "fetch")

    # Positive control: without the agent's catalogue the same log reads with the
    # default description, so the words above did come from the tool.
    [plain] = tool_calls(sum((UpdateTranslator(tmp_path, live=False).event(e) for e in events), []))
    assert plain.kind == "other" and plain.title.startswith("fetch_page url=https://example.test/rtl\\u202etxt")
    [plain_item] = [to_json(i) for i in ChatProjection.replayed(events).items() if to_json(i)["kind"] == "tool-call"]
    assert plain_item["title"] == plain.title
    await ws.shutdown()


async def test_a_describe_that_fails_or_says_nonsense_gets_the_default(tmp_path):
    def broken(arguments):
        raise KeyError("saveTo")

    ws = make_workspace(tmp_path, [{"toolCalls": [FETCH]}, {"text": "done"}])
    agent = ws.create_session()
    agent.tools.add(Tool("fetch_page", "Fetch.", {"type": "object"}, fetch_page, describe=broken))
    agent.tools.add(Tool("odd", "Odd.", {"type": "object"}, fetch_page, describe=lambda a: ToolDescription("", "teleport")))  # type: ignore[arg-type]
    assert (await agent.prompt("get it")).stop_reason == "end-turn"  # a title never costs the call
    described = agent.tools.describe("fetch_page", FETCH["arguments"])
    assert described == default_description("fetch_page", {"url": URL.replace("\u202e", "\\u202e"), "saveTo": "notes/page.md"})
    assert agent.tools.describe("odd", {}) == ToolDescription("odd", "other")
    # Positive control: a describe that works is used as it is.
    agent.tools.add(Tool("good", "Good.", {"type": "object"}, fetch_page, describe=describe_fetch))
    assert agent.tools.describe("good", FETCH["arguments"]).kind == "fetch"
    await ws.shutdown()


def test_an_unknown_tool_reads_as_its_name_and_a_short_argument_summary():
    catalogue = known_tools()
    assert catalogue.describe("mcp_lookup", {}) == ToolDescription("mcp_lookup")
    long = catalogue.describe("mcp_lookup", {"query": "x" * 200, "limit": 5, "nested": {"a": 1}, "path": "src/a.py"})
    assert long.title.startswith("mcp_lookup query=xxx") and len(long.title) <= len("mcp_lookup ") + 60
    assert long.kind == "other" and long.locations == (ToolLocation("src/a.py"),)
    assert "\n" not in catalogue.describe("mcp_lookup", {"q": "a\nb"}).title


def test_the_built_in_tools_read_the_same_in_the_chat_and_over_acp():
    calls = [
        ("read_file", {"path": "README.md", "offset": 10}, "Read README.md", "read"),
        ("list_files", {"path": "src", "pattern": "*.py"}, "List files in src matching *.py", "search"),
        ("search", {"pattern": "TODO", "path": "src"}, "Search for TODO in src", "search"),
        ("write_file", {"path": "new.txt", "content": "hi"}, "Write new.txt", "edit"),
        ("edit_file", {"path": "a.py", "oldText": "a", "newText": "b"}, "Edit a.py", "edit"),
        ("run_command", {"command": "make test", "cwd": "sub"}, "Run `make test`", "execute"),
        ("exit_plan_mode", {"plan": "# Plan: x\n1. y"}, "Plan: x", "switch_mode"),
        ("goal_complete", {}, "Report the goal complete", "other"),
        ("goal_block", {"code": "stuck", "message": "m"}, "Report the goal blocked (stuck)", "other"),
    ]
    root = Path("/work/project")
    for number, (name, arguments, title, kind) in enumerate(calls, 1):
        event = {"seq": number, "type": "tool/call", "turn": 1, "data": {"callId": f"c{number}", "name": name, "arguments": arguments}}
        [call] = UpdateTranslator(root, live=False).event(event)
        assert (call.title, call.kind) == (title, kind), name
        if name != "exit_plan_mode":  # the chat shows a plan as a review, not as a tool call
            [item] = ChatProjection.replayed([event]).items()
            assert to_json(item)["title"] == title, name
    run = known_tools().describe("run_command", {"command": "ls", "cwd": "sub"})
    assert run.locations == (ToolLocation("sub"),)
