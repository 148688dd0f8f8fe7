"""H-3 end to end: the real dshd over stdio, a loopback OpenAI server as the provider.
What the server receives is what would leave the machine: an AGENTS.md that links out of
the workspace (or is over its cap, or a FIFO) never gets there, while a plain AGENTS.md
(the positive control, same daemon) does. A workspace config naming /dev/zero as its script
fails initialize at once, naming the key, the file, the rule and the cap."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest
from loopback_models import LoopbackModelServer, Reply
from pygls.exceptions import JsonRpcException

from dshd_protocol import ERROR_CODES

from tests.e2e.conftest import PLAN_SECTION

KEY_ENV = "DSHD_E2E_WORKSPACE_FILES_KEY"
SECRET = "OUTSIDE-SECRET-" + secrets.token_hex(4)


@pytest.mark.slow
async def test_agents_md_out_of_the_workspace_never_reaches_the_provider(tmp_path, daemons):
    root = daemons.root
    (root / ".dsh" / "config.toml").write_text(f'[plan]\nsection = "{PLAN_SECTION}"\n')
    secret = tmp_path / "secret.md"
    secret.write_text(f"{SECRET}\n")
    (root / "AGENTS.md").symlink_to(secret)
    with LoopbackModelServer("openai") as server:
        server.script(*[Reply(text="ok") for _ in range(4)])
        config = {"model": {"provider": "openai", "model": "loopback-model", "baseUrl": server.base_url,
                            "apiKeyEnv": KEY_ENV, "timeoutS": 20, "maxRetries": 0}}
        client = await daemons.start(config=config, env={KEY_ENV: "sk-" + secrets.token_hex(16)})
        created = await client.request("dsh/session/create", {})

        async def prompt_body(text: str) -> str:
            before = len(server.requests)
            result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": text}, timeout=60)
            assert result["stopReason"] == "end-turn", result
            return server.wait_requests(before + 1)[before].body.decode()

        linked = await prompt_body("first")
        assert SECRET not in linked
        assert "AGENTS.md at the workspace root was not read" in linked and "outside the workspace" in linked

        (root / "AGENTS.md").unlink()
        (root / "AGENTS.md").write_text(f"{SECRET} in a plain file\n" * 20_000)  # about 700 KiB
        oversized = await prompt_body("second")
        assert SECRET not in oversized and "over the cap of 256 KiB" in oversized

        (root / "AGENTS.md").unlink()
        os.mkfifo(root / "AGENTS.md")
        started = time.monotonic()
        fifo = await prompt_body("third")
        assert "FIFO" in fifo and time.monotonic() - started < 20

        # Positive control: a plain AGENTS.md inside the workspace does reach the provider.
        (root / "AGENTS.md").unlink()
        (root / "AGENTS.md").write_text("MARKER-INSIDE: say what you changed.\n")
        plain = await prompt_body("fourth")
        assert "MARKER-INSIDE: say what you changed." in plain and "was not read" not in plain


@pytest.mark.slow
async def test_a_workspace_script_of_dev_zero_fails_initialize_at_once(workspace: Path, daemons):
    # Positive control: the fixture's own script (a regular file inside) starts.
    client = await daemons.start()
    assert (await client.request("dsh/session/create", {}))["sessionId"]
    await client.stop()
    config = workspace / ".dsh" / "config.toml"
    config.write_text(config.read_text().replace('script = "script.json"', 'script = "/dev/zero"'))
    started = time.monotonic()
    with pytest.raises(JsonRpcException) as info:
        await daemons.start()
    assert time.monotonic() - started < 30
    assert info.value.code == ERROR_CODES["invalid-config"]
    assert info.value.data == {"kind": "invalid-config", "key": "model.script", "file": str(config)}
    assert "/dev/zero" in info.value.message and "outside the workspace" in info.value.message
    assert "16 MiB" in info.value.message
