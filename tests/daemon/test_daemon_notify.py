"""The daemon's notifications (dsh/agent/delta per token, events, chat items) are
encoded by msgspec, not pygls's json path: what reaches the client must stay one
well-framed JSON-RPC message each, whatever the text holds."""

from __future__ import annotations

import io
import json

from dshd.agent.deltas import AgentDelta
from dshd.daemon.app import DshDaemon
from dshd.daemon.transport import StdoutWriter


class Agent:
    agent_id = "a-0123456789abcdef"
    session_id = "s-01jq3v6k9w8x7y6z5a4b3c2d1e"


def frames(raw: bytes) -> list[dict]:
    """Split Content-Length frames, checking each length counts the body's bytes."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: "), head
        length = int(head.split(b":")[1])
        body, raw = rest[:length], rest[length:]
        assert len(body) == length
        out.append(json.loads(body))
    return out


def daemon_writing_to(buffer: io.BytesIO) -> DshDaemon:
    daemon = DshDaemon()
    daemon.protocol.set_writer(StdoutWriter(buffer))
    return daemon


def test_a_delta_is_one_frame_with_its_text_whole() -> None:
    buffer = io.BytesIO()
    daemon = daemon_writing_to(buffer)
    texts = ["plain", "ünïcödé 漢字 🙂", "line\u2028sep \"quoted\" \\ back", ""]
    for text in texts:
        daemon.agent_delta(Agent(), AgentDelta(3, 2, "text", text=text))
    daemon.agent_delta(Agent(), AgentDelta(3, 2, "retry", attempt=2, delay_ms=500))
    sent = frames(buffer.getvalue())
    assert [m["method"] for m in sent] == ["dsh/agent/delta"] * 5
    assert [m["params"].get("text") for m in sent[:4]] == texts
    assert sent[0] == {
        "jsonrpc": "2.0",
        "method": "dsh/agent/delta",
        "params": {"agentId": Agent.agent_id, "sessionId": Agent.session_id, "turn": 3, "step": 2, "kind": "text", "text": "plain"},
    }
    assert sent[4]["params"] == {
        "agentId": Agent.agent_id, "sessionId": Agent.session_id, "turn": 3, "step": 2, "kind": "retry", "attempt": 2, "delayMs": 500,
    }  # fmt: skip


def test_a_lone_surrogate_still_goes_out_escaped() -> None:
    """A provider that splits one character's UTF-16 escape (\\ud83d\\ude00) across two
    chunks hands over half a character: msgspec cannot encode it, JSON can escape it."""
    buffer = io.BytesIO()
    daemon = daemon_writing_to(buffer)
    half = json.loads('"\\ud83d"')
    daemon.agent_delta(Agent(), AgentDelta(1, 1, "text", text=half))
    daemon.agent_delta(Agent(), AgentDelta(1, 1, "text", text="after"))
    sent = frames(buffer.getvalue())
    assert [m["params"]["text"] for m in sent] == [half, "after"]
    assert b"\\ud83d" in buffer.getvalue()


def test_values_msgspec_does_not_know_take_the_general_path() -> None:
    class Plain:  # pygls's hook sends an object's __dict__
        def __init__(self) -> None:
            self.text = "x"

    buffer = io.BytesIO()
    daemon = daemon_writing_to(buffer)
    daemon.protocol.send_notification("dsh/test", {"value": Plain()})
    (sent,) = frames(buffer.getvalue())
    assert sent == {"jsonrpc": "2.0", "method": "dsh/test", "params": {"value": {"text": "x"}}}
