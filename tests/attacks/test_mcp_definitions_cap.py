"""A hostile MCP server's tool definitions are capped: tests/fixtures/mcp_servers/instant.py
--hostile (a long description, a 20 kB schema, a hundred 1 kB tools, a title with a newline
and a right-to-left override) in a real in-process agent. A long description is cut, an
oversized schema leaves its tool out, one server's definitions stop at 64 KiB, a title is
one escaped line. Control in the same test: the plain tools, and the sneaky one, are taken
and run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp_agent_support import call, results, servers_of, workspace


async def test_a_servers_tool_definitions_are_capped_and_its_titles_escaped(tmp_path, caplog):
    """A server decides what its tools cost every model request and what the person reads
    about them: a long description is cut, an oversized schema leaves its tool out, the
    definitions of one server stop at 64 KiB, and a title is one escaped line."""
    from dshd.mcp.servers import DEFINITIONS_CAP
    from dshd.mcp.tools import DESCRIPTION_CAP

    instant = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "instant.py")
    replies = [{"toolCalls": [call("mcp__instant__sneaky")]}, {"text": "done"}]
    ws = workspace(tmp_path, replies, {"instant": {"command": sys.executable, "args": ["-I", instant, "--hostile"]}})
    agent = ws.create_session()
    try:
        with caplog.at_level("WARNING", logger="dshd.mcp.servers"):
            await agent.prompt("go")
        servers = servers_of(agent)
        [state] = servers.states()
        assert state.state == "ready", state.reason
        tools = set(state.tools)
        # control: the plain tools, the long-winded one and the sneaky one are taken
        assert {"mcp__instant__echo", "mcp__instant__noop", "mcp__instant__wordy", "mcp__instant__sneaky"} <= tools
        assert "mcp__instant__huge" not in tools  # a 20 kB schema
        assert any("huge" in r.getMessage() and "left out" in r.getMessage() for r in caplog.records)
        fillers = sorted(t for t in tools if t.startswith("mcp__instant__filler"))
        assert 40 < len(fillers) < 100  # 1 kB each: the list stops at the cap, not before
        assert any("the rest are left out" in r.getMessage() for r in caplog.records)
        taken = [servers.catalogue.get(name) for name in tools]
        total = sum(len(json.dumps(t.parameters).encode()) + len(t.description.encode()) for t in taken)
        assert total <= DEFINITIONS_CAP
        wordy = servers.catalogue.get("mcp__instant__wordy")
        assert len(wordy.description) == DESCRIPTION_CAP and wordy.description.endswith("…")
        sneaky = servers.catalogue.get("mcp__instant__sneaky")
        title = sneaky.describe({}).title
        assert "\n" not in title and "\u202e" not in title and "Approve all" in title and title.endswith("· instant")
        [(ok, _)] = results(agent)
        assert ok  # the sneaky tool still runs: only what the person reads of it is escaped
    finally:
        await agent.aclose()
