"""The key, and any 12 characters of it, reach no ACP update, answer, log or stderr of
`dshd acp`: a loopback OpenAI-compatible server (the person's own model settings, in the
user config) answers errors that echo the key cut short and a middle piece of it."""

from __future__ import annotations

import json
import secrets

from loopback_models import Failure, LoopbackModelServer

from tests.acp_door.clients import AcpError
from tests.e2e.test_providers import bare_workspace

KEY_ENV = "DSHD_ACP_REDACTION_KEY"
KEY = "sk-acp-" + secrets.token_hex(24)
UNRELATED = "Zq9-unrelate"


def leaks(text: str) -> list[str]:
    return sorted({KEY[i : i + 12] for i in range(len(KEY) - 11)} & {text[i : i + 12] for i in range(len(text) - 11)})


async def test_no_piece_of_the_key_reaches_the_client_the_log_or_stderr(clients, tmp_path, monkeypatch):
    assert leaks(UNRELATED) == []
    with LoopbackModelServer("openai") as server:
        server.script(
            Failure(400, message=f"Incorrect API key provided: {KEY[:-2]} ({UNRELATED})"),
            Failure(500, message=f"upstream refused {KEY[8:20]} ({UNRELATED})"),
        )
        user = tmp_path / "xdg"
        (user / "dsh").mkdir(parents=True)
        (user / "dsh" / "config.toml").write_text(
            f'[model]\nprovider = "openai"\nmodel = "loopback-model"\nbaseUrl = "{server.base_url}"\n'
            f'apiKeyEnv = "{KEY_ENV}"\nmaxRetries = 0\ntimeoutS = 10\n'
        )
        monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
        monkeypatch.setenv(KEY_ENV, KEY)
        root = clients.workspace
        bare_workspace(root, ["plan", "goals"])
        client = await clients.start()
        sid = (await client.new_session())["sessionId"]
        answers = []
        for n in range(2):
            try:
                answers.append(await client.prompt(sid, f"try {n}"))
            except AcpError as exc:  # a model error is the prompt's error answer
                answers.append({"error": str(exc)})
        assert len(server.requests) == 2 and server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    await clients.close_all()

    seen = json.dumps([answers, client.updates])
    log_text = (root / ".dsh" / "sessions" / sid / "log.jsonl").read_text()
    stderr = clients.stderr()
    # Positive control: the servers' words got through, the key's pieces did not.
    assert UNRELATED in log_text and "[redacted]" in log_text
    assert UNRELATED in seen and "[redacted]" in seen
    assert leaks(log_text) == [] and leaks(seen) == [] and leaks(stderr) == []
