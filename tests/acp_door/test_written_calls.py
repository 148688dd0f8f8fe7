"""A reply that writes a tool call as text, over ACP: `dshd acp` shows the reply as the
model wrote it and a quoted note after it, in the same message, saying nothing ran; a
reply that shows JSON naming no offered tool gets none (the control). Both SDK clients."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import write_workspace

pytestmark = pytest.mark.slow  # starts `dshd acp`

WRITTEN = '```json\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n```'
JUST_JSON = 'A config: `{"name": "retries", "arguments": {"max": 3}}`.'


async def test_a_written_tool_call_gets_a_note_and_plain_json_none(clients):
    write_workspace(clients.workspace, [{"text": WRITTEN}, {"text": JUST_JSON}], plugins=["plan", "goals", "tools"])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]

    assert (await client.prompt(sid, "what is in notes.txt?"))["stopReason"] == "end_turn"
    chunks = client.of_kind("agent_message_chunk", sid)
    said = "".join(c["content"]["text"] for c in chunks)
    assert said.startswith(WRITTEN)
    assert "call of the read_file tool written as text" in said and "nothing ran" in said
    assert {c.get("messageId") for c in chunks if c.get("messageId", "").startswith("assistant-")} == {"assistant-1.1"}
    assert client.tool_calls(sid) == []  # nothing ran

    seen = len(chunks)
    assert (await client.prompt(sid, "show a config"))["stopReason"] == "end_turn"
    later = "".join(c["content"]["text"] for c in client.of_kind("agent_message_chunk", sid)[seen:])
    assert later == JUST_JSON
