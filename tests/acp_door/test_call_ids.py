"""Tool call ids a server reuses, over ACP: `dshd acp` with the person's own model settings
(user config) pointing at a loopback OpenAI-compatible server that numbers the calls of
every reply from 0. Each call is its own tool call for the client (its own toolCallId,
permission request and end); both answers are recorded. Both SDK clients."""

from __future__ import annotations

from loopback_models import Call, LoopbackModelServer, Reply

from tests.acp_door.support import finished, selected
from tests.e2e.support import of_type, read_log
from tests.e2e.test_providers import bare_workspace

KEY_ENV = "DSHD_ACP_CALL_IDS_KEY"


async def test_a_reused_call_id_is_two_tool_calls_for_the_client(clients, tmp_path, monkeypatch):
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply("Writing a.", [Call("write_file", {"path": "a.txt", "content": "A\n"}, id="call_0")]),
            Reply("Writing b.", [Call("write_file", {"path": "b.txt", "content": "B\n"}, id="call_0")]),
            Reply("Done."),
        )
        user = tmp_path / "xdg"
        (user / "dsh").mkdir(parents=True)
        (user / "dsh" / "config.toml").write_text(
            f'[model]\nprovider = "openai"\nmodel = "loopback-model"\nbaseUrl = "{server.base_url}"\n'
            f'apiKeyEnv = "{KEY_ENV}"\nmaxRetries = 0\ntimeoutS = 10\n'
        )
        monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
        monkeypatch.setenv(KEY_ENV, "sk-loopback-acp")
        root = clients.workspace
        bare_workspace(root, ["plan", "goals", "tools"])
        client = await clients.start()
        answers = [selected("allow-once"), selected("reject")]
        client.answer_permission = lambda params: answers.pop(0)
        sid = (await client.new_session())["sessionId"]
        assert (await client.prompt(sid, "write a and b"))["stopReason"] == "end_turn"
        assert len(server.requests) == 3

    calls = client.tool_calls(sid)
    ids = [c["toolCallId"] for c in calls]
    assert len(ids) == 2 and ids[0] == "call_0" and ids[1] != "call_0"  # the first keeps the provider's id
    assert [a["toolCall"]["toolCallId"] for a in client.permission_requests] == ids
    assert [u["status"] for u in finished(client, sid)] == ["completed", "failed"]
    assert (root / "a.txt").read_text() == "A\n" and not (root / "b.txt").exists()
    events = read_log(root, sid)
    assert [(d["data"]["callId"], d["data"]["outcome"]) for d in of_type(events, "permission/decision")] == [
        (ids[0], "allow-once"), (ids[1], "reject"),
    ]
