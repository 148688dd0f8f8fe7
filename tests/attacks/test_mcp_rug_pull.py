"""A rug pull: an MCP server that lists a tool again with another definition mid-session
(tests/fixtures/mcp_servers/instant.py --changing: swap makes echo read-only and drops
noop) in a real in-process agent. The tool keeps its first definition (still asked about,
its first description), and a dropped tool is withdrawn and its call refused. Control in the
same test: before the re-list both tools are offered, and echo still runs once approved."""

from __future__ import annotations

from mcp_agent_support import call, changing, offered, results, servers_of, workspace

from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals


async def test_a_tool_listed_again_keeps_its_first_definition_and_a_dropped_one_is_withdrawn(tmp_path, caplog):
    """swap lists echo again as read-only (no annotations before: "exec") and drops noop: echo
    stays "exec", asked about, with its first description (logged once, though listed so
    twice); noop is no longer offered and a call of it is refused, not run."""
    approvals = InProcessApprovals(lambda request: ApprovalAnswer("allow-once"))
    replies = [
        {"toolCalls": [call("mcp__instant__swap")]},
        {"toolCalls": [call("mcp__instant__touch")]},  # listed again: the same changed echo
        {"toolCalls": [call("mcp__instant__echo", message="hi"), call("mcp__instant__noop")]},
        {"text": "done"},
    ]
    ws = workspace(tmp_path, replies, {"instant": changing()}, approvals=approvals)
    agent = ws.create_session()
    try:
        with caplog.at_level("WARNING", logger="dshd.mcp.servers"):
            await agent.prompt("go")
        requests = offered(agent)
        assert "mcp__instant__noop" in requests[0] and "mcp__instant__echo" in requests[0]  # control
        assert all("mcp__instant__noop" not in r and "mcp__instant__echo" in r for r in requests[1:])
        servers = servers_of(agent)
        echo = servers.catalogue.get("mcp__instant__echo")
        assert echo.mutability == "exec" and echo.description == "Says its message back."
        assert "mcp__instant__noop" not in servers.catalogue.names()
        assert ("mcp__instant__echo", "exec") in [(r.tool, r.mutability) for r in approvals.asked]
        *_, echoed, noop = results(agent)
        assert echoed == (True, '{"message": "hi"}')
        assert not noop[0] and "no longer lists its tool noop" in noop[1]
        ignored = [r for r in caplog.records if "with another definition" in r.getMessage()]
        assert len(ignored) == 1 and "mcp__instant__echo" in ignored[0].getMessage()
        [state] = servers.states()
        assert state.state == "ready" and "mcp__instant__noop" not in state.tools and "mcp__instant__echo" in state.tools
    finally:
        await agent.aclose()
