"""A long session's chat view in a real VS Code against the real dshd and the scripted model
(editors/vscode/test/integration/chatPages.ts): it opens on the newest page, "Show earlier
messages" loads the pages before it in order until the first item, and a new turn's live
upserts land at the end. Screenshots in artifacts/vscode/chat-pages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from long_session import write_long_session  # noqa: E402

from .test_vscode import ARTIFACTS, OWN_DAEMON, built, pytestmark as toolchain, run_real_vscode, write_settings  # noqa: E402,F401

pytestmark = [toolchain, pytest.mark.slow]

CONFIG = 'plugins = ["plan", "goals"]\n\n[model]\nprovider = "scripted"\nscript = "script.json"\n'


def test_real_vscode_chat_pages(built, tmp_path: Path) -> None:
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / "config.toml").write_text(CONFIG)
    (tmp_path / "script.json").write_text(json.dumps({"replies": [{"text": "a live reply"}]}))
    write_long_session(tmp_path, 800)
    write_settings(tmp_path, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON})
    results = run_real_vscode(tmp_path, "out/integration/chatPages.js", ARTIFACTS / "chat-pages", 240)
    assert results["passed"] == 3
