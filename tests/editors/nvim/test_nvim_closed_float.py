"""A question's float that closes by itself, and the chat buffer reloaded, in Neovim's TUI.

Neovim's own terminal UI runs in tmux (keys are sent as a terminal sends them, the
screen is read with capture-pane) on a workspace's shared daemon; a second, headless
Neovim is the other client on the same session. The TUI Neovim also listens on a socket
so the test can read its state (mode, buffers, the chat's lines) without typing into it.

- The other client approves the plan review first: the float open in the TUI closes,
  and the keys pressed right after (`a`, `x`, `dd`, meant for the review) go nowhere.
- `:e!` and `:edit` in the chat window: the chat comes back whole.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pynvim
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import (  # noqa: E402
    PLUGIN_DIR,
    dshd_binary,
    nvim_binary,
    runtime_dir,
    shared_editor,
    stop_daemons,
    write_artifact,
)

from editors.nvim.test_nvim_daemon import Tmux  # noqa: E402

pytestmark = pytest.mark.slow

IDLE_S = 2
PLAN = "# Plan: retries\n\n1. Add a retry loop\n2. Test it\n"
EXIT_WITH_PLAN = {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}

CONFIG = f"""\
plugins = ["plan", "goals", "tools"]

[daemon]
idleTimeoutS = {IDLE_S}

[model]
provider = "scripted"
script = "script.json"
"""

# The chat's lines as its builder lays out the items it holds, in a scratch buffer: what
# the chat shows when no key touched it.
RENDERED = """
local view = require('dsh.chat').views()[select(2, require('dsh').current())]
local scratch = vim.api.nvim_create_buf(false, true)
local builder = require('dsh.chat.builder').attach(scratch)
builder:reset(view.store:items())
local lines = vim.api.nvim_buf_get_lines(scratch, 0, -1, false)
vim.api.nvim_buf_delete(scratch, { force = true })
return lines
"""

CHAT = "require('dsh.chat').views()[select(2, require('dsh').current())]"


class TuiNeovim:
    """Neovim's TUI in tmux, also reachable on a socket for reading its state."""

    def __init__(self, tmp_path: Path, workspace: Path, runtime: Path, name: str) -> None:
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed: the TUI capture needs it")
        init = tmp_path / "init-tui.lua"
        init.write_text(
            f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
require('dsh').setup({{ dshd = {json.dumps(dshd_binary())}, client_name = {json.dumps(name)}, notify_turns = false }})
""",
            encoding="utf-8",
        )
        self.socket = runtime / "tui.sock"
        self.tmux = Tmux(f"dsh-closed-{os.getpid()}", workspace,
                         ["env", "TERM=xterm-256color", f"XDG_RUNTIME_DIR={runtime}",
                          nvim_binary(), "-n", "-i", "NONE", "--listen", str(self.socket), "-u", str(init)],
                         width=110, height=34)
        self.tmux.wait_for("~")
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            assert time.monotonic() < deadline, "the TUI Neovim never listened"
            time.sleep(0.05)
        self.nvim = pynvim.attach("socket", path=str(self.socket))

    def lua(self, code: str, *args):
        return self.nvim.exec_lua(code, *args)

    def wait_for(self, lua_expr: str, timeout: float = 30.0, what: str = "") -> object:
        deadline = time.monotonic() + timeout
        while True:
            value = self.lua(f"return {lua_expr}")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or lua_expr}:\n{self.tmux.screen()}")
            time.sleep(0.02)

    def mode(self) -> str:
        return self.nvim.api.get_mode()["mode"]

    def chat_lines(self) -> list[str]:
        return self.lua(f"local v = {CHAT}; return vim.api.nvim_buf_get_lines(v.buf, 0, -1, false)")

    def ticks(self) -> dict[str, int]:
        """b:changedtick of every buffer but the chat's (which the daemon's items change)."""
        return self.lua(
            f"local chat = {CHAT}.buf; local out = {{}};"
            " for _, b in ipairs(vim.api.nvim_list_bufs()) do"
            "  if b ~= chat and vim.api.nvim_buf_is_loaded(b) then"
            "   out[tostring(b) .. ' ' .. vim.api.nvim_buf_get_name(b)] = vim.b[b].changedtick end end;"
            " return out"
        )

    def close(self) -> None:
        try:
            self.nvim.close()
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.tmux.keys("Escape", ":qa!", "Enter")
        time.sleep(0.5)
        self.tmux.kill()


@pytest.fixture
def setting(tmp_path):
    """A workspace with a scripted model, its private runtime folder, and what was opened."""
    runtime = runtime_dir()
    opened = []
    yield tmp_path, runtime, opened
    problems = []
    for thing in opened:
        if hasattr(thing, "lua_errors"):
            problems += thing.lua_errors()
        thing.close()
    stop_daemons(runtime, wait_s=IDLE_S + 8)
    assert not problems, problems


def workspace_with(tmp_path: Path, replies: list[dict]) -> Path:
    root = tmp_path / "ws"
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(CONFIG, encoding="utf-8")
    (root / "script.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    (root / "notes.txt").write_text("first line\nsecond line\n", encoding="utf-8")
    return root


def open_chat_with_session(tui: TuiNeovim) -> str:
    tui.tmux.keys(":Dsh session new", "Enter")
    tui.tmux.wait_for("◎ no goal")
    tui.tmux.keys(":Dsh chat", "Enter")
    tui.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true) ~= nil", what="the chat window")
    return tui.lua("return select(2, require('dsh').current())")


def prompt_in_chat(tui: TuiNeovim, text: str) -> None:
    # (<C-s> is flow control on many terminals: <CR> in Normal mode sends.)
    tui.tmux.keys("i", text, "Escape", "Enter")


def test_keys_right_after_another_client_answered_go_nowhere(setting):
    tmp_path, runtime, opened = setting
    # The reply after the approval is slow: the chat holds still while the keys are checked.
    workspace = workspace_with(tmp_path, [{"text": "ready to plan"}, EXIT_WITH_PLAN, {"text": "on it", "delayMs": 4000}])
    tui = TuiNeovim(tmp_path, workspace, runtime, "nvim A")
    opened.append(tui)
    session_id = open_chat_with_session(tui)
    other = shared_editor(workspace, runtime, "nvim B")
    opened.append(other)
    other.typed(f"Dsh session open {session_id}")
    other.wait_for(f"select(2, require('dsh').current()) == '{session_id}'", timeout=30, what="B on the session")

    # Control: with no float closing, `a` in the chat starts Insert mode (the probe sees it).
    prompt_in_chat(tui, "hello")
    tui.tmux.wait_for("ready to plan")
    tui.wait_for("not require('dsh.state').busy()", what="the first turn over")
    tui.tmux.keys("a")
    tui.wait_for("vim.api.nvim_get_mode().mode == 'i'", timeout=5, what="Insert mode from `a` (control)")
    tui.tmux.keys("Escape")
    tui.wait_for("vim.api.nvim_get_mode().mode == 'n'", timeout=5)

    tui.tmux.keys(":Dsh plan on", "Enter")
    tui.tmux.wait_for("◎ plan · no goal")
    prompt_in_chat(tui, "add retries")
    tui.wait_for("#require('dsh.review').list() == 1", what="A's plan review")
    other.wait_for("#require('dsh.review').list() == 1", timeout=30, what="B's plan review")
    # The person in A goes to the review and reads it.
    tui.tmux.keys(":Dsh answer", "Enter")
    tui.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win", what="A's float focused")
    chat_win = tui.lua(f"return vim.fn.win_findbuf({CHAT}.buf)[1]")
    write_artifact("tui-closed-float-1-review-open.txt", tui.tmux.screen())
    ticks_before = tui.ticks()

    # B approves first; A's float closes under the person, who presses `a` (and `x`, `dd`).
    other.typed("Dsh answer")
    other.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win", what="B's float focused")
    time.sleep(0.6)
    other.feed("a")
    tui.wait_for("#require('dsh.review').list() == 0", timeout=20, what="A's float to close")
    tui.tmux.keys("a")
    tui.tmux.keys("x")
    tui.tmux.keys("d", "d")
    screen = tui.tmux.wait_for("approved by nvim B")
    write_artifact("tui-closed-float-2-answered-elsewhere.txt", screen)
    time.sleep(0.3)
    assert tui.mode() == "n", tui.tmux.screen()
    assert "The keys you press now do nothing" in screen, screen

    # The notice goes by itself; the person is back in the chat, in Normal mode, nothing edited.
    screen = tui.tmux.wait_gone("The keys you press now do nothing", timeout=10)
    write_artifact("tui-closed-float-3-after.txt", screen)
    assert tui.lua("return vim.api.nvim_get_current_win()") == chat_win
    assert tui.mode() == "n"
    assert tui.lua(f"return {CHAT}.builder:prompt_lines()") == [""]
    ticks_after = tui.ticks()
    assert ticks_after and all(ticks_before.get(name) == tick for name, tick in ticks_after.items()), ticks_after
    assert tui.lua("return vim.tbl_filter(function(b) return vim.bo[b].modified end, vim.api.nvim_list_bufs())") == []
    tui.wait_for("not require('dsh.state').busy()", timeout=30, what="the turn over")
    tui.tmux.wait_for("on it")
    assert tui.chat_lines() == tui.lua(RENDERED)
    assert "add retries" in "\n".join(tui.chat_lines())
    # The plan was approved, by B's answer.
    events = [json.loads(line) for line in
              (workspace / ".dsh" / "sessions" / session_id / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call" and e["data"]["name"] == "exit_plan_mode"}
    results = [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["callId"] in calls]
    assert [r["ok"] for r in results] == [True]

    # Control once more: now the same key does what it always does.
    tui.tmux.keys("a")
    tui.wait_for("vim.api.nvim_get_mode().mode == 'i'", timeout=5, what="Insert mode from `a` (control)")
    tui.tmux.keys("Escape")


def test_e_bang_and_edit_in_the_chat_bring_it_back_whole(setting):
    tmp_path, runtime, opened = setting
    workspace = workspace_with(tmp_path, [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}])
    tui = TuiNeovim(tmp_path, workspace, runtime, "nvim A")
    opened.append(tui)
    open_chat_with_session(tui)
    prompt_in_chat(tui, "first question")
    tui.tmux.wait_for("first answer")
    tui.wait_for("not require('dsh.state').busy()", what="the first turn over")
    prompt_in_chat(tui, "second question")
    tui.tmux.wait_for("second answer")
    tui.wait_for("not require('dsh.state').busy()", what="the second turn over")
    # A draft in the prompt area is kept too.
    tui.tmux.keys("i", "a draft", "Escape")
    tui.wait_for(f"{CHAT}.builder:prompt_lines()[1] == 'a draft'", timeout=5)
    tui.wait_for("vim.api.nvim_get_mode().mode == 'n'", timeout=5)
    tui.tmux.wait_gone("-- INSERT --", timeout=5)
    before = tui.chat_lines()
    write_artifact("tui-chat-before-e-bang.txt", tui.tmux.screen())
    assert any("second answer" in line for line in before)

    for command in ("e!", "edit", "e"):
        tui.tmux.keys(f":{command}", "Enter")
        time.sleep(0.5)
        screen = tui.tmux.screen()
        write_artifact(f"tui-chat-after-{command.replace('!', '-bang')}.txt", screen)
        assert tui.chat_lines() == before, (command, tui.chat_lines())
        assert "second answer" in screen and "first question" in screen, screen
        assert tui.lua("return vim.api.nvim_buf_get_name(0)").startswith("dsh://chat/")
    # Still a live chat: the next item arrives in the same buffer, the draft sent with it.
    tui.tmux.keys("Enter")
    tui.tmux.wait_for("a draft")
    tui.wait_for("not require('dsh.state').busy()", what="the third turn over")
    tui.tmux.wait_for("third answer")
    assert tui.chat_lines() == tui.lua(RENDERED)

    # The transcript (the session's log, read-only) is read again by `:e!` too.
    tui.tmux.keys(":Dsh transcript", "Enter")
    tui.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://transcript/', 1, true) ~= nil", what="the transcript")
    tui.wait_for("vim.iter(vim.api.nvim_buf_get_lines(0, 0, -1, false))"
                 ":any(function(l) return l:find('third answer', 1, true) end)", what="the transcript read")
    transcript = tui.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    tui.tmux.keys(":e!", "Enter")
    tui.wait_for("#vim.api.nvim_buf_get_lines(0, 0, -1, false) >= " + str(len(transcript)), timeout=10,
                 what="the transcript read again")
    assert tui.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == transcript
    write_artifact("tui-transcript-after-e-bang.txt", tui.tmux.screen())


def test_an_approval_answered_in_the_other_neovim_takes_no_key_of_this_one(setting):
    """The same for an approval, in two headless Neovims: B allows the edit first; the `a`,
    `x` and `dd` typed in A right after its float closed change nothing, and A's `a` right
    after the notice left starts Insert mode as usual (the control)."""
    tmp_path, runtime, opened = setting
    workspace = workspace_with(tmp_path, [
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}]},
        {"text": "done", "delayMs": 3000},
    ])
    a, b = shared_editor(workspace, runtime, "nvim A"), shared_editor(workspace, runtime, "nvim B")
    opened += [a, b]
    a.typed("Dsh session new")
    a.wait_for("require('dsh').current() ~= nil", timeout=30, what="a session")
    session_id = a.lua("return select(2, require('dsh').current())")
    b.typed(f"Dsh session open {session_id}")
    b.wait_for(f"select(2, require('dsh').current()) == '{session_id}'", timeout=30)
    a.cmd("edit notes.txt")
    notes = a.lua("return vim.api.nvim_get_current_buf()")
    a.typed("Dsh prompt write a file")
    for editor in (a, b):
        editor.wait_for("#require('dsh.approvals').list() == 1", timeout=30, what="the approval float")
        editor.typed("Dsh answer")
        editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.approvals').list()[1].win")
    time.sleep(0.6)
    tick = a.lua("return vim.b[...].changedtick", notes)
    b.feed("a")
    a.wait_for("#require('dsh.approvals').list() == 0", timeout=20, what="A's float to close")
    a.feed("a")
    a.feed("x")
    a.feed("dd")
    assert a.nvim.api.get_mode()["mode"] == "n"
    # The notice has the focus (a float), saying who answered.
    assert a.lua("return vim.api.nvim_win_get_config(0).relative") == "editor"
    assert "allowed once by nvim B" in "\n".join(a.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    a.wait_for("vim.api.nvim_get_current_buf() == ...".replace("...", str(notes)), timeout=5,
               what="the focus back on notes.txt")
    assert a.nvim.api.get_mode()["mode"] == "n"
    assert a.lua("return vim.api.nvim_buf_get_lines(...)", notes, 0, -1, False) == ["first line", "second line"]
    assert a.lua("return vim.b[...].changedtick", notes) == tick
    assert a.lua("return vim.bo[...].modified", notes) is False
    assert any("allowed once by nvim B" in m for m in a.messages()), a.messages()
    assert (workspace / "a.txt").read_text(encoding="utf-8") == "x\n"
    # Control: the same key, with no float closing, does what it always does.
    a.feed("a")
    assert a.nvim.api.get_mode()["mode"] == "i"
    a.feed("<Esc>")


def test_the_notice_only_when_the_closing_float_had_the_focus():
    """dsh.float alone, in a headless Neovim: a focused float closed by itself leaves the
    notice (keys dropped, `q` closes it, the focus back where it was); an unfocused one,
    or one closed while the person is on the command line, leaves none."""
    from nvim_harness import Editor

    editor = Editor()
    try:
        editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'text'})")
        home = editor.lua("return vim.api.nvim_get_current_win()")
        make = ("local f = require('dsh.float'); local b = vim.api.nvim_create_buf(false, true);"
                " vim.api.nvim_buf_set_lines(b, 0, -1, false, {'question'});"
                " return f.open(b, { title = 'Q', enter = ... })")
        # Focused: the notice; a, x, dd do nothing; a multi-line text is shown whole.
        win = editor.lua(make, True)
        notice = editor.lua("return require('dsh.float').close_by_itself(..., 'answered\\nby B')", win)
        assert notice and editor.lua("return vim.api.nvim_get_current_win()") == notice
        assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, 2, false)") == ["answered", "by B"]
        editor.feed("a")
        editor.feed("x")
        editor.feed("dd")
        assert editor.nvim.api.get_mode()["mode"] == "n"
        assert editor.lua("return vim.api.nvim_get_current_win()") == notice
        editor.feed("q")
        editor.wait_for(f"vim.api.nvim_get_current_win() == {home}", timeout=2, what="the focus back home")
        assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["text"]
        assert editor.lua("return #vim.api.nvim_list_wins()") == 1
        # Not focused: no notice, the keys act where the person is.
        win = editor.lua(make, False)
        assert editor.lua("return require('dsh.float').close_by_itself(..., 'answered')", win) is None
        editor.feed("a")
        assert editor.nvim.api.get_mode()["mode"] == "i"
        editor.feed("<Esc>")
        # Focused, but the person is on the command line: no notice either.
        win = editor.lua(make, True)
        editor.lua("local w = ...; vim.keymap.set('c', '<F2>', function()"
                   " _G.closed = require('dsh.float').close_by_itself(w, 'answered') or false end)", win)
        editor.feed(":<F2><Esc>")
        assert editor.lua("return _G.closed") is False
        assert editor.lua("return #vim.api.nvim_list_wins()") == 1
        assert editor.lua("return vim.fn.execute('messages')").count("E5108") == 0
    finally:
        editor.close()
