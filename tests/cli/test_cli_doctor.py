"""`dshd doctor`: whether the configured provider answers (a real one-token call to a
loopback server) and whether its key variable is set, never printing the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback_models import Failure, LoopbackModelServer, Reply

KEY = "sk-doctor-" + "7" * 30


def doctor(root: Path, *args: str, env: dict | None = None, trusted: bool = True) -> subprocess.CompletedProcess:
    """``trusted``: the workspace file's [model] is the person's own (as an editor's trust says)."""
    exe = Path(sys.executable).with_name("dshd")
    return subprocess.run(
        [str(exe), "doctor", "--workspace", str(root), *args, *(["--trusted"] if trusted else [])],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip


def workspace(tmp_path: Path, model: str) -> Path:
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(model)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_doctor_healthy_provider_answers(tmp_path, provider):
    with LoopbackModelServer(provider) as server:
        server.script(Reply("OK"))
        root = workspace(tmp_path, f'[model]\nprovider = "{provider}"\nmodel = "m"\nbaseUrl = "{server.base_url}"\napiKeyEnv = "DOCTOR_KEY"\n')
        done = doctor(root, env={"DOCTOR_KEY": KEY})
        (request,) = server.requests
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DOCTOR_KEY is set" in done.stdout and "answers   yes" in done.stdout and done.stdout.endswith("healthy\n")
    body = request.json
    assert body.get("max_tokens") == 1  # one token, nothing more
    assert KEY not in done.stdout + done.stderr


@pytest.mark.slow
def test_doctor_refused_key_is_unhealthy_and_says_what_to_do(tmp_path):
    with LoopbackModelServer("openai") as server:
        server.script(Failure(401, message=f"Incorrect API key provided: {KEY}"))
        root = workspace(tmp_path, f'[model]\nprovider = "openai"\nmodel = "m"\nbaseUrl = "{server.base_url}"\napiKeyEnv = "DOCTOR_KEY"\n')
        done = doctor(root, "--json", env={"DOCTOR_KEY": KEY})
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["healthy"] is False and report["keySet"] is True and report["keyEnv"] == "DOCTOR_KEY"
    assert report["error"]["kind"] == "auth" and "DOCTOR_KEY" in report["error"]["message"]
    assert KEY not in done.stdout + done.stderr


@pytest.mark.slow
def test_doctor_unset_key_and_unreachable_server(tmp_path):
    root = workspace(tmp_path, '[model]\nprovider = "anthropic"\nmodel = "claude-x"\napiKeyEnv = "DOCTOR_UNSET_KEY"\n')
    done = doctor(root)
    assert done.returncode == 1 and "DOCTOR_UNSET_KEY is NOT set" in done.stdout and "unhealthy" in done.stdout
    # A server on this machine that is not running: a connection error naming baseUrl.
    root = workspace(tmp_path / "b", '[model]\nprovider = "openai"\nmodel = "m"\nbaseUrl = "http://127.0.0.1:9/v1"\n')
    done = doctor(root)
    assert done.returncode == 1 and "connection" in done.stdout and "http://127.0.0.1:9/v1" in done.stdout


def test_doctor_scripted_and_bad_config(tmp_path):
    assert doctor(workspace(tmp_path, "")).returncode == 0
    done = doctor(workspace(tmp_path / "b", '[model]\nprovider = "openai"\n'), "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["config"]["key"] == "model.model"


def test_doctor_never_sends_the_key_where_an_untrusted_workspace_says(tmp_path):
    """The doctor reads the config as the daemon does: an untrusted folder's baseUrl and key
    variable are ignored (and said), so its server hears nothing."""
    with LoopbackModelServer("openai") as server:
        root = workspace(tmp_path, f'[model]\nprovider = "openai"\nmodel = "m"\nbaseUrl = "{server.base_url}"\napiKeyEnv = "DOCTOR_KEY"\n')
        done = doctor(root, env={"DOCTOR_KEY": KEY}, trusted=False)
        report = json.loads(doctor(root, "--json", env={"DOCTOR_KEY": KEY}, trusted=False).stdout)
        assert server.requests == []
    assert done.returncode == 0 and "(not trusted)" in done.stdout and "provider  scripted" in done.stdout
    assert "ignored   model.baseUrl from" in done.stdout and "ignored   model.apiKeyEnv from" in done.stdout
    assert report["trusted"] is False and [i["key"] for i in report["ignored"]] == ["model.provider", "model.baseUrl", "model.apiKeyEnv"]
    assert KEY not in done.stdout + done.stderr
