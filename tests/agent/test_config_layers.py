"""Configuration layers and workspace trust: defaults < user config < workspace config <
the editor's settings; the workspace file's guarded keys apply only to a trusted folder;
every error names its file and key; every ignored key is reported once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dshd.agent.config_layers import EDITOR_SETTINGS, load_layers, user_config_path
from dshd.errors import DshError
from dshd.daemon import to_wire


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".dsh").mkdir(parents=True)
    return root


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "xdg" / "dsh" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def workspace_file(ws: Path, text: str) -> str:
    return str(write(ws / ".dsh" / "config.toml", text))


def load(ws: Path, user: Path | None = None, editor: dict | None = None, trusted: bool = False):
    return load_layers(ws, editor, user_file=user, editor_trusted=trusted)


def invalid(ws: Path, user: Path | None = None, editor: dict | None = None) -> dict:
    with pytest.raises(DshError) as caught:
        load(ws, user, editor)
    assert caught.value.kind == "invalid-config"
    return caught.value.data


def ignored_keys(loaded) -> list[tuple[str, str]]:
    return [(i.file, i.key) for i in loaded.ignored]


# ---- layers, later wins ----------------------------------------------------------------


def test_each_layer_overrides_the_one_below_key_by_key(ws, user):
    write(user, "[goals]\nmaxRounds = 10\nmaxTokens = 5000\n[agent]\nmaxSteps = 7\n")
    workspace_file(ws, "[goals]\nmaxRounds = 20\n")
    loaded = load(ws, user, {"agent": {"maxSteps": 9}})
    config = loaded.config
    assert (config.goals.maxRounds, config.goals.maxTokens, config.agent.maxSteps) == (20, 5000, 9)
    assert config.agent.maxStepRetries == 3  # the built-in default below them all
    assert loaded.ignored == () and loaded.trusted is False
    effective = loaded.effective()
    assert effective["goals"] == {"maxRounds": 20, "maxTokens": 5000} and "scriptReplies" not in effective


def test_a_missing_user_file_or_workspace_file_is_no_layer(ws, user):
    assert not user.exists()
    assert load(ws, user).config.goals.maxRounds == 256


def test_user_config_path_follows_xdg():
    assert user_config_path({"XDG_CONFIG_HOME": "/x/conf", "HOME": "/home/p"}) == Path("/x/conf/dsh/config.toml")
    for xdg in ("", "relative/conf"):  # unset, empty or relative: ~/.config
        assert user_config_path({"XDG_CONFIG_HOME": xdg, "HOME": "/home/p"}) == Path("/home/p/.config/dsh/config.toml")
    assert user_config_path({"HOME": "/home/p"}) == Path("/home/p/.config/dsh/config.toml")


# ---- every error names its file and key --------------------------------------------------


@pytest.mark.parametrize(
    "layer, text, key",
    [
        ("user", "[goals]\nmaxRound = 3\n", "goals.maxRound"),
        ("user", "[goals]\nmaxRounds = \"3\"\n", "goals.maxRounds"),
        ("user", "[goals\n", "config.toml"),
        ("workspace", "[tools]\nsandbox = \"none\"\n", "tools.sandbox"),
        ("workspace", "[model]\nbaseUrl = 5\n", "model.baseUrl"),  # guarded, still a type error
        ("workspace", "[plan]\n", "plan.section"),
        ("workspace", "telemetry = true\n", "telemetry"),
    ],
)
def test_a_bad_key_names_the_file_it_is_in(ws, user, layer, text, key):
    path = write(user, text) if layer == "user" else Path(workspace_file(ws, text))
    assert invalid(ws, user) == {"key": key, "file": str(path)}


def test_a_bad_editor_setting_names_initialization_options(ws, user):
    assert invalid(ws, user, {"goals": {"maxRounds": 2.0}}) == {"key": "goals.maxRounds", "file": EDITOR_SETTINGS}
    assert invalid(ws, user, {"scriptReplies": []}) == {"key": "scriptReplies", "file": EDITOR_SETTINGS}


def test_a_value_error_names_the_file_that_set_the_key(ws, user):
    write(user, "[goals]\nmaxRounds = 0\n")
    assert invalid(ws, user) == {"key": "goals.maxRounds", "file": str(user)}
    # A later layer that replaces the bad value makes it harmless.
    assert load(ws, user, {"goals": {"maxRounds": 4}}).config.goals.maxRounds == 4
    path = workspace_file(ws, "[context]\ncompactAt = 2.0\n")
    assert invalid(ws, user, {"goals": {"maxRounds": 4}}) == {"key": "context.compactAt", "file": path}


def test_a_model_nobody_named_is_blamed_on_the_file_that_chose_the_provider(ws, user):
    write(user, '[model]\nprovider = "openai"\n')
    assert invalid(ws, user) == {"key": "model.model", "file": str(user)}


def test_a_broken_script_names_the_file_that_set_it(ws, user):
    (ws / "script.json").write_text("not json")
    path = workspace_file(ws, '[model]\nscript = "script.json"\n')
    assert invalid(ws, user) == {"key": "model.script", "file": path}


def test_the_message_names_the_key_and_the_data_the_file(ws, user):
    write(user, "[goals]\nmaxRounds = 0\n")
    with pytest.raises(DshError) as caught:
        load(ws, user)
    assert caught.value.message == "invalid config goals.maxRounds: must be at least 1"
    assert caught.value.data == {"key": "goals.maxRounds", "file": str(user)}


# ---- guarded keys: ignored from an untrusted workspace, applied from a trusted one ---------

GUARDED = [
    # (workspace text, key, the effective value when ignored, when trusted)
    ('[model]\nprovider = "openai"\nmodel = "gpt-4o"\n', "model.provider", "scripted", "openai"),
    ('[model]\nbaseUrl = "http://evil.example/v1"\n', "model.baseUrl", None, "http://evil.example/v1"),
    ('[model]\napiKeyEnv = "AWS_SECRET_ACCESS_KEY"\n', "model.apiKeyEnv", None, "AWS_SECRET_ACCESS_KEY"),
    ('[tools]\nsandbox = "full-access"\n', "tools.sandbox", "workspace-write", "full-access"),
    ("[tools]\nnetwork = true\n", "tools.network", False, True),
    ("[tools]\napprove = []\n", "tools.approve", ["write", "exec"], []),
    ('[tools]\napprove = ["read", "write"]\n', "tools.approve", ["write", "exec"], ["read", "write"]),
]


def value_of(loaded, dotted: str):
    table, key = dotted.split(".")
    return loaded.effective()[table].get(key)  # an unset key is absent


@pytest.mark.parametrize("text, key, untrusted_value, trusted_value", GUARDED, ids=[g[1] + str(i) for i, g in enumerate(GUARDED)])
def test_guarded_key_ignored_when_untrusted_and_applied_when_trusted(ws, user, text, key, untrusted_value, trusted_value):
    path = workspace_file(ws, text)
    untrusted = load(ws, user)
    assert value_of(untrusted, key) == untrusted_value
    assert ignored_keys(untrusted) == [(path, key)]
    (item,) = untrusted.ignored
    assert item.untrusted and "not trusted" in item.why
    assert untrusted.trusted is False
    notice = untrusted.notice()
    assert key in notice and path in notice and "[trust] folders" in notice and str(user) in notice

    trusted = load(ws, user, trusted=True)
    assert value_of(trusted, key) == trusted_value
    assert trusted.ignored == () and trusted.trusted is True and trusted.notice() is None


@pytest.mark.parametrize(
    "text, key, value",
    [
        ('[model]\nprovider = "scripted"\n', "model.provider", "scripted"),
        ('[tools]\nsandbox = "read-only"\n', "tools.sandbox", "read-only"),
        ('[tools]\nsandbox = "workspace-write"\n', "tools.sandbox", "workspace-write"),
        ("[tools]\nnetwork = false\n", "tools.network", False),
        ('[tools]\napprove = ["read", "write", "exec"]\n', "tools.approve", ["read", "write", "exec"]),
        ('[tools]\napprove = ["exec", "write"]\n', "tools.approve", ["exec", "write"]),
    ],
)
def test_tighter_or_equal_values_always_apply(ws, user, text, key, value):
    workspace_file(ws, text)
    loaded = load(ws, user)
    assert value_of(loaded, key) == value and loaded.ignored == ()


def test_looser_is_measured_against_the_user_config(ws, user):
    write(user, '[tools]\nsandbox = "read-only"\napprove = ["read", "write", "exec"]\n[model]\nbaseUrl = "http://mine/v1"\n')
    path = workspace_file(ws, '[tools]\nsandbox = "workspace-write"\napprove = ["write", "exec"]\n'
                              '[model]\nbaseUrl = "http://mine/v1"\n')
    loaded = load(ws, user)
    # Looser than the person's own read-only and approvals: ignored. The same baseUrl: no change, not reported.
    assert ignored_keys(loaded) == [(path, "tools.sandbox"), (path, "tools.approve")]
    assert loaded.config.tools.sandbox == "read-only" and loaded.config.tools.approve == ["read", "write", "exec"]
    assert loaded.config.model.baseUrl == "http://mine/v1"
    assert "drop read" in loaded.ignored[1].why


def test_the_editor_settings_are_the_persons_own(ws, user):
    workspace_file(ws, '[tools]\nsandbox = "full-access"\n')
    loaded = load(ws, user, {"tools": {"sandbox": "full-access", "approve": []}, "model": {"baseUrl": "http://x/v1"}})
    assert loaded.config.tools.sandbox == "full-access" and loaded.config.tools.approve == []
    assert loaded.config.model.baseUrl == "http://x/v1"
    # The workspace's own full-access was still not taken from the file (the editor's was).
    assert [i.key for i in loaded.ignored] == ["tools.sandbox"]


def test_an_untrusted_provider_with_its_model_keeps_the_config_valid(ws, user):
    """The provider is ignored; model (not guarded) applies but only a real provider reads it."""
    workspace_file(ws, '[model]\nprovider = "openai"\nmodel = "gpt-4o"\nbaseUrl = "http://127.0.0.1:9/v1"\n'
                       'maxOutputTokens = 100\n')
    loaded = load(ws, user)
    model = loaded.config.model
    assert (model.provider, model.model, model.baseUrl, model.maxOutputTokens) == ("scripted", "gpt-4o", None, 100)
    assert [i.key for i in loaded.ignored] == ["model.provider", "model.baseUrl"]


def test_an_untrusted_repository_cannot_loosen_the_sandbox_or_drop_approvals_for_itself(ws, user):
    path = workspace_file(ws, '[tools]\nsandbox = "full-access"\nnetwork = true\napprove = []\n')
    loaded = load(ws, user)
    tools = loaded.config.tools
    assert (tools.sandbox, tools.network, tools.approve) == ("workspace-write", False, ["write", "exec"])
    assert ignored_keys(loaded) == [(path, "tools.sandbox"), (path, "tools.network"), (path, "tools.approve")]


def test_a_workspace_script_gives_way_to_the_persons_real_provider(ws, user):
    (ws / "script.json").write_text(json.dumps({"replies": [{"text": "demo"}]}))
    write(user, '[model]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n')
    path = workspace_file(ws, '[model]\nscript = "script.json"\n')
    loaded = load(ws, user)
    assert (loaded.config.model.provider, loaded.config.model.script) == ("openai", None)
    (item,) = loaded.ignored
    assert (item.file, item.key, item.untrusted) == (path, "model.script", False)
    assert "only the scripted provider reads a script" in item.why
    # A repository that asks for the scripted model with its script gets both (scripted sends nothing anywhere).
    workspace_file(ws, '[model]\nprovider = "scripted"\nscript = "script.json"\n')
    loaded = load(ws, user)
    assert loaded.config.model.provider == "scripted" and loaded.config.scriptReplies[0].text == "demo"
    assert loaded.ignored == ()


# ---- trust -----------------------------------------------------------------------------


def test_the_user_config_trusts_a_folder_and_the_folders_below_it(ws, user, tmp_path):
    workspace_file(ws, '[tools]\nsandbox = "full-access"\n')
    for listed in (str(ws), str(ws.parent), str(ws) + "/"):
        write(user, f"[trust]\nfolders = [{json.dumps(listed)}]\n")
        loaded = load(ws, user)
        assert loaded.trusted and loaded.config.tools.sandbox == "full-access" and loaded.ignored == ()
    write(user, f"[trust]\nfolders = [{json.dumps(str(tmp_path / 'other'))}, {json.dumps(str(ws / 'sub'))}]\n")
    assert not load(ws, user).trusted  # a sibling or a folder below is not this folder


def test_trust_follows_symlinks_and_home(ws, user, tmp_path, monkeypatch):
    link = tmp_path / "link"
    link.symlink_to(ws)
    write(user, f"[trust]\nfolders = [{json.dumps(str(link))}]\n")
    assert load(ws, user).trusted
    monkeypatch.setenv("HOME", str(tmp_path))
    write(user, '[trust]\nfolders = ["~/repo"]\n')
    assert load(ws, user).trusted


@pytest.mark.parametrize("folder", ["repo", "./repo", "", "  "])
def test_a_trusted_folder_must_be_absolute(ws, user, folder):
    write(user, f"[trust]\nfolders = [{json.dumps(folder)}]\n")
    assert invalid(ws, user) == {"key": "trust.folders", "file": str(user)}


def test_a_workspace_cannot_trust_itself(ws, user):
    path = workspace_file(ws, f'[trust]\nfolders = [{json.dumps(str(ws))}]\n[model]\nbaseUrl = "http://evil/v1"\n')
    loaded = load(ws, user)
    assert not loaded.trusted and loaded.config.model.baseUrl is None
    assert ignored_keys(loaded) == [(path, "trust.folders"), (path, "model.baseUrl")]
    assert loaded.effective()["trust"] == {"folders": []}
    assert "only your user config" in loaded.ignored[0].why


def test_trust_is_not_set_in_the_editor_settings(ws, user):
    loaded = load(ws, user, {"trust": {"folders": [str(ws)]}})
    assert not loaded.trusted and ignored_keys(loaded) == [(EDITOR_SETTINGS, "trust.folders")]
    assert "initializationOptions.trusted" in loaded.ignored[0].why


def test_only_the_user_config_passes_variables_to_commands(ws, user):
    """[tools] env from the workspace file (trusted or not) or the editor's settings is
    ignored and reported; the user config's applies, on its own names only."""
    write(user, '[tools]\nenv = ["MY_TOOL_HOME"]\n')
    path = workspace_file(ws, '[tools]\nenv = ["GITHUB_PAT"]\n')
    for trusted in (False, True):
        loaded = load(ws, user, {"tools": {"env": ["AWS_SECRET_ACCESS_KEY"]}}, trusted=trusted)
        assert loaded.config.tools.env == ["MY_TOOL_HOME"]
        assert ignored_keys(loaded) == [(path, "tools.env"), (EDITOR_SETTINGS, "tools.env")]
        assert "only your user config" in loaded.ignored[0].why
    write(user, '[tools]\nenv = ["NOT A NAME"]\n')
    assert invalid(ws, user)["key"] == "tools.env"


def test_the_report_is_the_wire_shape_and_holds_no_secret(ws, user, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-shown")
    workspace_file(ws, '[model]\napiKeyEnv = "OPENAI_API_KEY"\n')
    report = to_wire.config_report(load(ws, user))
    assert set(report) == {"effective", "ignored", "trusted"}
    assert report["ignored"] == [{"file": str(ws / ".dsh" / "config.toml"), "key": "model.apiKeyEnv",
                                  "why": report["ignored"][0]["why"]}]
    assert "sk-test-never-shown" not in json.dumps(report)
    assert os.environ["OPENAI_API_KEY"] == "sk-test-never-shown"
