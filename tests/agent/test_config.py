"""Config (SPEC 7): defaults <- .dsh/config.toml <- client overrides; strict, naming the key."""

from __future__ import annotations

import json

import pytest

from dshd.plugins.plan_config import DEFAULT_PLAN_SECTION
from dshd.agent.config_layers import load_config
from dshd.errors import DshError


def write_toml(root, text):
    (root / ".dsh").mkdir(exist_ok=True)
    (root / ".dsh" / "config.toml").write_text(text)


def invalid_key(root, overrides=None):
    with pytest.raises(DshError) as caught:
        load_config(root, overrides)
    assert caught.value.kind == "invalid-config"
    return caught.value.data["key"]


def test_defaults_without_a_config_file(tmp_path):
    config = load_config(tmp_path)
    assert config.plugins == ["plan", "goals", "tools", "mcp", "checkpoints"]
    assert config.plan.section == DEFAULT_PLAN_SECTION
    assert config.goals.maxRounds == 256
    assert config.model.provider == "scripted" and config.model.script is None
    assert config.scriptReplies == []


def test_file_overrides_defaults_and_client_overrides_file(tmp_path):
    write_toml(tmp_path, 'plugins = ["goals"]\n[plan]\nsection = "From the file."\n[goals]\nmaxRounds = 40\n')
    config = load_config(tmp_path)
    assert (config.plugins, config.plan.section, config.goals.maxRounds) == (["goals"], "From the file.", 40)
    config = load_config(tmp_path, {"goals": {"maxRounds": 7}, "plugins": []})
    # Tables merge key by key: the file's plan section stays.
    assert (config.plugins, config.plan.section, config.goals.maxRounds) == ([], "From the file.", 7)


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"goals": {"maxRounds": 0}}, "goals.maxRounds"),
        ({"goals": {"maxRounds": "256"}}, "goals.maxRounds"),
        ({"goals": {"maxRounds": 2.0}}, "goals.maxRounds"),
        ({"goals": {"maxRound": 3}}, "goals.maxRound"),
        ({"plugins": ["plan", "telemetry"]}, "plugins"),
        ({"plugins": ["plan", "plan"]}, "plugins"),
        ({"plugins": "plan"}, "plugins"),
        ({"model": {"provider": "openai"}}, "model.model"),
        ({"model": {"provider": "gemini", "model": "x"}}, "model.provider"),
        ({"model": {"provider": "openai", "model": "m", "script": "s.json"}}, "model.script"),
        ({"model": {"timeoutS": 0}}, "model.timeoutS"),
        ({"model": {"maxRetries": -1}}, "model.maxRetries"),
        ({"model": {"contextWindow": 0}}, "model.contextWindow"),
        ({"goals": {"maxTokens": 0}}, "goals.maxTokens"),
        ({"goals": {"check": "  "}}, "goals.check"),
        ({"goals": {"check": 1}}, "goals.check"),
        ({"tools": {"sandbox": "none"}}, "tools.sandbox"),
        ({"tools": {"approve": ["write", "write"]}}, "tools.approve"),
        ({"tools": {"approve": ["delete"]}}, "tools.approve"),
        ({"tools": {"network": "yes"}}, "tools.network"),
        ({"tools": {"env": "PATH"}}, "tools.env"),
        ({"context": {"compactAt": 1.5}}, "context.compactAt"),
        ({"model": {"temperature": 0.2}}, "model.temperature"),
        ({"model": {"script": ""}}, "model.script"),
        ({"agent": {"maxSteps": 0}}, "agent.maxSteps"),
        ({"agent": {"maxStepRetries": -1}}, "agent.maxStepRetries"),
        ({"sandbox": {"mode": "read-only"}}, "sandbox"),
        ({"scriptReplies": []}, "scriptReplies"),
        ({"plan": "on"}, "plan"),
    ],
)
def test_invalid_overrides_name_the_key(tmp_path, overrides, key):
    assert invalid_key(tmp_path, overrides) == key


def test_invalid_toml_file_is_invalid_config(tmp_path):
    write_toml(tmp_path, "[goals\nmaxRounds = 3\n")
    assert invalid_key(tmp_path) == "config.toml"
    write_toml(tmp_path, "[goals]\nmaxRounds = true\n")
    assert invalid_key(tmp_path) == "goals.maxRounds"


def test_scripted_model_script_is_read_and_checked_at_load(tmp_path):
    (tmp_path / "script.json").write_text(json.dumps({"replies": [{"text": "hi"}, {"toolCalls": [{"name": "t", "arguments": {"a": 1}}], "delayMs": 5}]}))
    config = load_config(tmp_path, {"model": {"script": "script.json"}})
    assert [r.text for r in config.scriptReplies] == ["hi", None]
    assert config.scriptReplies[1].toolCalls[0].arguments == {"a": 1}


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"replies": [{"text": 5}]}),
        json.dumps({"replies": [{"toolCalls": [{"arguments": {}}]}]}),
        json.dumps({"replies": [{"delayMs": -1}]}),
        json.dumps({"replies": [{"delayMs": "10"}]}),
        json.dumps({"replies": [{"text": "x", "mood": "happy"}]}),
        json.dumps({"replys": []}),
        json.dumps({"replies": [{"text": "x", "usage": {"inputTokens": -1, "outputTokens": 0}}]}),
        json.dumps({"replies": [{"text": "x", "usage": {"inputTokens": 1}}]}),
    ],
)
def test_malformed_script_is_invalid_config_model_script(tmp_path, content):
    (tmp_path / "script.json").write_text(content)
    assert invalid_key(tmp_path, {"model": {"script": "script.json"}}) == "model.script"


def test_missing_script_file_is_invalid_config(tmp_path):
    assert invalid_key(tmp_path, {"model": {"script": "nowhere.json"}}) == "model.script"
