"""The workspace's shared daemon restarted from a real VS Code (editors/vscode/test/integration/
daemonRestart.ts): the window whose model differs from the daemon's is told the key, what is in
force and the ways out; "DSH: Restart Workspace Daemon" runs `dshd daemon restart`: a new daemon
pid, this window back on its session first (no notice then), the other client (a real `dshd
connect`) told and its forwarder ended with status 1, a prompt in the same session answered.
Screenshots in artifacts/vscode/daemon-restart."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.editors.vscode.test_vscode import ARTIFACTS, EXT, built, run_real_vscode, write_settings  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.editor]


def test_real_vscode_restarts_the_workspace_daemon_and_reattaches(built, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".dsh").mkdir(parents=True)
    shutil.copy(EXT / "test" / "integration" / "fixture" / "shared-config.toml", workspace / ".dsh" / "config.toml")
    (workspace / "script.json").write_text(json.dumps({"replies": [{"text": "still here"}] * 4}))
    write_settings(workspace, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd")), "dsh.model.name": "model-x"})
    run_dir = Path(tempfile.mkdtemp(prefix="dsh-rt-"))  # short: a socket path has at most 107 bytes
    try:
        results = run_real_vscode(workspace, "out/integration/daemonRestart.js", ARTIFACTS / "daemon-restart", 300,
                                  env={"XDG_RUNTIME_DIR": str(run_dir)})
        assert results["passed"] == 2
    finally:
        for lock in (run_dir / "dshd").glob("*.lock") if (run_dir / "dshd").is_dir() else []:
            pid = lock.read_text().strip()
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").exists() and b"daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
                import os
                import signal

                os.kill(int(pid), signal.SIGTERM)
        shutil.rmtree(run_dir, ignore_errors=True)
