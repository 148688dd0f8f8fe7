"""Checkpoints and "Rewind to here" in a real VS Code against the real dshd and the scripted model
(editors/vscode/test/integration/checkpoints.ts): a step that writes two files; "Rewind to here"
on the message and the tool cards; the diff first (now and after the rewind, in VS Code's changes
view) and the modal; Escape and Cancel change nothing; a file the person changed is marked and
needs "Overwrite my changes"; then the files go back; "Rewind files and conversation" opens the
fork's chat, where a step that writes one file shows it in the diff editor (SPEC K-3). Screenshots in artifacts/vscode/checkpoints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_vscode import ARTIFACTS, OWN_DAEMON, built, pytestmark as toolchain, run_real_vscode, write_settings  # noqa: F401

pytestmark = [toolchain, pytest.mark.editor]

CONFIG = """\
plugins = ["plan", "goals", "tools", "checkpoints"]

[tools]
approve = []

[model]
provider = "scripted"
script = "script.json"
"""
REPLIES = [
    {
        "text": "Raising the retries.",
        "toolCalls": [
            {"name": "write_file", "arguments": {"path": "http/config.py", "content": "retries = 5\n"}},
            {"name": "write_file", "arguments": {"path": "README.md", "content": "# Demo\n\nRetries: 5.\n"}},
        ],
    },
    {"text": "Done: 5 retries."},
    # In the fork of the conversation rewind:
    {"toolCalls": [{"name": "write_file", "arguments": {"path": "http/config.py", "content": "retries = 7\n"}}]},
    {"text": "Seven."},
]


@pytest.mark.timeout(200)
def test_real_vscode_rewind_to_here(built, tmp_path: Path) -> None:
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / "config.toml").write_text(CONFIG)
    (tmp_path / "script.json").write_text(json.dumps({"replies": REPLIES}))
    (tmp_path / "http").mkdir()
    (tmp_path / "http" / "config.py").write_text("retries = 3\n")
    (tmp_path / "README.md").write_text("# Demo\n")
    write_settings(tmp_path, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON})
    results = run_real_vscode(tmp_path, "out/integration/checkpoints.js", ARTIFACTS / "checkpoints", 140)
    assert results["passed"] == 8
    for shot in ("chat-rewind-buttons", "rewind-diff-and-confirm", "rewind-checkpoint-picker", "rewind-overwrite-my-changes", "rewound-files", "rewound-conversation-fork", "rewind-one-file-diff"):
        assert (ARTIFACTS / "checkpoints" / f"{shot}.png").is_file(), shot
    assert (tmp_path / "http" / "config.py").read_text() == "retries = 7\n"
