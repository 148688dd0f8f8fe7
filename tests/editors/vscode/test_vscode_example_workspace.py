"""The example workspace's README (examples/workspace) in a real VS Code against the real dshd
(editors/vscode/test/integration/exampleWorkspace.ts): on a copy of the folder, trusted, with
its own scripted model and MCP server: the plan sent back and approved, the goal's edits allowed
on their cards, the MCP cards with the server's answers, the status bar's tokens, and "Rewind to
here" on the edit putting http/client.py back. Screenshots in artifacts/vscode/example."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.sandbox_support import needs_sandbox

from .test_vscode import ARTIFACTS, OWN_DAEMON, built, pytestmark as toolchain, run_real_vscode, write_settings  # noqa: F401

pytestmark = [toolchain, pytest.mark.editor, needs_sandbox]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace"


@pytest.mark.timeout(300)
def test_real_vscode_walks_the_example_readme(built, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, workspace, ignore=shutil.ignore_patterns("sessions", "checkpoints.git", "__pycache__"))
    original = (workspace / "http" / "client.py").read_text()
    write_settings(workspace, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON})
    results = run_real_vscode(workspace, "out/integration/exampleWorkspace.js", ARTIFACTS / "example", 220)
    assert results["passed"] == 4, results
    for shot in ("example-mcp-cards", "example-rewind-dialog", "example-rewound"):
        assert (ARTIFACTS / "example" / f"{shot}.png").is_file(), shot
    assert (workspace / "http" / "client.py").read_text() == original  # rewound
