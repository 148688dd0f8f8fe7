"""The API key, and any 12 consecutive characters of it, never reach the session log, a
notification or the daemon's stderr: the real `dshd serve` over stdio, a loopback
OpenAI-compatible server (tests/loopback_models.py) whose errors echo the key cut short,
a 12-character piece of it, or the whole key in the middle of their text.
"""

from __future__ import annotations

import pytest

import json
import secrets

from loopback_models import Failure, LoopbackModelServer, Raw

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon, log_events

KEY_ENV = "DSHD_REDACTION_TEST_KEY"
KEY = "sk-proj-" + secrets.token_hex(24)
FRAGMENT = 12
# The positive control: 12 characters that are no part of the key pass untouched.
UNRELATED = "Zq9-unrelated"[:FRAGMENT]


def windows(secret: str) -> set[str]:
    return {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}


def leaks(text: str) -> list[str]:
    return sorted(w for w in windows(KEY) if w in text)


@pytest.mark.slow
def test_no_piece_of_the_key_reaches_the_log_a_notification_or_stderr(tmp_path) -> None:
    assert not leaks(UNRELATED)
    middle = KEY[9 : 9 + FRAGMENT]
    echoes = [
        Failure(400, message=f"Incorrect API key provided: {KEY[:-2]}. {UNRELATED} is the request id."),
        Failure(500, message=f"upstream rejected a key containing {middle}; {UNRELATED}"),
        Failure(429, message=f"Rate limit for key{KEY}in org {UNRELATED}, retry later"),
        Failure(502, body=f"gateway: Authorization: Bearer {KEY[2:]} refused ({UNRELATED})"),  # not JSON
        Raw([f"data: {json.dumps({'error': {'message': f'stream broke for {KEY[:-2]} ({UNRELATED})'}})}\n\n"]),
    ]
    root = write_workspace(tmp_path / "ws")
    (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n')
    with LoopbackModelServer("openai") as server:
        server.script(*echoes)
        config = {
            "model": {
                "provider": "openai", "model": "loopback-model", "baseUrl": server.base_url,
                "apiKeyEnv": KEY_ENV, "timeoutS": 10, "maxRetries": 0,
            }
        }  # fmt: skip
        # INFO: the daemon logs as much as it ever does, to stderr and to the editor.
        with RawDaemon(root, env={KEY_ENV: KEY, "DSHD_LOG_LEVEL": "INFO"}, log_level="INFO") as d:
            assert "result" in d.initialize(options={"config": config})
            created = d.request("dsh/session/create", {})
            agent, sid = created["agentId"], created["sessionId"]
            for n in range(len(echoes)):
                result = d.request("dsh/agent/prompt", {"agentId": agent, "text": f"try {n}"}, timeout=30)
                assert result["stopReason"] == "model-error", (result, d.stderr_bytes.decode()[-3000:])
            chat = d.request("dsh/chat/get", {"agentId": agent, "afterSeq": 0, "limit": 500})
            assert d.shutdown_and_exit() == 0
            stderr = d.stderr_bytes.decode("utf-8", "replace")
            notifications = list(d.notifications)
        # The key really was sent (so the server could have echoed it).
        assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)

    log_text = (root / ".dsh" / "sessions" / sid / "log.jsonl").read_text()
    errors = [e["data"]["error"]["message"] for e in log_events(root, sid) if e["type"] == "turn/close"]
    assert len(errors) == len(echoes)
    # Positive control: the servers' own words do get through (with the unrelated 12
    # characters intact), so an empty message cannot pass as "redacted".
    assert all(UNRELATED in message and "[redacted]" in message for message in errors), errors
    assert UNRELATED in stderr and UNRELATED in json.dumps(notifications) and UNRELATED in json.dumps(chat)

    assert leaks(log_text) == []
    assert leaks(stderr) == [], stderr
    for notification in notifications:
        assert leaks(json.dumps(notification)) == [], notification
    assert leaks(json.dumps(chat)) == []


@pytest.mark.slow
def test_a_key_pasted_as_apiKeyEnv_is_never_repeated(tmp_path) -> None:
    """A person who puts the key itself in `[model] apiKeyEnv` is told what to fix, and the
    key shows in no error, notification, log line or stderr (it used to be quoted as
    "<key> is not set")."""
    root = write_workspace(tmp_path / "ws")
    (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n')
    with LoopbackModelServer("openai") as server:
        config = {"model": {"provider": "openai", "model": "m", "baseUrl": "https://api.example.invalid/v1",
                            "apiKeyEnv": KEY, "maxRetries": 0}}  # fmt: skip
        with RawDaemon(root, env={"DSHD_LOG_LEVEL": "INFO"}, log_level="INFO") as d:
            assert "result" in d.initialize(options={"config": config})
            created = d.request("dsh/session/create", {})
            result = d.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "hi"}, timeout=30)
            assert d.shutdown_and_exit() == 0
        assert server.requests == []  # nothing was sent anywhere
    assert result["stopReason"] == "model-error"
    [close] = [e for e in log_events(root, created["sessionId"]) if e["type"] == "turn/close"]
    # Positive control: the error is there and says what to do.
    assert close["data"]["error"]["kind"] == "auth" and "apiKeyEnv must be the name" in close["data"]["error"]["message"]
    log_text = (root / ".dsh" / "sessions" / created["sessionId"] / "log.jsonl").read_text()
    assert leaks(log_text) == []
    assert leaks(d.stderr_bytes.decode("utf-8", "replace")) == [], [l for l in d.stderr_bytes.decode().splitlines() if leaks(l)]
    assert leaks(json.dumps(d.notifications)) == []


@pytest.mark.slow
def test_config_get_and_doctor_never_show_a_key_pasted_as_apiKeyEnv(tmp_path) -> None:
    """`dsh/config/get` shows the settings in force; an `apiKeyEnv` that is no variable
    name (likely the key itself) is shown as not shown, in it and in `dshd doctor`.
    Control: a variable name is shown as it is (a second daemon, the same settings)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = write_workspace(tmp_path / "ws")
    (root / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n')
    base = {"provider": "openai", "model": "m", "baseUrl": "https://api.example.invalid/v1", "maxRetries": 0}
    shown = {}
    for env_name in (KEY, "MY_KEY_VAR"):
        with RawDaemon(root) as d:
            assert "result" in d.initialize(options={"config": {"model": {**base, "apiKeyEnv": env_name}}})
            shown[env_name] = d.request("dsh/config/get", {})
            assert d.shutdown_and_exit() == 0
        assert leaks(d.stderr_bytes.decode("utf-8", "replace")) == []
    assert shown["MY_KEY_VAR"]["effective"]["model"]["apiKeyEnv"] == "MY_KEY_VAR"  # control
    pasted = shown[KEY]["effective"]["model"]
    assert pasted["apiKeyEnv"] == "(not a variable name, so likely the key itself: not shown)", pasted
    assert pasted["baseUrl"] == base["baseUrl"]  # the rest of the table as it is
    assert leaks(json.dumps(shown[KEY])) == []

    # dshd doctor, the same settings from the person's own config
    home = tmp_path / "xdg"
    (home / "dsh").mkdir(parents=True)
    printed = {}
    for env_name in (KEY, "MY_KEY_VAR"):
        model = "".join(f'{k} = {json.dumps(v)}\n' for k, v in {**base, "apiKeyEnv": env_name}.items())
        (home / "dsh" / "config.toml").write_text("[model]\n" + model)
        for args in ([], ["--json"]):
            done = subprocess.run(
                [str(Path(sys.executable).with_name("dshd")), "doctor", "--workspace", str(root), *args],
                capture_output=True, text=True, timeout=120, env={**os.environ, "XDG_CONFIG_HOME": str(home)},
            )  # fmt: skip
            printed[env_name, bool(args)] = done.stdout + done.stderr
    assert "MY_KEY_VAR is NOT set" in printed["MY_KEY_VAR", False]  # control: the name is shown
    assert json.loads(printed["MY_KEY_VAR", True].splitlines()[-1])["keyEnv"] == "MY_KEY_VAR"
    assert "not a variable name, so likely the key itself: not shown" in printed[KEY, False], printed[KEY, False]
    assert leaks(printed[KEY, False]) == [] and leaks(printed[KEY, True]) == []
