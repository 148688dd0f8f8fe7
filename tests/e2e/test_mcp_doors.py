"""The dsh door and a failed MCP server (SPEC X-5): the real `dshd serve`, a configured
stdio server that exits at once. The editor gets one ``window/showMessage`` naming it and
why, the chat one ``notice`` (``mcp-server-failed``), and the session goes on."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.sandbox_support import needs_sandbox

BROKEN = f"""
[mcp.servers.broken]
command = {json.dumps(sys.executable)}
args = ["-c", "import sys; print('\\\\u001b[31mno config here', file=sys.stderr); sys.exit(3)"]
"""


@needs_sandbox
async def test_a_server_that_fails_is_told_once_in_a_message_and_in_the_chat(workspace: Path, daemons) -> None:
    write_workspace(workspace, [{"text": "still here"}], plugins=["plan", "goals", "mcp"], extra_config=BROKEN)
    daemons.trusted = True  # a workspace's servers start only in a trusted folder
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, sid = created["agentId"], created["sessionId"]
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "hi"})
    assert result["stopReason"] == "end-turn"  # the first request waited for the server; it went on

    await client.request("dsh/session/list", {})  # a round trip: the messages sent before it are in
    await asyncio.sleep(0.1)
    told = [m.message for m in client.lsp.messages if "broken" in m.message]
    assert len(told) == 1 and told[0].startswith('MCP server "broken" failed: '), told
    assert "\x1b" not in told[0]  # the server's own words are escaped
    assert [m.type for m in client.lsp.messages if "broken" in m.message] == [2]  # a warning

    [event] = of_type(read_log(workspace, sid), "mcp/server")
    chat = (await client.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 200}))["items"]
    [notice] = [i for i in chat if i["kind"] == "notice"]
    assert (notice["code"], notice["server"], notice["seq"]) == ("mcp-server-failed", "broken", event["seq"])
    assert notice["text"] == told[0] and "about" not in notice
