"""The ``[daemon]`` table (the shared daemon's idle timeout): accepted in every layer,
checked strictly, read by ``dshd daemon`` from the user config and the workspace file."""

from __future__ import annotations

import pytest

from dshd.agent.config_layers import load_config
from dshd.errors import DshError
from dshd.shared_daemon import DEFAULT_IDLE_TIMEOUT_S, idle_timeout_s


def write_toml(root, text: str) -> None:
    (root / ".dsh").mkdir(exist_ok=True)
    (root / ".dsh" / "config.toml").write_text(text)


def test_default_and_every_layer(tmp_path):
    assert load_config(tmp_path).daemon.idleTimeoutS == 60
    write_toml(tmp_path, "[daemon]\nidleTimeoutS = 5\n")
    assert load_config(tmp_path).daemon.idleTimeoutS == 5
    # An editor's settings may carry it too (accepted; only the daemon's start reads it).
    assert load_config(tmp_path, {"daemon": {"idleTimeoutS": 0.5}}).daemon.idleTimeoutS == 0.5


@pytest.mark.parametrize("value", [0, -1, "60", True, float("inf")])
def test_a_bad_timeout_names_the_key(tmp_path, value):
    with pytest.raises(DshError) as err:
        load_config(tmp_path, {"daemon": {"idleTimeoutS": value}})
    assert err.value.kind == "invalid-config" and err.value.data["key"] == "daemon.idleTimeoutS"


def test_an_unknown_key_names_it(tmp_path):
    with pytest.raises(DshError) as err:
        load_config(tmp_path, {"daemon": {"idleTimeout": 5}})
    assert err.value.data["key"] == "daemon.idleTimeout"


def test_the_daemon_reads_the_workspace_file_and_keeps_the_default_on_a_broken_one(tmp_path):
    write_toml(tmp_path, "[daemon]\nidleTimeoutS = 2.5\n")
    assert idle_timeout_s(tmp_path) == 2.5
    write_toml(tmp_path, "[daemon]\nidleTimeoutS = 0\n")  # invalid: each connection's initialize says so
    assert idle_timeout_s(tmp_path) == DEFAULT_IDLE_TIMEOUT_S
