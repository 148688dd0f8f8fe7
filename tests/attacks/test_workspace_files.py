"""H-3: files read on the workspace's say (``.dsh/config.toml``, the scripted model's
``script``, ``AGENTS.md``) are read only from regular files inside the workspace under a
cap; otherwise a clear error naming the file, the rule and the cap, with nothing read.
Every refusal sits beside its allowed twin (a regular file inside, under the cap)."""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from dshd.models.config import SCRIPT_CAP
from dshd.agent.config_layers import CONFIG_CAP, load_layers
from dshd.agent.instructions import FILE_CAP, ProjectInstructions
from dshd.errors import DshError

SECRET = "OUTSIDE-SECRET-3f9a"


def workspace(tmp_path: Path, config: str = "", script: dict | None = None) -> Path:
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(config)
    (root / "script.json").write_text(json.dumps(script or {"replies": [{"text": "hi"}]}))
    return root


def refused(root: Path, editor: dict | None = None) -> DshError:
    started = time.monotonic()
    with pytest.raises(DshError) as caught:
        load_layers(root, editor)
    assert time.monotonic() - started < 5  # no FIFO waited on, no endless device read
    assert caught.value.kind == "invalid-config"
    return caught.value


def message(err: DshError) -> str:
    return str(getattr(err, "detail", "")) + " " + err.message


def test_a_script_of_dev_zero_from_an_untrusted_workspace_is_refused_unread(tmp_path):
    root = workspace(tmp_path, '[model]\nscript = "script.json"\n')
    assert load_layers(root).config.scriptReplies[0].text == "hi"  # allowed twin
    (root / ".dsh" / "config.toml").write_text('[model]\nscript = "/dev/zero"\n')
    tracemalloc.start()
    err = refused(root)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    assert err.data["key"] == "model.script" and err.data["file"] == str(root / ".dsh" / "config.toml")
    text = message(err)
    assert "/dev/zero" in text and "outside the workspace" in text and "16 MiB" in text
    # A link inside the workspace to /dev/zero: the same.
    (root / "zero.json").symlink_to("/dev/zero")
    (root / ".dsh" / "config.toml").write_text('[model]\nscript = "zero.json"\n')
    assert "outside the workspace through a symbolic link" in message(refused(root))
    # The person may name a script anywhere (editor settings), but /dev/zero is still no file.
    err = refused(root, {"model": {"script": "/dev/zero"}})
    assert "a device, not a regular file" in message(err) and "16 MiB" in message(err)
    outside = tmp_path / "mine.json"
    outside.write_text(json.dumps({"replies": [{"text": "mine"}]}))
    assert load_layers(root, {"model": {"script": str(outside)}}).config.scriptReplies[0].text == "mine"


def test_a_script_that_is_a_fifo_or_over_the_cap_is_refused(tmp_path):
    root = workspace(tmp_path, '[model]\nscript = "pipe.json"\n')
    os.mkfifo(root / "pipe.json")
    assert "a FIFO (named pipe), not a regular file" in message(refused(root))
    (root / "pipe.json").unlink()
    with open(root / "pipe.json", "wb") as f:
        f.truncate(SCRIPT_CAP + 1)  # sparse: big on paper only
    err = refused(root)
    assert f"{SCRIPT_CAP + 1} bytes" in message(err) and "16 MiB" in message(err)
    (root / "pipe.json").write_text(json.dumps({"replies": [{"text": "fits"}]}))
    assert load_layers(root).config.scriptReplies[0].text == "fits"


def test_the_workspace_config_must_be_a_regular_file_inside_under_1_mib(tmp_path):
    root = workspace(tmp_path, "[goals]\nmaxRounds = 7\n")
    assert load_layers(root).config.goals.maxRounds == 7  # allowed twin
    config = root / ".dsh" / "config.toml"
    outside = tmp_path / "outside.toml"
    outside.write_text("[goals]\nmaxRounds = 3\n")
    config.unlink()
    config.symlink_to(outside)
    err = refused(root)
    assert err.data["key"] == "config.toml" and err.data["file"] == str(config)
    assert "outside the workspace through a symbolic link" in message(err) and "1 MiB" in message(err)
    config.unlink()
    os.mkfifo(config)
    assert "FIFO" in message(refused(root))
    config.unlink()
    config.write_text("# padding\n" * (CONFIG_CAP // 10 + 1))
    assert "over the size cap of 1 MiB" in message(refused(root))
    # A link to a file inside the workspace is fine.
    config.unlink()
    (root / "shared.toml").write_text("[goals]\nmaxRounds = 5\n")
    config.symlink_to(root / "shared.toml")
    assert load_layers(root).config.goals.maxRounds == 5


def test_agents_md_that_leads_out_is_never_read(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text(f"{SECRET}\n")
    instructions = ProjectInstructions(root)
    (root / "AGENTS.md").symlink_to(secret)
    text = instructions.render()
    assert SECRET not in text and "AGENTS.md" in text and "outside the workspace" in text and "256 KiB" in text
    assert instructions.reads == 0
    # Allowed twins: a link to a file inside, and a plain file.
    (root / "docs").mkdir()
    (root / "docs" / "agents.md").write_text("Inside rules.\n")
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").symlink_to(root / "docs" / "agents.md")
    assert "Inside rules." in instructions.render()
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").write_text("Plain rules.\n")
    assert "Plain rules." in instructions.render()


def test_agents_md_that_is_a_fifo_or_over_256_kib_is_not_read(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    instructions = ProjectInstructions(root)
    os.mkfifo(root / "AGENTS.md")
    done: list[str] = []
    reader = threading.Thread(target=lambda: done.append(instructions.render()), daemon=True)
    reader.start()
    reader.join(5)
    assert done and "FIFO" in done[0]
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").write_text(f"{SECRET}\n" * (FILE_CAP // len(SECRET) + 1))
    text = instructions.render()
    assert SECRET not in text and "over the cap of 256 KiB" in text and instructions.reads == 0
    (root / "AGENTS.md").write_text("Short.\n")
    assert "Short." in instructions.render() and instructions.reads == 1


def test_an_untrusted_workspace_may_lower_the_write_cap_not_raise_it(tmp_path):
    root = workspace(tmp_path, "[tools]\nmaxWriteBytes = 99999999999\n")
    loaded = load_layers(root)
    assert loaded.config.tools.maxWriteBytes == 8 * 1024 * 1024
    assert [i.key for i in loaded.ignored] == ["tools.maxWriteBytes"]
    (root / ".dsh" / "config.toml").write_text("[tools]\nmaxWriteBytes = 1000\n")
    assert load_layers(root).config.tools.maxWriteBytes == 1000
    (root / ".dsh" / "config.toml").write_text("[tools]\nmaxWriteBytes = 99999999999\n")
    assert load_layers(root, editor_trusted=True).config.tools.maxWriteBytes == 99999999999
