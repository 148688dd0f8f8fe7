"""Who did what, in Neovim's own terminal UI: two Neovims (tmux) with the plugin's default
names ("Neovim (pid <pid>)") on one session of the workspace's shared daemon. Each chat
says "You" for its own prompt and names the other Neovim for the other's; a plan review
approved in B reads "approved in <B>" in A's chat and "approved" in B's. What each screen
showed is kept under artifacts/nvim/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import PLUGIN_DIR, dshd_binary, nvim_binary, runtime_dir, stop_daemons, write_artifact  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.editor]

PLAN = "# Plan: retries\n\n1. Add a retry loop\n2. Test it\n"
CONFIG = """\
plugins = ["plan", "goals", "tools"]

[daemon]
idleTimeoutS = 2

[model]
provider = "scripted"
script = "script.json"
"""


def unit_editor_name(tmp_path: Path, client_name: str | None) -> str:
    """The name the plugin sends at initialize, read from a headless Neovim."""
    import subprocess

    setup = "{}" if client_name is None else "{ client_name = %s }" % json.dumps(client_name)
    script = (
        f"vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))}); require('dsh').setup({setup});"
        " local cfg = require('dsh.config').client_config(vim.fn.getcwd());"
        " local p = { clientInfo = { name = 'Neovim', version = '0.11' } }; cfg.before_init(p, cfg);"
        " io.stdout:write(p.clientInfo.name .. '|' .. vim.fn.getpid())"
    )
    out = subprocess.run([nvim_binary(), "--clean", "--headless", "-n", "-i", "NONE", "--cmd", f"lua {script}", "+qa!"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr


def test_the_default_name_tells_two_neovims_apart_and_a_set_name_wins(tmp_path):
    said = unit_editor_name(tmp_path, None)
    name, pid = said.rsplit("|", 1)
    assert name == f"Neovim (pid {pid})", said
    assert unit_editor_name(tmp_path, "  laptop  ").startswith("laptop|")


class Tmux:
    """Neovim's own TUI in a detached tmux session, read with capture-pane."""

    def __init__(self, name: str, cwd: Path, command: list[str], width: int = 110, height: int = 45):
        import shlex
        import subprocess

        self.subprocess = subprocess
        self.tmux = shutil.which("tmux")
        self.name = name
        subprocess.run([self.tmux, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), "-c", str(cwd),
                        " ".join(shlex.quote(c) for c in command)], check=True)

    def keys(self, *keys: str) -> None:
        self.subprocess.run([self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return self.subprocess.run([self.tmux, "capture-pane", "-p", "-t", self.name], check=True,
                                   capture_output=True, text=True).stdout

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not on screen after {timeout}s:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        self.subprocess.run([self.tmux, "kill-session", "-t", self.name], check=False)


def test_tui_two_neovims_read_each_others_acts_by_name(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI capture needs it")
    workspace = tmp_path / "ws"
    (workspace / ".dsh").mkdir(parents=True)
    (workspace / ".dsh" / "config.toml").write_text(CONFIG, encoding="utf-8")
    replies = [{"text": "Hello, A."}, {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}, {"text": "On it."}]
    (workspace / "script.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    runtime = runtime_dir()
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
    screens = {
        side: Tmux(f"dsh-who-{side}-{os.getpid()}", workspace,
                   ["env", "TERM=xterm-256color", f"XDG_RUNTIME_DIR={runtime}", nvim_binary(), "-n", "-i", "NONE", "-u", str(init)])
        for side in "ab"
    }
    a, b = screens["a"], screens["b"]
    try:
        a.wait_for("~")
        b.wait_for("~")
        a.keys(":Dsh session new", "Enter")
        a.wait_for("◎ no goal")
        [session_dir] = (workspace / ".dsh" / "sessions").iterdir()
        b.keys(f":Dsh session open {session_dir.name}", "Enter")
        # Each statusline names the other Neovim by its pid: the names a person tells apart.
        name_a = re.search(r"with (Neovim \(pid \d+\))", b.wait_for("with Neovim (pid")).group(1)
        name_b = re.search(r"with (Neovim \(pid \d+\))", a.wait_for("with Neovim (pid")).group(1)
        assert name_a != name_b
        for tui in (a, b):
            tui.keys(":Dsh chat", "Enter")
        a.keys(":Dsh prompt hello from A", "Enter")
        a.wait_for("Hello, A.")
        screen_b = b.wait_for("Hello, A.")
        screen_a = a.screen()
        write_artifact("tui-who-prompt-a.txt", screen_a)
        write_artifact("tui-who-prompt-b.txt", screen_b)
        assert "## You" in screen_a and f"From {name_a}" not in screen_a
        assert f"## From {name_a}" in screen_b and "## You" not in screen_b

        # A plan review asked in both; B approves it.
        a.keys(":Dsh plan on", "Enter")
        a.wait_for("◎ plan")
        a.keys(":Dsh prompt add retries", "Enter")
        a.wait_for("keep planning")
        b.wait_for("keep planning")
        b.keys(":Dsh answer", "Enter")
        time.sleep(0.8)  # the float's guard against a key meant for the window below
        b.keys("a")
        screen_a = a.wait_for(f"approved in {name_b}")
        screen_b = b.wait_for("On it.")
        time.sleep(0.5)
        screen_a, screen_b = a.screen(), b.screen()
        write_artifact("tui-who-approved-a.txt", screen_a)
        write_artifact("tui-who-approved-b.txt", screen_b)
        assert f"approved in {name_b}" in screen_a
        assert "approved in" not in screen_b and "approved" in screen_b
        events = [json.loads(line) for line in (session_dir / "log.jsonl").read_text().splitlines()]
        assert [e["data"].get("client") for e in events if e["type"] == "user/message" and e["data"]["source"] == "user"] == [name_a, name_a]
        [review] = [e["data"]["review"] for e in events if e["type"] == "tool/result" and "review" in e["data"]]
        assert review == {"outcome": "approved", "client": name_b}
    finally:
        for tui in screens.values():
            tui.keys(":qa!", "Enter")
        time.sleep(0.5)
        for tui in screens.values():
            tui.kill()
        stop_daemons(runtime, wait_s=10)
