"""Spend you can see, over ACP: `dshd acp` with the person's own model settings pointing at
a loopback OpenAI or Anthropic server that reports usage as the real API does (cached
tokens included), or none at all, or stops a reply at the output limit (finish_reason
"length", stop_reason "max_tokens"). Both SDK clients.

- a model call's usage_update carries ``_meta.dsh {inputTokens, cachedInputTokens?,
  outputTokens, estimated?}``; the prompt's answer carries ACP's ``usage`` (the turn's
  totals, ``cachedReadTokens``; ``_meta.dsh.estimated`` when some of it is characters/4);
- a reply cut at ``[model] maxOutputTokens`` (finish_reason "length", inside a tool call's
  arguments) ends the prompt with ACP's stop reason ``max_tokens`` and a note saying to
  raise it, never a "not valid JSON" error.
"""

from __future__ import annotations

import pytest
from loopback_models import Call, LoopbackModelServer, Reply

from tests.e2e.support import of_type, read_log
from tests.e2e.test_providers import bare_workspace

pytestmark = pytest.mark.slow  # each starts `dshd acp` and a loopback server

KEY_ENV = "DSHD_ACP_SPEND_KEY"
WINDOW = 32000


def use_server(clients, tmp_path, monkeypatch, server: LoopbackModelServer, extra: str = "") -> None:
    user = tmp_path / "xdg"
    (user / "dsh").mkdir(parents=True, exist_ok=True)
    (user / "dsh" / "config.toml").write_text(
        f'[model]\nprovider = "{server.provider}"\nmodel = "loopback-model"\nbaseUrl = "{server.base_url}"\n'
        f'apiKeyEnv = "{KEY_ENV}"\nmaxRetries = 0\ntimeoutS = 10\ncontextWindow = {WINDOW}\n{extra}'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
    monkeypatch.setenv(KEY_ENV, "sk-loopback-acp-spend")
    bare_workspace(clients.workspace, ["plan", "goals", "tools"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_usage_says_cached_tokens_and_estimates(clients, tmp_path, monkeypatch, provider):
    with LoopbackModelServer(provider) as server:
        server.script(
            Reply("Reading.", [Call("read_file", {"path": "notes.txt"})], usage=(900, 10), cached=800),
            Reply("It says hello.", usage=(930, 6), cached=900),
            Reply("No usage from this server.", usage=None),
        )
        use_server(clients, tmp_path, monkeypatch, server)
        (clients.workspace / "notes.txt").write_text("hello\n")
        client = await clients.start()
        sid = (await client.new_session())["sessionId"]

        answer = await client.prompt(sid, "what do the notes say?")
        assert answer["stopReason"] == "end_turn"
        # The turn's two calls, summed, in ACP's own usage fields.
        assert answer["usage"]["inputTokens"] == 900 + 930
        assert answer["usage"]["outputTokens"] == 10 + 6
        assert answer["usage"]["cachedReadTokens"] == 800 + 900
        assert answer["usage"]["totalTokens"] == 900 + 930 + 10 + 6
        assert "estimated" not in (answer["usage"].get("_meta") or {}).get("dsh", {})
        updates = client.of_kind("usage_update", sid)
        assert [(u["used"], u["size"]) for u in updates] == [(910, WINDOW), (936, WINDOW)]
        assert [u["_meta"]["dsh"] for u in updates] == [
            {"inputTokens": 900, "cachedInputTokens": 800, "outputTokens": 10},
            {"inputTokens": 930, "cachedInputTokens": 900, "outputTokens": 6},
        ]

        # A server that reports nothing: dshd estimates (characters/4) and says so.
        seen = len(updates)
        answer = await client.prompt(sid, "and now?")
        assert answer["stopReason"] == "end_turn"
        assert answer["usage"]["_meta"] == {"dsh": {"estimated": True}}
        assert answer["usage"]["inputTokens"] > 0 and answer["usage"]["outputTokens"] > 0
        assert "cachedReadTokens" not in answer["usage"]
        [estimated] = client.of_kind("usage_update", sid)[seen:]
        assert estimated["_meta"]["dsh"]["estimated"] is True
        assert estimated["used"] == estimated["_meta"]["dsh"]["inputTokens"] + estimated["_meta"]["dsh"]["outputTokens"]
    usage = [e["data"]["usage"] for e in of_type(read_log(clients.workspace, sid), "assistant/message")]
    assert usage[-1]["estimated"] is True and usage[0].get("cachedInputTokens") == 800


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_reply_cut_at_the_output_limit_stops_with_max_tokens(clients, tmp_path, monkeypatch, provider):
    with LoopbackModelServer(provider) as server:
        server.script(
            # The control: a whole reply first ends as usual.
            Reply("Fine."),
            Reply("Writing it.", [Call("write_file", {"path": "a.txt", "content": "A long file\n" * 20})], cut_at_limit=True),
        )
        use_server(clients, tmp_path, monkeypatch, server, "maxOutputTokens = 64\n")
        client = await clients.start()
        sid = (await client.new_session())["sessionId"]
        assert (await client.prompt(sid, "hello"))["stopReason"] == "end_turn"

        answer = await client.prompt(sid, "write a.txt")
        assert answer["stopReason"] == "max_tokens"
        assert answer["_meta"]["dsh"]["errorKind"] == "output-limit"
    said = client.agent_text(sid)
    assert "maxOutputTokens" in said and "not valid JSON" not in said
    assert not (clients.workspace / "a.txt").exists()
    close = of_type(read_log(clients.workspace, sid), "turn/close")[-1]["data"]
    assert close["stopReason"] == "model-error" and close["error"]["kind"] == "output-limit"
