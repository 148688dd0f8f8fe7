"""Who did what with three real editors on one session: a VS Code (code-server, the suite
editors/vscode/test/integration/attribution.ts) and two Neovim TUIs in tmux, all through the
workspace's one shared daemon. Neovim A prompts, VS Code prompts, Neovim B approves the edit
VS Code's prompt asked for. Each screen reads the others' acts by name and its own as "You":
VS Code's chat says "From Neovim (pid …)" and "approved in Neovim (pid …)"; both Neovims say
"From VS Code — ws"; Neovim A reads B's approval by B's name, B reads it as its own.
Screenshot in artifacts/vscode/attribution, pane captures in artifacts/nvim/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.editors.vscode.test_vscode import ARTIFACTS, EXT, built, run_real_vscode, write_settings  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import PLUGIN_DIR, dshd_binary, nvim_binary, write_artifact  # noqa: E402
from tests.editors.nvim.test_nvim_attribution import Tmux  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.editor]

EDIT = {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "from VS Code\n"}}]}


def wait_file(path: Path, timeout: float, thread: threading.Thread) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert thread.is_alive() or path.exists(), f"VS Code's suite ended before writing {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout}s"
        time.sleep(0.2)
    return path.read_text()


def test_vscode_and_two_neovims_read_each_others_acts_by_name(built, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI capture needs it")
    workspace = tmp_path / "ws"
    (workspace / ".dsh").mkdir(parents=True)
    shutil.copy(EXT / "test" / "integration" / "fixture" / "shared-config.toml", workspace / ".dsh" / "config.toml")
    replies = [{"text": "Hello, Neovim A."}, EDIT, {"text": "Written."}]
    (workspace / "script.json").write_text(json.dumps({"replies": replies}))
    write_settings(workspace, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd"))})
    run_dir = Path(tempfile.mkdtemp(prefix="dsh-who-"))  # short: a socket path has at most 107 bytes
    outcome: dict = {}

    def vscode() -> None:
        try:
            outcome["results"] = run_real_vscode(workspace, "out/integration/attribution.js", ARTIFACTS / "attribution", 300,
                                                 env={"XDG_RUNTIME_DIR": str(run_dir)})
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc

    thread = threading.Thread(target=vscode, daemon=True)
    thread.start()
    who = workspace / ".who"
    screens: dict[str, Tmux] = {}
    try:
        session_id = wait_file(who / "session", 180, thread)
        init = tmp_path / "init.lua"
        init.write_text(
            f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
require('dsh').setup({{ dshd = {json.dumps(dshd_binary())}, notify_turns = false }})
""",
            encoding="utf-8",
        )
        for side in "ab":
            screens[side] = Tmux(f"dsh-who3-{side}-{os.getpid()}", workspace,
                                 ["env", "TERM=xterm-256color", f"XDG_RUNTIME_DIR={run_dir}", nvim_binary(), "-n", "-i", "NONE", "-u", str(init)],
                                 width=170)
        a, b = screens["a"], screens["b"]
        for tui in screens.values():
            tui.wait_for("~")
            tui.keys(f":Dsh session open {session_id}", "Enter")
            tui.wait_for("◎ no goal", timeout=60)
            tui.keys(":Dsh chat", "Enter")
        # Each statusline names the others attached: the Neovim there is the other one.
        pattern = r"Neovim \(pid \d+\)"
        names = {"a": re.search(pattern, b.wait_for("Neovim (pid", timeout=30)).group(0),
                 "b": re.search(pattern, a.wait_for("Neovim (pid", timeout=30)).group(0)}
        assert names["a"] != names["b"]
        a.keys(":Dsh prompt hello from Neovim A", "Enter")
        a.wait_for("Hello, Neovim A.", timeout=60)
        (who / "names").write_text(json.dumps(names))

        # VS Code prompts; its edit is asked of everyone; B allows it.
        wait_file(who / "prompted", 180, thread)
        vs_name = "VS Code — ws"
        for tui in (a, b):
            tui.wait_for(f"## From {vs_name}", timeout=60)
        b.wait_for("waiting for you", timeout=60)
        b.keys(":Dsh answer", "Enter")
        time.sleep(0.8)  # the float's guard against a key meant for the window below
        b.keys("a")
        screen_a = a.wait_for(f"approved in {names['b']}", timeout=60)
        screen_b = b.wait_for("You allowed write_file once", timeout=60)
        wait_file(who / "vscode-done", 180, thread)
        time.sleep(0.5)
        screen_a, screen_b = a.screen(), b.screen()
        write_artifact("who3-neovim-a.txt", screen_a)
        write_artifact("who3-neovim-b.txt", screen_b)
        assert "## You" in screen_a and f"## From {vs_name}" in screen_a
        assert f"## From {names['a']}" in screen_b and f"## From {vs_name}" in screen_b and "## You" not in screen_b
        assert "You allowed" not in screen_a
        thread.join(360)
        assert "error" not in outcome, outcome.get("error")
        assert outcome["results"]["passed"] == 2
        seen = (who / "vscode-done").read_text()
        assert f"approved in {names['b']}" in seen and "You allowed" not in seen
        assert re.search(rf"From {re.escape(names['a'])}", seen)
    finally:
        for tui in screens.values():
            tui.keys(":qa!", "Enter")
        time.sleep(0.5)
        for tui in screens.values():
            tui.kill()
        thread.join(360)
        for lock in (run_dir / "dshd").glob("*.lock") if (run_dir / "dshd").is_dir() else []:
            pid = lock.read_text().strip()
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").exists() and b"daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
                import signal

                os.kill(int(pid), signal.SIGTERM)
        shutil.rmtree(run_dir, ignore_errors=True)
