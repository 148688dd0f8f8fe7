"""A real VS Code and a real Neovim attached to one live session (issue 18, D-4 and D-5).

Both start the way a person's editors do (`dshd connect`, the default) on the same workspace,
so they reach one shared daemon. VS Code runs its half as an integration suite inside its
extension host (editors/vscode/test/integration/twoEditors.ts, driven through
editors/vscode/scripts/run-vscode-tests.mjs); Neovim is driven from here with pynvim
(editors/nvim/tests/nvim_harness.py). The halves take turns through files in a folder both see.
Proven: each names the other as attached; each sees the other's prompt and the reply; a plan
review goes to both and the first answer counts, from either side (Neovim first, then VS Code),
the other's window closing with one line saying who answered what.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXT = REPO / "editors" / "vscode"
CACHE = Path(os.environ.get("DSHD_VSCODE_CACHE", REPO / ".cache" / "vscode"))
NODE = CACHE / "node24" / "bin" / "node"
VSCODE_SERVER = CACHE / "cs" / "node_modules" / "code-server" / "lib" / "vscode" / "out" / "server-main.js"
ARTIFACTS = REPO / "artifacts"

sys.path.insert(0, str(REPO / "editors" / "nvim" / "tests"))
from nvim_harness import daemon_pids, runtime_dir, shared_editor, write_artifact  # noqa: E402

missing = [p for p in (NODE, VSCODE_SERVER, EXT / "node_modules") if not p.exists()]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"VS Code toolchain not installed ({missing[0] if missing else ''}): run ./run setup"),
    pytest.mark.slow,
]


def plan(title: str, *steps: str) -> dict:
    text = f"# {title}\n\n" + "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1))
    return {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": text}}]}


REPLIES = [
    {"text": "Hello, Neovim: VS Code is here too."},  # Neovim's prompt
    {"text": "Hello, VS Code."},  # VS Code's prompt
    plan("Plan: retries", "Add a RetryPolicy.", "Wrap send() in it."),  # Neovim approves first
    {"text": "Approved in Neovim: starting."},
    plan("Plan: a cache", "Measure first.", "Add an LRU cache."),  # VS Code approves first
    {"text": "Approved in VS Code: measuring."},
]

CONFIG = """\
plugins = ["plan", "goals"]

[plan]
section = "Plan first. Do not change files yet: propose a plan with exit_plan_mode and wait for approval."

[model]
provider = "scripted"
script = "script.json"

[daemon]
idleTimeoutS = 5
"""

# Quiet workbench for screenshots: no welcome page, no chat side bar.
WORKBENCH_SETTINGS = {
    "workbench.startupEditor": "none", "chat.disableAIFeatures": True, "workbench.tips.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
}


class Turns:
    """The file-based hand-over between the two halves."""

    def __init__(self, folder: Path, vscode: subprocess.Popen) -> None:
        self.folder = folder
        self.vscode = vscode

    def done(self, step: str, **data) -> None:
        tmp = self.folder / f"{step}.json.tmp"
        tmp.write_text(json.dumps(data))
        tmp.rename(self.folder / f"{step}.json")

    def wait(self, step: str, timeout: float = 120.0) -> dict:
        file = self.folder / f"{step}.json"
        deadline = time.monotonic() + timeout
        while not file.exists():
            assert self.vscode.poll() is None, f"VS Code's half ended before its step {step!r}"
            assert time.monotonic() < deadline, f"VS Code never reached its step {step!r}"
            time.sleep(0.1)
        return json.loads(file.read_text())


def chat_text(editor) -> str:
    return editor.lua(
        "local out = {} for _, v in pairs(require('dsh.chat').views()) do "
        "vim.list_extend(out, vim.api.nvim_buf_get_lines(v.buf, 0, -1, false)) end return table.concat(out, '\\n')"
    )


def wait_until(what: str, probe, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_vscode_and_neovim_on_one_session(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".dsh").mkdir(parents=True)
    (workspace / ".dsh" / "config.toml").write_text(CONFIG)
    (workspace / "script.json").write_text(json.dumps({"replies": REPLIES}))
    (workspace / ".vscode").mkdir()
    dshd = Path(sys.executable).with_name("dshd")
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({**WORKBENCH_SETTINGS, "dsh.server.command": str(dshd)}))
    runtime = runtime_dir()
    turns_dir = Path(tempfile.mkdtemp(prefix="dsh-turns-"))
    own_artifacts = tmp_path / "vscode-artifacts"
    env = {**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "XDG_RUNTIME_DIR": str(runtime), "DSHD_TWO_EDITORS_COORD": str(turns_dir)}
    subprocess.run([str(NODE), "scripts/build.mjs"], cwd=EXT, env=env, check=True, capture_output=True, timeout=180)
    vscode = subprocess.Popen(
        [str(NODE), "scripts/run-vscode-tests.mjs", "--workspace", str(workspace), "--suite", "out/integration/twoEditors.js",
         "--artifacts", str(own_artifacts), "--timeout", "300"],
        cwd=EXT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    turns = Turns(turns_dir, vscode)
    editor = None
    failure: BaseException | None = None
    out = ""
    try:
        # VS Code made the session; Neovim opens it (its own `dshd connect`, the same daemon).
        handed = turns.wait("vscode-session")
        session_id, vscode_name = handed["sessionId"], handed["clientName"]
        editor = shared_editor(workspace, runtime, "Neovim")
        editor.typed(f"Dsh session open {session_id}")
        editor.wait_for(f"select(2, require('dsh').current()) == '{session_id}'", what="the session open in Neovim")
        assert len(daemon_pids(runtime)) == 1, "the two editors reached two daemons"
        editor.wait_for(f"vim.tbl_contains(require('dsh.state').others(), '{vscode_name}')", what="VS Code named in Neovim")
        editor.typed("Dsh chat")
        editor.wait_for("next(require('dsh.chat').views()) ~= nil", what="Neovim's chat")
        editor.typed("Dsh prompt Hello from Neovim")
        wait_until("the reply in Neovim's chat", lambda: "Hello, Neovim" in chat_text(editor))
        turns.done("nvim-prompted")

        # VS Code's prompt, typed in its chat box, shows in Neovim's chat with its reply.
        turns.wait("vscode-prompted")
        wait_until("VS Code's prompt in Neovim's chat", lambda: "Hello from VS Code" in chat_text(editor))
        wait_until("the reply in Neovim's chat", lambda: "Hello, VS Code." in chat_text(editor))
        write_artifact("two-editors-chat.txt", chat_text(editor) + "\n")
        turns.done("nvim-saw-vscode")

        # A plan review asked of both; Neovim answers first.
        editor.typed("Dsh plan on")
        editor.wait_for("require('dsh').plan_active()", what="plan mode on in Neovim")
        editor.typed("Dsh prompt Plan retries for the client")
        editor.wait_for("#require('dsh.review').list() == 1", timeout=30, what="the review in Neovim")
        turns.done("nvim-review-open")
        turns.wait("vscode-review-open")  # VS Code shows it too before Neovim answers
        editor.typed("Dsh answer")
        editor.wait_for("(function() local x = require('dsh.review').list()[1]; "
                        "return x ~= nil and vim.api.nvim_get_current_win() == x.win end)()", what="the review float, focused")
        time.sleep(0.6)  # the float's guard against keys already in flight
        editor.feed("a")
        editor.wait_for("#require('dsh.review').list() == 0", what="Neovim's review to close")
        turns.wait("vscode-saw-approval")

        # The next review: VS Code answers first; Neovim's window closes and says who approved.
        editor.wait_for("#require('dsh.review').list() == 1", timeout=60, what="the second review in Neovim")
        turns.done("nvim-has-review")
        turns.wait("vscode-approved")
        editor.wait_for("#require('dsh.review').list() == 0", what="Neovim's review to close on VS Code's answer")
        said = wait_until("the one line in Neovim", lambda: [m for m in editor.messages() if f"approved by {vscode_name}" in m])
        assert any("Plan: a cache" in m for m in said), said
        turns.done("nvim-saw-resolution")
        out, _ = vscode.communicate(timeout=120)
    except Exception as exc:  # noqa: BLE001 - said again below with what VS Code's half printed
        failure = exc
    finally:
        if editor is not None:
            editor.close()
        if vscode.poll() is None:
            vscode.kill()
        if not out:
            out = vscode.communicate()[0] or ""
        if own_artifacts.exists():
            shutil.copytree(own_artifacts, ARTIFACTS / "vscode" / "two-editors", dirs_exist_ok=True)
        shutil.rmtree(turns_dir, ignore_errors=True)
    results_file = own_artifacts / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else None
    assert failure is None, f"{failure}\nVS Code's half:\n{out[-6000:]}"
    assert vscode.returncode == 0, f"VS Code's half failed ({vscode.returncode}):\n{out[-6000:]}"
    assert results and results["failed"] == 0 and results["passed"] == 5, results
    # The daemon the two shared exits by itself once both have gone ([daemon] idleTimeoutS = 5).
    wait_until("the shared daemon to exit", lambda: not daemon_pids(runtime), timeout=30)
    shutil.rmtree(runtime, ignore_errors=True)
