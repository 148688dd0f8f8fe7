"""The Neovim plugin against the real daemon (`dshd serve`) and the scripted model.

A real headless Neovim loads the plugin, which starts the real `dshd serve` for a
workspace whose `.dsh/config.toml` selects the scripted model (SPEC 7). Keys are typed
as a person would type them; results are read from the editor (statusline, float,
notifications) and from the session log on disk.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import PLUGIN_DIR, Editor, dshd_binary, nvim_binary, write_artifact  # noqa: E402

PLAN = (
    "# Plan: make the parser strict\n"
    "\n"
    "1. Read the grammar in docs/grammar.md\n"
    "2. Add a failing test for trailing commas\n"
    "3. Reject trailing commas in parse_list\n"
)
PLAN_LINE_3 = "1. Read the grammar in docs/grammar.md"

CONFIG = """\
plugins = ["plan", "goals"]

[plan]
section = "Plan first. Do not change files until the plan is approved."

[model]
provider = "scripted"
script = "script.json"
"""
# No [model] table of its own: the model is the person's setting (or added by the test).
CONFIG_WITHOUT_MODEL = CONFIG[: CONFIG.index("[model]")]


def make_workspace(root: Path, replies: list[dict], config: str = CONFIG) -> Path:
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(config, encoding="utf-8")
    (root / "script.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    return root


def open_editor(workspace: Path) -> Editor:
    editor = Editor(cwd=workspace)
    editor.lua("require('dsh').setup({ cmd = { ..., 'serve' } })", dshd_binary())
    return editor


def started(tmp_path: Path, editors: list[Editor], replies: list[dict], config: str = CONFIG) -> tuple[Path, Editor]:
    """A workspace with `replies` for the scripted model and `config`, and a Neovim on it."""
    workspace = make_workspace(tmp_path / "ws", replies, config)
    editor = open_editor(workspace)
    editors.append(editor)
    return workspace, editor


@pytest.fixture
def editors():
    opened: list[Editor] = []
    yield opened
    problems = []
    for editor in opened:
        problems += editor.lua_errors()
        editor.close()
    assert not problems, problems


def notices(editor: Editor) -> list[str]:
    """Every notice whole (what is shown is cut to one line; :Dsh messages shows these)."""
    return editor.lua("return vim.tbl_map(function(e) return e.text end, require('dsh.errors').history)")


def log_events(workspace: Path, session_id: str) -> list[dict]:
    path = workspace / ".dsh" / "sessions" / session_id / "log.jsonl"
    text = path.read_text(encoding="utf-8")  # complete lines only: one may be mid-append
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def wait_for_log(workspace: Path, session_id: str, predicate, timeout: float = 20.0) -> list[dict]:
    import time

    deadline = time.monotonic() + timeout
    while True:
        events = log_events(workspace, session_id)
        if predicate(events):
            return events
        assert time.monotonic() < deadline, f"the log never matched: {events}"
        time.sleep(0.05)


def new_session(editor: Editor) -> str:
    editor.typed("Dsh session new")
    editor.wait_for("require('dsh').current() ~= nil", timeout=30, what="a session")
    return editor.lua("return select(2, require('dsh').current())")


def go_answer(editor: Editor, module: str = "review") -> None:
    """Go to the question that waits (it opens without the focus while the person types,
    as they just did), then let its 500 ms guard pass, as a person reading it would."""
    import time

    editor.typed("Dsh answer")
    editor.wait_for(f"(function() local x = require('dsh.{module}').list()[1]; "
                    "return x ~= nil and vim.api.nvim_get_current_win() == x.win end)()",
                    what=f"the {module} float, focused")
    time.sleep(0.6)


def plan_review_setup(tmp_path: Path, editors: list[Editor], replies: list[dict]):
    workspace, editor = started(tmp_path, editors, replies)
    session_id = new_session(editor)
    editor.typed("Dsh plan on")
    editor.wait_for("require('dsh').plan_active()", what="plan mode on (dsh/plan/changed)")
    editor.typed("Dsh prompt make the parser strict")
    editor.wait_for("#require('dsh.review').list() == 1", timeout=30, what="the plan review float")
    go_answer(editor)
    return workspace, editor, session_id


def float_snapshot(editor: Editor) -> str:
    """The float as a person sees it: title, plan lines with comments, footer."""
    shot = editor.lua(
        """
        local review = require('dsh.review').list()[1]
        local cfg = vim.api.nvim_win_get_config(review.win)
        local function text(chunks)
          if type(chunks) == 'string' then return chunks end
          local out = {}
          for _, c in ipairs(chunks or {}) do table.insert(out, c[1]) end
          return table.concat(out)
        end
        local lines = vim.api.nvim_buf_get_lines(review.buf, 0, -1, false)
        local ns = vim.api.nvim_create_namespace('dsh.review')
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(review.buf, ns, 0, -1, { details = true })) do
          local virt = m[4].virt_text
          lines[m[2] + 1] = lines[m[2] + 1] .. text(virt)
        end
        return { title = text(cfg.title), footer = text(cfg.footer), width = cfg.width,
                 lines = lines, relative = cfg.relative, current = vim.api.nvim_get_current_win() == review.win }
        """
    )
    assert shot["relative"] == "editor" and shot["current"]
    width = max(shot["width"], len(shot["title"]) + 4, len(shot["footer"]) + 4)
    top = "╭" + shot["title"].center(width, "─") + "╮"
    body = [f"│{line:<{width}}│" for line in shot["lines"]]
    bottom = "╰" + shot["footer"].center(width, "─") + "╯"
    return "\n".join([top, *body, bottom]) + "\n"


def tool_results(events: list[dict], name: str) -> list[dict]:
    calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call" and e["data"]["name"] == name}
    return [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["callId"] in calls]


def plan_modes(events: list[dict]) -> list[bool]:
    return [e["data"]["active"] for e in events if e["type"] == "plan/mode"]


EXIT_WITH_PLAN = {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]}


def test_statusline_tracks_the_goal_budget(tmp_path, editors):
    # Each continuation round takes 30 ms, as a slow model would, so rounds are visible.
    workspace, editor = started(tmp_path, editors, [{"text": f"round {i}", "delayMs": 30} for i in range(60)])
    assert editor.lua("return require('dsh').statusline()") == ""
    session_id = new_session(editor)
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"

    editor.typed("Dsh goal create make the parser strict 40")
    final = editor.wait_for(
        "require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy() and require('dsh').statusline()",
        timeout=90,
        what="the budget to be spent",
    )
    assert final == "◎ 40/40 · blocked: round-budget-exhausted"
    statuses = editor.lua("return _G.dsh_test.statuses")
    write_artifact("statusline-goal.txt", "\n".join(statuses) + "\n")
    assert statuses[0] == "◎ no goal"
    assert statuses[1] == "◎ 0/40 · active"
    # The budget moves one round at a time, in order, up to 40/40.
    rounds = [int(s.replace("⟳ ", "").split()[1].split("/")[0]) for s in statuses[1:] if "/40 · active" in s]
    assert rounds == sorted(rounds) and rounds[-1] == 40
    assert set(range(41)) <= set(rounds)
    # The statusline expression shows the same text.
    editor.cmd("set laststatus=2 statusline=%{v:lua.require'dsh'.statusline()}")
    assert editor.lua("return vim.api.nvim_eval_statusline(vim.o.statusline, {}).str") == final

    # Raise the budget and resume: rounds continue to the new cap.
    editor.typed("Dsh goal edit 43")
    editor.wait_for("require('dsh.state').goal().maxRounds == 43", what="the edit")
    assert editor.lua("return require('dsh').statusline()") == "◎ 40/43 · blocked: round-budget-exhausted"
    editor.typed("Dsh goal resume")
    final = editor.wait_for(
        "require('dsh.state').goal().roundsStarted == 43 and require('dsh').goal_phase() == 'blocked'"
        " and not require('dsh.state').busy()"
        " and require('dsh').statusline()",
        timeout=60,
    )
    assert final == "◎ 43/43 · blocked: round-budget-exhausted"

    events = log_events(workspace, session_id)
    goal_rounds = [e["data"]["goalRound"]["round"] for e in events
                   if e["type"] == "user/message" and "goalRound" in e["data"]]
    assert goal_rounds == list(range(1, 44))


def test_goal_pause_and_stale_revision(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": f"r{i}", "delayMs": 200} for i in range(100)])
    new_session(editor)
    editor.typed("Dsh goal create keep going 40")
    editor.wait_for("require('dsh.state').goal() and require('dsh.state').goal().roundsStarted >= 1")
    editor.typed("Dsh goal pause")
    paused = editor.wait_for("require('dsh').goal_phase() == 'paused' and require('dsh').statusline()")
    assert paused.endswith("/40 · paused")

    # The person acts on an old reading of the goal: the daemon refuses the write, the
    # plugin re-reads the goal and says what happened.
    editor.lua("require('dsh.state').goals[require('dsh').current()].revision = 1")
    editor.typed("Dsh goal resume")
    editor.wait_for("vim.iter(require('dsh.errors').history):any(function(m) return m.text:find('changed meanwhile', 1, true) end)")
    message = [m for m in notices(editor) if "changed meanwhile" in m]
    assert message and "paused" in message[0], notices(editor)
    assert "revision" not in message[0]
    assert editor.lua("return require('dsh.state').goal().revision") > 1
    assert editor.lua("return require('dsh').goal_phase()") == "paused"
    # With the fresh revision the same command works.
    editor.typed("Dsh goal resume")
    editor.wait_for("require('dsh').goal_phase() == 'active'")
    editor.typed("Dsh goal block waiting-for-ci the CI is red")
    blocked = editor.wait_for("require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy() and require('dsh').statusline()")
    assert blocked.endswith("/40 · blocked: waiting-for-ci")
    editor.typed("Dsh goal complete")
    done = editor.wait_for("require('dsh').goal_phase() == 'complete' and require('dsh').statusline()")
    assert done.endswith("/40 · complete")
    # A write the phase does not allow: the daemon refuses, the message says why.
    editor.typed("Dsh goal pause")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('cannot pause', 1, true) end)")
    refused = [m for m in editor.messages() if "cannot pause" in m][0]
    assert "cannot pause the goal while the goal is complete" in refused
    editor.typed("Dsh goal clear")
    editor.wait_for("require('dsh').statusline() == '◎ no goal'")


def test_plan_review_approve_turns_plan_mode_off(tmp_path, editors):
    workspace, editor, session_id = plan_review_setup(tmp_path, editors, [EXIT_WITH_PLAN, {"text": "starting"}])
    write_artifact("plan-review-float.txt", float_snapshot(editor))
    # The editor is not blocked while the daemon waits for the person.
    assert editor.lua("return vim.fn.mode()") == "n"
    editor.typed("Dsh plan")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('plan mode on') end)")

    editor.feed("a")
    turn = editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the turn to end")
    assert "error" not in turn or turn["error"] is None
    editor.wait_for("not require('dsh').plan_active()", what="plan mode off (dsh/plan/changed)")
    events = log_events(workspace, session_id)
    assert plan_modes(events) == [True, False]
    results = tool_results(events, "exit_plan_mode")
    assert len(results) == 1 and results[0]["ok"] is True


def test_plan_review_revise_with_comment_keeps_planning(tmp_path, editors):
    workspace, editor, session_id = plan_review_setup(
        tmp_path, editors, [EXIT_WITH_PLAN, {"text": "revising"}]
    )
    editor.feed("3G")
    editor.feed("c")
    editor.feed("cite the section<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] ~= nil")
    write_artifact("plan-review-float-commented.txt", float_snapshot(editor))
    editor.feed("r")
    editor.feed("also cover nested lists<CR>")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the turn to end")
    assert editor.lua("return require('dsh').plan_active()") is True
    events = log_events(workspace, session_id)
    assert plan_modes(events) == [True]
    [result] = tool_results(events, "exit_plan_mode")
    assert result["ok"] is False
    content = json.dumps(result["content"])
    assert "also cover nested lists" in content
    assert "cite the section" in content
    assert PLAN_LINE_3 in content  # the comment is tagged with its line's text
    assert "3" in content


def test_plan_review_q_decides_nothing(tmp_path, editors):
    import time

    workspace, editor, session_id = plan_review_setup(tmp_path, editors, [EXIT_WITH_PLAN, {"text": "approved, going on"}])
    editor.feed("q")
    editor.wait_for("not vim.api.nvim_win_is_valid(require('dsh.review').list()[1].win)", what="the float to close")
    time.sleep(1.0)
    # The daemon still waits: no result for the plan, the turn open, and people are told.
    events = log_events(workspace, session_id)
    assert tool_results(events, "exit_plan_mode") == [] and "turn/close" not in [e["type"] for e in events]
    assert editor.lua("return require('dsh').statusline()") == "◎ waiting for you · plan · no goal"
    editor.typed("Dsh chat")
    lines = wait_for_chat(editor, "ga or :Dsh answer opens it")
    assert "### Plan: make the parser strict · waiting for your review" in "\n".join(lines)
    # Answerable again.
    go_answer(editor)
    editor.feed("a")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the turn to end")
    [result] = tool_results(log_events(workspace, session_id), "exit_plan_mode")
    assert result["ok"] is True


def test_transcript_follows_the_session(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": "hello from the model"}, {"text": "second answer"}])
    new_session(editor)
    editor.typed("Dsh prompt say hello")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30)
    editor.typed("Dsh transcript")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://transcript/', 1, true)")
    editor.wait_for("vim.iter(vim.api.nvim_buf_get_lines(0, 0, -1, false)):any(function(l) return l:find('hello from the model', 1, true) end)")
    editor.feed("G")
    editor.typed("Dsh prompt again")
    editor.wait_for("_G.dsh_test.turns[2]", timeout=30)
    lines = editor.wait_for(
        "vim.iter(vim.api.nvim_buf_get_lines(0, 0, -1, false)):any(function(l) return l:find('second answer', 1, true) end)"
        " and vim.api.nvim_buf_get_lines(0, 0, -1, false)"
    )
    write_artifact("transcript.txt", "\n".join(lines) + "\n")
    seqs = [int(line[:4]) for line in lines if line[:4].strip().isdigit()]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    assert any("say hello" in line for line in lines)
    # The window follows the end.
    assert editor.lua("return vim.api.nvim_win_get_cursor(0)[1] == vim.api.nvim_buf_line_count(0)")


def test_checkhealth_reports_ok(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [])
    editor.cmd("checkhealth dsh")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    report = "\n".join(lines)
    write_artifact("checkhealth.txt", report + "\n")
    assert "ERROR" not in report, report
    assert "OK Neovim 0.11" in report
    assert "OK dshd found" in report
    assert f"OK workspace: {workspace}" in report
    assert "OK workspace config valid" in report


def test_checkhealth_lists_the_keys_an_untrusted_workspace_may_not_set(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [], CONFIG + 'baseUrl = "http://127.0.0.1:9/v1"\n')
    editor.cmd("checkhealth dsh")
    report = "\n".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    write_artifact("checkhealth-untrusted.txt", report + "\n")
    assert "OK workspace config valid" in report
    assert f"WARNING ignored model.baseUrl from {workspace / '.dsh' / 'config.toml'}: the workspace is not trusted" in report


def test_checkhealth_names_the_bad_config_key(tmp_path, editors):
    _, editor = started(
        tmp_path, editors, [],
        CONFIG.replace('section = "Plan first. Do not change files until the plan is approved."', 'section = ""'),
    )
    editor.cmd("checkhealth dsh")
    report = "\n".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    write_artifact("checkhealth-bad-config.txt", report + "\n")
    assert "ERROR workspace config invalid" in report
    assert "plan.section" in report


def test_invalid_config_at_start_says_which_key(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [], CONFIG + "\n[goals]\nmaxRounds = \"many\"\n")
    editor.typed("Dsh session new")
    editor.wait_for(
        "vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('invalid config', 1, true) end)",
        timeout=30,
    )
    editor.wait_for("#vim.lsp.get_clients({ name = 'dsh' }) == 0", what="the daemon to be stopped")
    messages = editor.messages()
    assert len(messages) == 1, messages  # one clear message, no raw RPC error, no "exited"
    assert "goals.maxRounds" in messages[0] and ".dsh/config.toml" in messages[0]
    assert ":Dsh config" in messages[0]
    assert editor.lua("return require('dsh').current()") is None
    # The message's command opens the file at the bad key.
    editor.typed("Dsh config")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('config.toml', 1, true)", what="the config file")
    assert editor.lua("return vim.api.nvim_get_current_line()") == 'maxRounds = "many"'
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == str(workspace / ".dsh" / "config.toml")


# ---- the real terminal UI, captured with tmux ----------------------------------------------


class Tmux:
    """Neovim's own TUI in a detached tmux session, read with capture-pane."""

    def __init__(self, name: str, cwd: Path, command: list[str], width: int = 100, height: int = 30):
        import shlex
        import shutil
        import subprocess

        self.subprocess = subprocess
        self.tmux = shutil.which("tmux")
        self.name = name
        subprocess.run(
            [self.tmux, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
             "-c", str(cwd), " ".join(shlex.quote(c) for c in command)],
            check=True,
        )

    def keys(self, *keys: str) -> None:
        self.subprocess.run([self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return self.subprocess.run(
            [self.tmux, "capture-pane", "-p", "-t", self.name], check=True, capture_output=True, text=True
        ).stdout

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        return self._wait(lambda screen: text in screen, f"{text!r} not on screen", timeout)

    def wait_gone(self, text: str, timeout: float = 30.0) -> str:
        return self._wait(lambda screen: text not in screen, f"{text!r} still on screen", timeout)

    def _wait(self, done, failure: str, timeout: float) -> str:
        import time

        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if done(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure} after {timeout}s:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        self.subprocess.run([self.tmux, "kill-session", "-t", self.name], check=False)


def test_tui_plan_review_and_statusline_on_screen(tmp_path):
    import os
    import shutil
    import time


    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI capture needs it")
    # The goal's first round is a slow model call, so the goal is still active (not run
    # through its 40 rounds by an exhausted script) when the person pauses it.
    workspace = make_workspace(
        tmp_path / "ws", [EXIT_WITH_PLAN, {"text": "starting"}, {"text": "round 1", "delayMs": 20000}]
    )
    init = tmp_path / "init.lua"
    init.write_text(
        f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
require('dsh').setup({{ cmd = {{ {json.dumps(dshd_binary())}, 'serve' }}, notify_turns = false }})
""",
        encoding="utf-8",
    )
    tui = Tmux(f"dsh-nvim-{os.getpid()}", workspace,
               ["env", "TERM=xterm-256color", nvim_binary(), "-n", "-i", "NONE", "-u", str(init)])
    try:
        tui.wait_for("~")
        tui.keys(":Dsh session new", "Enter")
        tui.wait_for("◎ no goal")
        tui.keys(":Dsh plan on", "Enter")
        tui.wait_for("plan mode on")
        tui.wait_for("◎ plan · no goal")
        tui.keys(":Dsh prompt make the parser strict", "Enter")
        # (It takes the focus only when the person is not typing: see test_tui_typing_...)
        screen = tui.wait_for("keep planning")
        tui.wait_for("◎ waiting for you · plan · no goal")
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        tui.keys("3G")
        tui.keys("c")
        tui.wait_for("Comment on line 3")
        tui.keys("cite the section", "Enter")
        screen = tui.wait_for("« cite the section")
        write_artifact("tui-plan-review.txt", screen)
        assert "Plan: make the parser strict" in screen
        assert "a approve · g + goal · r keep planning · c comment · d changes · q later (stays open)" in screen
        # Closing decides nothing and keeps the comment: the review comes back with it.
        tui.keys("q")
        screen = tui.wait_gone("keep planning")
        write_artifact("tui-plan-review-closed-still-waiting.txt", screen)
        assert "◎ waiting for you · plan · no goal" in screen
        tui.keys(":Dsh answer", "Enter")
        screen = tui.wait_for("« cite the section")
        time.sleep(0.7)
        # Approving would drop the comment: asked; approve anyway.
        tui.keys("a")
        tui.wait_for("would be dropped")
        tui.keys("3", "Enter")
        tui.wait_for("◎ no goal", timeout=30)  # plan mode ended: `plan` left the statusline
        tui.keys(":Dsh goal create make the parser strict 40", "Enter")
        screen = tui.wait_for("/40 ")
        tui.keys(":Dsh goal pause", "Enter")
        screen = tui.wait_for("/40 · paused")
        write_artifact("tui-statusline.txt", screen)
        assert "plan-review" not in screen  # the float is gone
    finally:
        tui.kill()


def test_cancel_withdraws_an_open_review(tmp_path, editors):
    workspace, editor, session_id = plan_review_setup(tmp_path, editors, [EXIT_WITH_PLAN, {"text": "never"}])
    editor.typed("Dsh cancel")
    turn = editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the cancelled turn to end")
    assert turn["result"]["stopReason"] == "cancelled"
    editor.wait_for("#require('dsh.review').list() == 0", what="the float to close")
    assert any("plan review closed" in m for m in editor.messages())
    assert editor.lua("return require('dsh').plan_active()") is True
    events = log_events(workspace, session_id)
    assert plan_modes(events) == [True]
    assert [e["data"]["stopReason"] for e in events if e["type"] == "turn/close"] == ["cancelled"]


def test_steer_reaches_the_running_turn(tmp_path, editors):
    workspace = make_workspace(tmp_path / "ws", [
        {"toolCalls": [{"name": "no_such_tool", "arguments": {}}], "delayMs": 1500},
        {"text": "steered"},
    ])
    editor = open_editor(workspace)
    editors.append(editor)
    session_id = new_session(editor)
    editor.typed("Dsh prompt start")
    wait_for_log(workspace, session_id, lambda events: any(e["type"] == "request/header" for e in events))
    editor.typed("Dsh steer also check the docs")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('steer queued', 1, true) end)")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30)
    texts = [e["data"]["text"] for e in log_events(workspace, session_id) if e["type"] == "user/message"]
    assert texts == ["start", "also check the docs"]


def test_session_close_open_fork_and_list(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": f"r{i}", "delayMs": 100} for i in range(200)])
    first = new_session(editor)
    editor.typed("Dsh goal create keep going 40")
    editor.wait_for("require('dsh.state').goal() and require('dsh.state').goal().roundsStarted >= 2")
    editor.typed("Dsh goal disarm")
    editor.wait_for("require('dsh').statusline():find('waiting for you to resume', 1, true)", what="disarmed")
    editor.typed("Dsh cancel")
    editor.typed("Dsh session close")
    editor.wait_for("require('dsh').current() == nil", what="the session to close")
    assert editor.lua("return require('dsh').statusline()") == ""

    # Reopened: the goal comes back from the log, disarmed (nothing resumes by itself).
    editor.typed(f"Dsh session open {first}")
    editor.wait_for(f"select(2, require('dsh').current()) == '{first}'", what="the session to open")
    reopened = editor.lua("return require('dsh').statusline()")
    assert reopened.endswith("/40 · waiting for you to resume"), reopened

    # A fork inherits the goal through its log.
    editor.typed("Dsh session fork")
    editor.wait_for(f"select(2, require('dsh').current()) ~= '{first}'", what="the fork")
    fork = editor.lua("return select(2, require('dsh').current())")
    editor.wait_for("require('dsh').statusline():find('/40', 1, true)", what="the fork's goal")
    assert editor.lua("return require('dsh.state').goal().objective") == "keep going"

    # The list offers both; choosing one (the default vim.ui.select asks for a number) opens it.
    editor.typed("Dsh session list")
    editor.wait_for("#require('dsh.state').sessions == 2", what="the list")
    listed = editor.lua("return vim.tbl_map(function(s) return s.sessionId end, require('dsh.state').sessions)")
    assert sorted(listed) == sorted([first, fork])
    target = listed[1] if listed[1] != fork else listed[0]
    editor.feed(f"{listed.index(target) + 1}<CR>")
    editor.wait_for(f"select(2, require('dsh').current()) == '{target}'", what="the chosen session")
    assert editor.lua("return vim.fn.getcompletion('Dsh session open ', 'cmdline')") == listed


def test_prompt_slash_command_runs_the_daemon_command(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [])
    new_session(editor)
    editor.typed("Dsh prompt /plan")
    editor.wait_for("require('dsh').plan_active()", what="plan mode on from /plan")
    turn = editor.wait_for("_G.dsh_test.turns[1]")
    assert turn["result"]["stopReason"] == "command"
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg == 'dsh: /plan: done' end)")
    editor.typed("Dsh prompt /plan off")
    editor.wait_for("not require('dsh').plan_active()", what="plan mode off from /plan off")


def test_goal_edit_asks_for_the_new_values(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [])
    new_session(editor)
    editor.typed("Dsh goal create first objective 5")
    editor.wait_for("require('dsh').goal_phase() == 'blocked'", what="the 5 rounds to be spent")
    editor.typed("Dsh goal edit")
    editor.feed("<C-u>second objective<CR>")  # the prompt starts with the current objective
    editor.feed("<C-u>9<CR>")
    editor.wait_for("require('dsh.state').goal().maxRounds == 9", what="the edit")
    assert editor.lua("return require('dsh.state').goal().objective") == "second objective"
    assert editor.lua("return require('dsh').statusline()") == "◎ 5/9 · blocked: round-budget-exhausted"


def test_goal_create_asks_with_the_configured_round_budget_and_a_token_budget(tmp_path, editors):
    # The config says 40 rounds (not the built-in 256): that is what the question offers.
    workspace, editor = started(tmp_path, editors, [{"text": "round", "delayMs": 20000}],
                                CONFIG + "\n[goals]\nmaxRounds = 40\n")
    new_session(editor)
    editor.typed("Dsh goal create")
    editor.wait_for("#_G.dsh_test.asked >= 1 and _G.dsh_test.asked[#_G.dsh_test.asked] == 'Goal objective: '")
    editor.feed("ship the retries<CR>")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked] == 'Round budget: '")
    assert editor.lua("return vim.fn.getcmdline()") == "40"
    editor.feed("<CR>")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked]:find('Token budget', 1, true) ~= nil")
    editor.feed("200k<CR>")
    editor.wait_for("require('dsh.state').goal() ~= nil", what="the goal")
    goal = editor.lua("local g = require('dsh.state').goal(); return { g.objective, g.maxRounds, g.maxTokens }")
    assert goal == ["ship the retries", 40, 200000]
    editor.wait_for("require('dsh').statusline():find('/40 · 0/200k tok', 1, true)", what="the budgets in the statusline")
    editor.typed("Dsh goal pause")
    editor.wait_for("require('dsh').goal_phase() == 'paused'")


def test_autostart_and_restart(tmp_path, editors):

    workspace = make_workspace(tmp_path / "ws", [])
    editor = Editor(cwd=workspace)
    editors.append(editor)
    editor.lua("require('dsh').setup({ cmd = { ..., 'serve' }, autostart = true })", dshd_binary())
    first = editor.wait_for(
        "(function() local c = vim.lsp.get_clients({ name = 'dsh' })[1]; return c and c.initialized and c.id end)()",
        what="the daemon to start by itself",
    )
    root = editor.lua("return vim.lsp.get_client_by_id(...).root_dir", first)
    assert root == str(workspace)
    editor.typed("Dsh restart")
    second = editor.wait_for(
        "(function() for _, c in ipairs(vim.lsp.get_clients({ name = 'dsh' })) do"
        f" if c.id ~= {first} and c.initialized then return c.id end end end)()",
        what="the daemon to restart",
    )
    assert second != first
    editor.wait_for(f"vim.lsp.get_client_by_id({first}) == nil")
    assert editor.lua(f"return #vim.lsp.get_clients({{ name = 'dsh' }})") == 1
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('restarted', 1, true) end)")
    assert not [m for m in editor.messages() if "exited" in m], editor.messages()


def test_autostart_takes_up_the_last_session(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": "hi"}])
    first = new_session(editor)
    editor.close()
    editors.remove(editor)
    editor = Editor(cwd=workspace)
    editors.append(editor)
    editor.lua("require('dsh').setup({ cmd = { ..., 'serve' }, autostart = true })", dshd_binary())
    editor.wait_for(f"select(2, require('dsh').current()) == '{first}'", what="the last session, with no command typed")
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"
    assert sorted(p.name for p in (workspace / ".dsh" / "sessions").iterdir()) == [first]


def test_vim_lsp_enable_uses_the_lsp_dsh_config(tmp_path, editors):
    """The nvim-lspconfig way (Neovim 0.11): lsp/dsh.lua + vim.lsp.config + vim.lsp.enable."""

    workspace = make_workspace(tmp_path / "ws", [])
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    editor = Editor(cwd=workspace)
    editors.append(editor)
    editor.lua("vim.lsp.config('dsh', { cmd = { ..., 'serve' } }); vim.lsp.enable('dsh')", dshd_binary())
    editor.cmd("edit notes.txt")
    editor.wait_for(
        "(function() local c = vim.lsp.get_clients({ name = 'dsh' })[1]; return c and c.initialized end)()",
        what="vim.lsp.enable to start dshd",
    )
    assert editor.lua("return vim.lsp.get_clients({ name = 'dsh' })[1].root_dir") == str(workspace)
    new_session(editor)
    editor.typed("Dsh goal create say hi 2")
    final = editor.wait_for("require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy() and require('dsh').statusline()")
    assert final == "◎ 2/2 · blocked: round-budget-exhausted"
    assert editor.lua("return #vim.lsp.get_clients({ name = 'dsh' })") == 1


def test_reload_makes_the_old_agent_stale(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [])
    session_id = new_session(editor)
    old_agent = editor.lua("return (require('dsh').current())")
    editor.typed(f"Dsh! session open {session_id}")
    editor.wait_for(f"(require('dsh').current()) ~= '{old_agent}'", what="the reloaded agent")
    assert editor.lua("return require('dsh.state').session_of[...]", old_agent) is None
    # Something still holding the old id (here: the person switched back to it) is told
    # what to do, and the plugin stops using it.
    editor.lua("require('dsh.state').set_current(...)", old_agent, session_id)
    editor.typed("Dsh goal")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('stale', 1, true) end)")
    message = [m for m in editor.messages() if "stale" in m][0]
    assert ":Dsh session open" in message
    assert editor.lua("return require('dsh').current()") is None


def daemon_pid(editor: Editor) -> int:
    import subprocess

    nvim_pid = editor.lua("return vim.fn.getpid()")
    out = subprocess.run(["pgrep", "-P", str(nvim_pid), "-f", "dshd"], capture_output=True, text=True).stdout.split()
    assert len(out) == 1, out
    return int(out[0])


def test_a_crashed_daemon_is_said_once_and_the_session_reopens(tmp_path, editors):
    import os
    import signal

    workspace, editor = started(tmp_path, editors, [{"text": f"r{i}", "delayMs": 100} for i in range(200)])
    session_id = new_session(editor)
    editor.typed("Dsh goal create keep going 40")
    editor.typed("Dsh chat")
    wait_for_chat(editor, "r1")
    first_agent = editor.lua("return (require('dsh').current())")
    os.kill(daemon_pid(editor), signal.SIGKILL)

    editor.wait_for(
        f"select(2, require('dsh').current()) == '{session_id}' and (require('dsh').current()) ~= '{first_agent}'",
        timeout=30, what="the same session, reopened in a new daemon",
    )
    status = editor.wait_for("require('dsh').statusline():find('waiting for you to resume', 1, true)"
                             " and require('dsh').statusline()")
    assert status.startswith("◎ ") and "/40 · waiting for you to resume" in status  # nothing resumed by itself
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('reopened', 1, true) end)")
    messages = editor.messages()
    crashed = [m for m in messages if "crash" in m or "quit with exit code" in m]
    assert crashed == ["dsh: dshd crashed (signal 9, SIGKILL); restarting it and reopening your session"], messages
    write_artifact("crash-recovery-messages.txt", "\n".join(messages) + "\n")
    # The chat follows the new agent: the same conversation, from the log.
    editor.wait_for(f"require('dsh.chat').views()['{session_id}'].agent_id ~= '{first_agent}'")
    lines = wait_for_chat(editor, "Goal round 1 of 40")
    assert "## dsh\nr0" in "\n".join(lines)
    # The reopened agent works: a goal command reaches it, and its rounds reach the chat.
    editor.typed("Dsh goal resume")
    editor.wait_for("require('dsh.state').goal().activation == 'armed'", what="the goal to resume")
    rounds = editor.lua("return require('dsh.state').goal().roundsStarted")
    wait_for_chat(editor, f"Goal round {rounds + 1} of 40")


def test_restart_reopens_the_session(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [])
    session_id = new_session(editor)
    first_agent = editor.lua("return (require('dsh').current())")
    editor.typed("Dsh restart")
    editor.wait_for(
        f"select(2, require('dsh').current()) == '{session_id}' and (require('dsh').current()) ~= '{first_agent}'",
        timeout=30, what="the session, reopened",
    )
    assert not [m for m in editor.messages() if "crash" in m or "exited" in m], editor.messages()


def test_a_goal_the_agent_blocks_raises_a_notification(tmp_path, editors):
    block = {"name": "goal_block", "arguments": {"code": "dependency-conflict",
                                                 "message": "urllib3 2.x conflicts with the pinned requests"}}
    workspace, editor = started(tmp_path, editors, [{"toolCalls": [block]}, {"text": "blocked; someone must pick the pin"}])
    new_session(editor)
    editor.typed("Dsh goal create ship retries 40")
    editor.wait_for("require('dsh').goal_phase() == 'blocked'", what="the agent to block the goal")
    message = editor.wait_for(
        "vim.iter(_G.dsh_test.messages):find(function(m) return m.msg:find('blocked the goal', 1, true) end)"
    )
    assert message["msg"] == ("dsh: the agent blocked the goal: urllib3 2.x conflicts with the pinned requests"
                              " (dependency-conflict)")
    assert message["level"] == editor.lua("return vim.log.levels.WARN")
    editor.wait_for("not require('dsh.state').busy()")
    assert editor.lua("return require('dsh').statusline()").endswith("· blocked: dependency-conflict")
    assert len([m for m in editor.messages() if "blocked" in m]) == 1, editor.messages()


def test_a_goal_the_agent_completes_raises_a_notification(tmp_path, editors):
    workspace = make_workspace(tmp_path / "ws", [{"toolCalls": [{"name": "goal_complete", "arguments": {}}]},
                                                 {"text": "done"}])
    editor = open_editor(workspace)
    editors.append(editor)
    new_session(editor)
    editor.typed("Dsh goal create ship retries 40")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('goal complete: ship retries', 1, true) end)",
                    what="the completion notice")
    assert editor.lua("return require('dsh').goal_phase()") == "complete"


# ---- the chat buffer --------------------------------------------------------------------


def chat_lines(editor: Editor) -> list[str]:
    return editor.lua(
        "local v = require('dsh.chat').views()[select(2, require('dsh').current())];"
        " return vim.api.nvim_buf_get_lines(v.buf, 0, -1, false)"
    )


def wait_for_chat(editor: Editor, text: str, timeout: float = 30.0) -> list[str]:
    editor.wait_for(
        "(function() local v = require('dsh.chat').views()[select(2, require('dsh').current())];"
        f" return v and vim.iter(vim.api.nvim_buf_get_lines(v.buf, 0, -1, false)):any(function(l) return l:find({json.dumps(text, ensure_ascii=False)}, 1, true) end) end)()",
        timeout=timeout, what=f"{text!r} in the chat",
    )
    return chat_lines(editor)


def test_chat_buffer_sends_the_prompt_and_shows_the_turn(tmp_path, editors):
    workspace = make_workspace(tmp_path / "ws", [
        {"text": "I will look first.", "toolCalls": [{"name": "no_such_tool", "arguments": {"path": "http/client.py"}}]},
        {"text": "Done: nothing to change."},
    ])
    editor = open_editor(workspace)
    editors.append(editor)
    editor.typed("Dsh chat")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)", what="the chat buffer")
    session_id = editor.lua("return select(2, require('dsh').current())")
    wait_for_chat(editor, "# Session")
    assert editor.lua("return vim.bo.filetype") == "markdown"
    # Insert mode, type, leave it, <CR> sends.
    editor.feed("iwhere does the client send requests?<Esc>")
    editor.wait_for("vim.fn.mode() == 'n'")
    editor.feed("<CR>")
    lines = wait_for_chat(editor, "─── Turn 1 finished ───")
    write_artifact("chat-buffer.txt", "\n".join(lines) + "\n")
    text = "\n".join(lines)
    assert "## You\nwhere does the client send requests?\n" in text
    assert "## dsh\nI will look first.\n" in text
    # An unknown tool reads as its name and a short summary of its arguments.
    assert "▸ no_such_tool path=http/client.py ✗" in text
    assert "Done: nothing to change." in text
    assert lines[-1] == ""  # the prompt area, empty again
    # The tool call's arguments and result are folded under its line.
    folded = editor.lua(
        "local l = vim.fn.search('▸ no_such_tool', 'nw'); return { vim.fn.foldclosed(l), vim.fn.foldclosed(l + 1), l }"
    )
    assert folded[0] == -1 and folded[1] == folded[2] + 1
    # The user message came back from the daemon: the buffer holds the log's words.
    texts = [e["data"]["text"] for e in log_events(workspace, session_id) if e["type"] == "user/message"]
    assert texts == ["where does the client send requests?"]


def test_chat_stop_ends_the_running_turn(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": "thinking for a long time", "delayMs": 20000}])
    editor.typed("Dsh chat tab")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)")
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == 2
    editor.feed("ilong job<C-s>")
    editor.wait_for("require('dsh.state').busy()", what="the turn to start")
    assert editor.lua("return require('dsh').statusline()").startswith("◎ ⟳ ")
    # While the turn runs, what is sent steers it.
    editor.feed("ialso this<C-s>")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('steer queued', 1, true) end)")
    editor.typed("Dsh stop")
    lines = wait_for_chat(editor, "─── Turn 1 stopped ───")
    editor.wait_for("not require('dsh.state').busy()", what="the busy mark to go")
    assert "## You\nlong job" in "\n".join(lines)


def tui_editor(tmp_path: Path, workspace: Path, name: str, extra: str = "", env: dict[str, str] | None = None,
               args: list[str] | None = None) -> Tmux:
    """Neovim's TUI in tmux on `workspace`. `env` is passed on the command line: a tmux
    server that already runs gives new panes its own environment, not the test's."""
    import os
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI capture needs it")
    init = tmp_path / f"init-{name}.lua"
    init.write_text(
        f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
require('dsh').setup({{ cmd = {{ {json.dumps(dshd_binary())}, 'serve' }}, notify_turns = false }})
{extra}
""",
        encoding="utf-8",
    )
    settings = [f"{k}={v}" for k, v in (env or {}).items()]
    return Tmux(f"dsh-{name}-{os.getpid()}", workspace,
                ["env", "TERM=xterm-256color", *settings, nvim_binary(), "-n", "-i", "NONE", "-u", str(init), *(args or [])],
                width=110, height=40)


def test_tui_chat_with_a_plan_review(tmp_path):
    import time

    workspace = make_workspace(tmp_path / "ws", [
        {"text": "I read the grammar first; here is my plan.", "toolCalls": EXIT_WITH_PLAN["toolCalls"]},
        {"text": "Plan approved. I start with the failing test for trailing commas."},
    ])
    tui = tui_editor(tmp_path, workspace, "chat")
    try:
        tui.wait_for("~")
        tui.keys(":Dsh chat here", "Enter")
        tui.wait_for("your message")
        tui.keys("i", "/plan make the parser strict", "Escape", "Enter")
        screen = tui.wait_for("keep planning")
        screen = tui.wait_for("◎ waiting for you · plan · no goal")
        write_artifact("tui-chat-plan-review.txt", screen)
        assert "Plan: make the parser strict" in screen
        assert screen.splitlines()[0].startswith(" waiting for you · ")  # the chat's bar says so too
        tui.keys("ga")  # the chat's key to the question that waits
        time.sleep(0.7)
        tui.keys("a")
        screen = tui.wait_for("Turn 1 finished")
        write_artifact("tui-chat.txt", screen)
        assert "## You\nmake the parser strict" in screen  # /plan turned plan mode on, then sent the rest
        assert "### Plan: make the parser strict · approved" in screen
        assert "Plan approved. I start with the failing test" in screen
        assert "◎ no goal" in screen  # plan mode ended; no longer busy
        assert "your message" in screen
    finally:
        tui.kill()


# ---- approvals ------------------------------------------------------------------------------

TOOLS_CONFIG = CONFIG.replace('plugins = ["plan", "goals"]', 'plugins = ["plan", "goals", "tools"]')


def approval_snapshot(editor: Editor) -> str:
    shot = editor.lua(
        """
        local a = require('dsh.approvals').list()[1]
        local cfg = vim.api.nvim_win_get_config(a.win)
        local function text(chunks)
          local out = {}
          for _, c in ipairs(chunks or {}) do table.insert(out, c[1]) end
          return type(chunks) == 'string' and chunks or table.concat(out)
        end
        return { title = text(cfg.title), footer = text(cfg.footer), width = cfg.width,
                 lines = vim.api.nvim_buf_get_lines(a.buf, 0, -1, false) }
        """
    )
    width = max(shot["width"], len(shot["title"]) + 4, len(shot["footer"]) + 4)
    return "\n".join(["╭" + shot["title"].center(width, "─") + "╮",
                      *[f"│{line:<{width}}│" for line in shot["lines"]],
                      "╰" + shot["footer"].center(width, "─") + "╯"]) + "\n"


def test_approve_an_edit_reject_one_with_feedback_and_approve_a_command(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [
        {"toolCalls": [{"name": "edit_file", "arguments": {"path": "notes.txt", "oldText": "hello", "newText": "hello world"}}]},
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "all new\n"}}]},
        {"toolCalls": [{"name": "run_command", "arguments": {"command": "cat notes.txt > copy.txt"}}]},
        {"text": "done"},
    ], TOOLS_CONFIG)
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    session_id = new_session(editor)
    editor.typed("Dsh chat")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)")
    editor.feed("ifix the greeting<C-s>")

    # 1. The edit: its diff in the float; `a` allows it once.
    editor.wait_for("#require('dsh.approvals').list() == 1", what="the edit's approval")
    shot = approval_snapshot(editor)
    write_artifact("approval-edit-float.txt", shot)
    assert "Edit notes.txt" in shot and "-hello" in shot and "+hello world" in shot
    assert "a allow · s allow edit_file for this session · r reject · q later (stays open)" in shot
    go_answer(editor, "approvals")
    assert editor.lua("return vim.bo.filetype") == "diff"
    editor.feed("a")
    editor.wait_for("#require('dsh.approvals').list() == 0 or require('dsh.approvals').list()[1].params.tool ~= 'edit_file'")

    # 2. The rewrite: `r` rejects it with feedback for the agent.
    editor.wait_for("#require('dsh.approvals').list() == 1 and require('dsh.approvals').list()[1].params.tool == 'write_file'",
                    what="the write's approval")
    go_answer(editor, "approvals")
    editor.feed("r")
    editor.feed("edit the line, do not rewrite the file<CR>")

    # 3. The command and its folder; `a` runs it.
    editor.wait_for("#require('dsh.approvals').list() == 1 and require('dsh.approvals').list()[1].params.tool == 'run_command'",
                    what="the command's approval")
    shot = approval_snapshot(editor)
    write_artifact("approval-command-float.txt", shot)
    assert "$ cat notes.txt > copy.txt" in shot and f"in {workspace}" in shot
    go_answer(editor, "approvals")
    editor.feed("a")
    lines = wait_for_chat(editor, "─── Turn 1 finished ───")
    write_artifact("chat-approvals.txt", "\n".join(lines) + "\n")
    text = "\n".join(lines)
    assert "↳ You allowed edit_file once" in text
    assert "↳ You rejected write_file: edit the line, do not rewrite the file" in text
    assert "↳ You allowed run_command once" in text

    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "hello world\n"  # the rewrite never happened
    assert (workspace / "copy.txt").read_text(encoding="utf-8") == "hello world\n"
    decisions = [e["data"] for e in log_events(workspace, session_id) if e["type"] == "permission/decision"]
    assert [(d["tool"], d["outcome"]) for d in decisions] == [
        ("edit_file", "allow-once"), ("write_file", "reject"), ("run_command", "allow-once")]
    assert decisions[1]["feedback"] == "edit the line, do not rewrite the file"
    results = tool_results(log_events(workspace, session_id), "write_file")
    assert results[0]["ok"] is False and "edit the line, do not rewrite the file" in json.dumps(results[0]["content"])


def test_closing_an_approval_decides_nothing_and_a_withdrawn_one_closes(tmp_path, editors):
    import time

    workspace, editor = started(tmp_path, editors, [
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}]},
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "y\n"}}]},
        {"text": "ok"},
    ], TOOLS_CONFIG)
    session_id = new_session(editor)
    editor.typed("Dsh chat")
    editor.typed("Dsh prompt write two files")
    editor.wait_for("#require('dsh.approvals').list() == 1", what="the first approval")
    go_answer(editor, "approvals")
    editor.typed("close")  # closing the float decides nothing
    editor.wait_for("not vim.api.nvim_win_is_valid(require('dsh.approvals').list()[1].win)", what="the float to close")
    time.sleep(1.0)
    assert [e for e in log_events(workspace, session_id) if e["type"] == "permission/decision"] == []
    assert editor.lua("return require('dsh').statusline()") == "◎ waiting for you · no goal"
    lines = wait_for_chat(editor, "⏸ waiting for you: Create a.txt · allow? · ga or :Dsh answer opens it")
    write_artifact("chat-approval-waiting.txt", "\n".join(lines) + "\n")
    # Back with :Dsh answer; `r` and an empty reason rejects.
    go_answer(editor, "approvals")
    editor.feed("r")
    editor.feed("<CR>")
    editor.wait_for("require('dsh.approvals').list()[1] and require('dsh.approvals').list()[1].params.title:find('b.txt', 1, true)",
                    what="the second approval")
    # The turn is stopped while it asks: the float goes and says why.
    editor.typed("Dsh stop")
    editor.wait_for("#require('dsh.approvals').list() == 0", what="the withdrawn approval to close")
    assert any("approval of" in m and "b.txt closed" in m for m in editor.messages()), editor.messages()
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    decisions = [e["data"] for e in log_events(workspace, session_id) if e["type"] == "permission/decision"]
    assert decisions[0]["outcome"] == "reject" and "feedback" not in decisions[0]
    editor.wait_for("require('dsh').statusline() == '◎ no goal'", what="no longer waiting")


def test_tui_approvals_in_the_chat(tmp_path):
    import time

    workspace = make_workspace(tmp_path / "ws", [
        {"text": "I will fix the greeting.",
         "toolCalls": [{"name": "edit_file", "arguments": {"path": "notes.txt", "oldText": "hello", "newText": "hello world"}}]},
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "all new\n"}}]},
        {"toolCalls": [{"name": "run_command", "arguments": {"command": "cat notes.txt > copy.txt"}}]},
        {"text": "Done: the greeting is fixed and copied."},
    ])
    (workspace / ".dsh" / "config.toml").write_text(TOOLS_CONFIG, encoding="utf-8")
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    tui = tui_editor(tmp_path, workspace, "approvals")
    try:
        tui.wait_for("~")
        tui.keys(":Dsh chat here", "Enter")
        tui.wait_for("your message")
        tui.keys("i", "fix the greeting", "C-s")
        screen = tui.wait_for("allow edit_file for this session")
        write_artifact("tui-approval-edit.txt", screen)
        assert "Edit notes.txt · allow?" in screen and "+hello world" in screen
        tui.keys("ga")
        time.sleep(0.7)
        tui.keys("a")
        tui.wait_for("allow write_file for this session")
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        tui.keys("r")
        tui.wait_for("What should the agent do instead?")
        tui.keys("edit the line, do not rewrite the file", "Enter")
        screen = tui.wait_for("Run `cat notes.txt > copy.txt` · allow?")
        write_artifact("tui-approval-command.txt", screen)
        assert "$ cat notes.txt > copy.txt" in screen and "in " + str(workspace)[:40] in screen
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        tui.keys("a")
        screen = tui.wait_for("Turn 1 finished")
        write_artifact("tui-chat-approvals.txt", screen)
        assert "↳ You allowed edit_file once" in screen
        assert "↳ You rejected write_file: edit the line, do not rewrite the file" in screen
        assert "↳ You allowed run_command once" in screen
    finally:
        tui.kill()
    assert (workspace / "copy.txt").read_text(encoding="utf-8") == "hello world\n"


def test_tui_typing_in_the_prompt_while_an_approval_opens_answers_nothing(tmp_path):
    """U-1, measured the way it failed: the person types into the chat's prompt without
    a pause (tmux sends key after key) while the agent's edit asks for approval. No key
    may answer it, and every key typed must land in the prompt, in order."""
    import time

    import pynvim

    workspace = make_workspace(tmp_path / "ws", [
        {"toolCalls": [{"name": "edit_file", "arguments": {"path": "notes.txt", "oldText": "hello", "newText": "hello world"}}],
         "delayMs": 1500},
        {"text": "Done."},
    ], TOOLS_CONFIG)
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    sock = str(tmp_path / "nvim.sock")
    tui = tui_editor(tmp_path, workspace, "typing", args=["--listen", sock])
    nvim = None
    try:
        tui.wait_for("~")
        tui.keys(":Dsh chat here", "Enter")
        tui.wait_for("your message")
        tui.keys("i", "fix the greeting", "C-s")
        tui.wait_for("## You")
        tui.keys("i")  # and on with the next message, while the agent works
        # Answer letters (a, s, r, q) all through it; typed until well after the float showed.
        sentence = "as soon as this is ready, run the tests and report quickly, "  # (a lone ; is tmux's separator)
        typed = ""
        opened_at = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            char = sentence[len(typed) % len(sentence)]
            tui.subprocess.run([tui.tmux, "send-keys", "-t", tui.name, "-l", char], check=True)
            typed += char
            time.sleep(0.03)
            if len(typed) % 10 == 0 and opened_at is None and "· allow?" in tui.screen():
                opened_at = time.monotonic()
                write_artifact("tui-typing-approval-opened.txt", tui.screen())
            if opened_at is not None and time.monotonic() - opened_at > 2.0:
                break
        assert opened_at is not None, "the approval never opened while typing"
        time.sleep(0.5)
        screen = tui.screen()
        write_artifact("tui-typing-after.txt", screen)
        # The float shows, clear of the line being typed; the chat and statusline say it waits.
        assert "Edit notes.txt · allow? · :Dsh answer or ga to answer" in screen and "+hello world" in screen
        assert "◎ waiting for you · no goal" in screen
        assert "⏸ waiting for you: Edit notes.txt · allow? · ga or :Dsh answer opens it" in screen

        nvim = pynvim.attach("socket", path=sock)
        seen = nvim.exec_lua("""
            local view = require('dsh.chat').view_of_buf(vim.api.nvim_get_current_buf())
            local win = vim.api.nvim_get_current_win()
            return { mode = vim.api.nvim_get_mode().mode, in_chat = view ~= nil,
                     float = vim.api.nvim_win_get_config(win).relative ~= '',
                     prompt = view and view.builder:prompt_lines() or {},
                     session = select(2, require('dsh').current()) }
        """, [])
        # The person was told (the notice; in Insert mode "-- INSERT --" covers it, so read it back).
        notices = nvim.exec_lua("return vim.tbl_map(function(e) return e.text end, require('dsh.errors').history)", [])
        assert "dsh: Edit notes.txt · allow? waits for you: :Dsh answer (ga in the chat)" in notices, notices
        # Every key reached the prompt, in order; the person is still typing there.
        assert seen["prompt"] == [typed], (seen["prompt"], typed)
        assert seen["mode"] == "i" and seen["in_chat"] and not seen["float"], seen
        # No answer was given: the daemon still waits, and the file is as it was.
        events = log_events(workspace, seen["session"])
        assert [e for e in events if e["type"] == "permission/decision"] == []
        assert any(e["type"] == "tool/call" and e["data"]["name"] == "edit_file" for e in events)
        assert (workspace / "notes.txt").read_text(encoding="utf-8") == "hello\n"

        # A deliberate answer still works: go to it, wait past its guard, allow.
        tui.keys("Escape", ":Dsh answer", "Enter")
        time.sleep(0.8)
        tui.keys("a")
        wait_for_log(workspace, seen["session"],
                     lambda evs: any(e["type"] == "permission/decision" for e in evs))
        decisions = [e["data"] for e in log_events(workspace, seen["session"]) if e["type"] == "permission/decision"]
        assert [(d["tool"], d["outcome"]) for d in decisions] == [("edit_file", "allow-once")]
        screen = tui.wait_for("You allowed edit_file once")
        write_artifact("tui-typing-answered.txt", screen)
        assert nvim.exec_lua("return require('dsh.chat').view_of_buf(vim.api.nvim_get_current_buf()).builder:prompt_lines()", []) == [typed]
    finally:
        if nvim is not None:
            nvim.close()
        tui.kill()


def test_tui_a_blocked_goal_and_a_crash(tmp_path):
    import os
    import signal
    import subprocess

    block = {"name": "goal_block", "arguments": {"code": "dependency-conflict", "message": "urllib3 2.x clashes with requests 2.25"}}
    workspace = make_workspace(tmp_path / "ws", [{"toolCalls": [block]}, {"text": "Blocked: pick the pin."}])
    tui = tui_editor(tmp_path, workspace, "crash")
    try:
        tui.wait_for("~")
        tui.keys(":Dsh session new", "Enter")
        tui.wait_for("◎ no goal")
        tui.keys(":Dsh goal create ship retries 40", "Enter")
        screen = tui.wait_for("blocked the goal")
        write_artifact("tui-goal-blocked.txt", screen)
        assert "urllib3 2.x clashes with requests 2.25 (dependency-conflict)" in screen
        screen = tui.wait_for("1/40 · blocked: dependency-conflict")
        # The daemon dies: said once, with how, and the same session comes back.
        nvim = subprocess.run(["tmux", "list-panes", "-t", tui.name, "-F", "#{pane_pid}"],
                              capture_output=True, text=True, check=True).stdout.split()[0]
        pids = subprocess.run(["pgrep", "-f", "dshd serve"], capture_output=True, text=True).stdout.split()
        mine = [p for p in pids if subprocess.run(["ps", "-o", "ppid=", "-p", p], capture_output=True,
                                                   text=True).stdout.strip() in _descendants(int(nvim))]
        assert len(mine) == 1, (pids, mine)
        os.kill(int(mine[0]), signal.SIGKILL)
        screen = tui.wait_for("reopened")
        write_artifact("tui-crash-reopened.txt", screen)
        assert "dsh: session reopened · 1 of 40 rounds used · blocked: dependency-conflict" in screen
        tui.keys(":messages", "Enter")
        screen = tui.wait_for("Press ENTER")
        write_artifact("tui-crash-messages.txt", screen)
        assert screen.count("crashed") == 1, screen
        assert "dsh: dshd crashed (signal 9, SIGKILL); restarting it and reopening your session" in screen
        tui.keys("Enter")
        screen = tui.wait_for("1/40 · blocked: dependency-conflict")
        write_artifact("tui-crash-statusline.txt", screen)
    finally:
        tui.kill()


def _descendants(pid: int) -> set[str]:
    """The pid and every process below it, as strings."""
    import subprocess

    out = {str(pid)}
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    for child in children:
        out |= _descendants(int(child))
    return out


# ---- a real provider on a loopback server ---------------------------------------------------

REPLY = ("Retries belong in one place: a RetryPolicy that HttpClient.send consults before "
         "each attempt, with capped exponential backoff and only connection errors retried.")
KEY = "sk-loopback-0123456789abcdef"


def loopback_editor(workspace: Path, server, monkeypatch) -> Editor:
    """Neovim whose settings point the daemon at `server` (the person's own settings, so
    the workspace need not be trusted); the key is in the environment, named only."""
    monkeypatch.setenv("DSH_LOOPBACK_KEY", KEY)
    editor = Editor(cwd=workspace)
    editor.lua(
        "local cmd, url = ...; require('dsh').setup({ cmd = { cmd, 'serve' }, model = { provider = 'openai',"
        " model = 'loopback-1', baseUrl = url, apiKeyEnv = 'DSH_LOOPBACK_KEY', maxRetries = 0 } })",
        dshd_binary(), server.base_url,
    )
    return editor


def test_chat_streams_the_reply_and_a_model_error_is_told(tmp_path, editors, monkeypatch):
    from tests.loopback_models import Failure, LoopbackModelServer, Reply

    workspace = make_workspace(tmp_path / "ws", [], CONFIG_WITHOUT_MODEL)
    with LoopbackModelServer("openai") as server:
        server.script(Reply(text=REPLY, piece=12, chunk_delay=0.15), Failure(401))
        editor = loopback_editor(workspace, server, monkeypatch)
        editors.append(editor)
        editor.typed("Dsh chat")
        editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)")
        editor.feed("iwhere should retries live?<C-s>")
        # The reply grows in the buffer, piece by piece, before the turn ends.
        seen: list[str] = []
        import time

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
            if any("Turn 1 finished" in line for line in lines):
                break
            reply = [line for line in lines if line.startswith("Retries belong")]
            if reply and (not seen or seen[-1] != reply[0]):
                seen.append(reply[0])
            time.sleep(0.03)
        lines = wait_for_chat(editor, "─── Turn 1 finished ───")
        write_artifact("chat-streamed.txt", "\n".join(seen) + "\n---\n" + "\n".join(lines) + "\n")
        partial = [s for s in seen if s.endswith("▍")]
        assert len(partial) >= 3, seen  # several pieces on screen before the turn ended
        for piece in partial:
            assert REPLY.startswith(piece[:-1]), piece
        assert REPLY in "\n".join(lines) and "▍" not in "\n".join(lines)

        # The next call is refused (401): the person is told the kind and what to do.
        editor.feed("iand now?<C-s>")
        message = editor.wait_for(
            "vim.iter(_G.dsh_test.messages):find(function(m) return m.msg:find('model error', 1, true) end)",
            what="the model error notification",
        )
        assert message["msg"].startswith("dsh: model error (auth): ")
        whole = [m for m in notices(editor) if "model error" in m][0]
        assert "DSH_LOOPBACK_KEY" in whole  # shown whole in the notice float and :Dsh messages
        assert editor.lua("return require('dsh.errors').notice_window() ~= nil") or "DSH_LOOPBACK_KEY" in message["msg"]
        assert message["level"] == editor.lua("return vim.log.levels.ERROR")
        lines = wait_for_chat(editor, "Turn 2 stopped: model error")
        write_artifact("chat-model-error.txt", "\n".join(lines) + "\n" + "\n".join(editor.messages()) + "\n")
        assert not [m for m in editor.messages() if KEY in m]
        assert KEY not in "\n".join(lines)


def test_tui_streamed_reply_and_model_error(tmp_path, monkeypatch):
    from tests.loopback_models import Failure, LoopbackModelServer, Reply

    workspace = make_workspace(tmp_path / "ws", [], CONFIG_WITHOUT_MODEL)
    monkeypatch.setenv("DSH_LOOPBACK_KEY", KEY)
    with LoopbackModelServer("openai") as server:
        server.script(Reply(text=REPLY, piece=6, chunk_delay=0.2), Reply(text="Round 1: done.", usage=(1200, 3400)),
                      Failure(401))
        tui = tui_editor(tmp_path, workspace, "stream", extra=(
            "require('dsh').setup({ cmd = { " + json.dumps(dshd_binary()) + ", 'serve' }, notify_turns = false,"
            " model = { provider = 'openai', model = 'loopback-1', baseUrl = " + json.dumps(server.base_url) + ","
            " apiKeyEnv = 'DSH_LOOPBACK_KEY', maxRetries = 0 } })"), env={"DSH_LOOPBACK_KEY": KEY})
        try:
            tui.wait_for("~")
            tui.keys(":Dsh chat here", "Enter")
            tui.wait_for("your message")
            tui.keys("i", "where should retries live?", "C-s")
            screen = tui.wait_for("▍")
            write_artifact("tui-chat-streaming.txt", screen)
            assert "◎ ⟳ no goal" in screen and "Turn 1 finished" not in screen
            tui.wait_for("Turn 1 finished")
            # A goal round on the same model: its tokens are counted next to the rounds.
            tui.keys(":Dsh goal create ship retries 1", "Enter")
            screen = tui.wait_for("dsh: the goal spent its round budget (1 of 1 rounds used, 4.6k tokens)")
            write_artifact("tui-goal-tokens.txt", screen)
            assert "◎ 1/1 · 4.6k tok · blocked: round-budget-exhausted" in screen
            if "Press ENTER" in screen:  # two notices at once fill more than the message line
                tui.keys("Enter")
            tui.keys("i", "and now?", "C-s")
            # The daemon's message is longer than the screen is wide: Neovim shows it whole
            # and waits for Enter, as it does for any long error.
            screen = tui.wait_for("dsh: model error (auth): ")
            write_artifact("tui-model-error.txt", screen)
            assert "check the key in DSH_LOOPBACK" in screen and KEY not in screen
            tui.keys("Enter")
            screen = tui.wait_for("Turn 3 stopped: model error (authentication failed)")
            write_artifact("tui-model-error-chat.txt", screen)
            assert KEY not in screen
        finally:
            tui.kill()


# ---- workspace trust --------------------------------------------------------------------------


def loopback_workspace(tmp_path: Path, editors: list[Editor], server, monkeypatch) -> tuple[Path, Editor]:
    """A cloned workspace whose own config sends model requests (and the key) to `server`.
    Neovim's trust database lives in a folder of the test's own."""
    monkeypatch.setenv("DSH_LOOPBACK_KEY", KEY)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / "nvim").mkdir(parents=True)
    config = CONFIG_WITHOUT_MODEL + (
        f'[model]\nprovider = "openai"\nmodel = "loopback-1"\nbaseUrl = "{server.base_url}"\n'
        'apiKeyEnv = "DSH_LOOPBACK_KEY"\nmaxRetries = 0\n'
    )
    return started(tmp_path, editors, [], config)


def test_an_untrusted_workspace_cannot_send_the_key_to_its_server(tmp_path, editors, monkeypatch):
    from tests.loopback_models import LoopbackModelServer, Reply

    with LoopbackModelServer("openai") as server:
        server.script(Reply(text="you should not see this"))
        workspace, editor = loopback_workspace(tmp_path, editors, server, monkeypatch)
        new_session(editor)
        notice = editor.wait_for(
            "vim.iter(_G.dsh_test.messages):find(function(m) return m.msg:find('untrusted', 1, true) end)",
            what="the notice about ignored keys",
        )
        assert notice["msg"] == "dsh: untrusted workspace: model.provider and 2 more settings ignored; :Dsh trust uses them"
        editor.typed("Dsh prompt hello")
        editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the turn to end")
        assert server.requests == []  # neither the request nor the key went to the workspace's server
        told = [m for m in editor.messages() if "trust" in m]
        assert len(told) == 1, editor.messages()  # once, and not again as the daemon's raw message
        assert not [m for m in editor.messages() if "LSP[" in m]


def test_a_trusted_workspace_uses_its_model_server(tmp_path, editors, monkeypatch):
    from tests.loopback_models import LoopbackModelServer, Reply

    with LoopbackModelServer("openai") as server:
        server.script(Reply(text="hello from the workspace's own server"))
        workspace, editor = loopback_workspace(tmp_path, editors, server, monkeypatch)
        # The person trusts the file as it is (Neovim's :trust); the plugin reads that.
        editor.cmd(f"edit {workspace / '.dsh' / 'config.toml'}")
        editor.cmd("trust")
        editor.cmd("enew")
        new_session(editor)
        editor.typed("Dsh chat")
        editor.feed("ihello<C-s>")
        wait_for_chat(editor, "hello from the workspace's own server")
        assert len(server.requests) == 1
        assert server.requests[0].headers.get("authorization") == f"Bearer {KEY}"
        assert not [m for m in editor.messages() if "trust" in m], editor.messages()


def test_tui_trust_a_workspace(tmp_path, monkeypatch):
    from tests.loopback_models import LoopbackModelServer, Reply

    with LoopbackModelServer("openai") as server:
        server.script(Reply(text="hello from the trusted workspace's server"))
        editors_: list[Editor] = []
        workspace, editor = loopback_workspace(tmp_path, editors_, server, monkeypatch)
        editor.close()  # only the workspace is wanted: the person uses the TUI
        tui = tui_editor(tmp_path, workspace, "trust",
                         env={"DSH_LOOPBACK_KEY": KEY, "XDG_STATE_HOME": str(tmp_path / "state")})
        try:
            tui.wait_for("~")
            tui.keys(":Dsh chat here", "Enter")
            screen = tui.wait_for(":Dsh trust uses them")
            assert "Press ENTER" not in screen
            write_artifact("tui-untrusted.txt", screen)
            tui.keys(":Dsh trust", "Enter")
            screen = tui.wait_for("is not trusted")
            write_artifact("tui-trust-question.txt", screen)
            tui.keys("a")  # Neovim's own question: allow
            try:
                screen = tui.wait_for("session reopened", timeout=15)
            except AssertionError:
                # A redraw under load can clear the one-line notice before a capture sees
                # it; the message history keeps it.
                tui.keys(":messages", "Enter")
                screen = tui.wait_for("session reopened")
                tui.keys("Enter")
            write_artifact("tui-trusted-reopened.txt", screen)
            tui.keys("i", "hello", "C-s")
            screen = tui.wait_for("hello from the trusted workspace's server")
            write_artifact("tui-trusted-chat.txt", screen)
            assert len(server.requests) == 1
        finally:
            tui.kill()


def test_goal_tokens_in_the_statusline(tmp_path, editors, monkeypatch):
    from tests.loopback_models import LoopbackModelServer, Reply

    workspace = make_workspace(tmp_path / "ws", [], CONFIG_WITHOUT_MODEL)
    with LoopbackModelServer("openai") as server:
        server.script(Reply(text="round 1 done", usage=(1200, 3400)), Reply(text="round 2 done", usage=(2000, 400)))
        editor = loopback_editor(workspace, server, monkeypatch)
        editors.append(editor)
        new_session(editor)
        editor.typed("Dsh goal create ship retries 2")
        final = editor.wait_for(
            "require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy() and require('dsh').statusline()",
            timeout=60, what="the two rounds",
        )
        statuses = editor.lua("return _G.dsh_test.statuses")
        write_artifact("statusline-tokens.txt", "\n".join(statuses) + "\n")
        assert final == "◎ 2/2 · 7k tok · blocked: round-budget-exhausted", final
        assert "◎ ⟳ 1/2 · 4.6k tok · active" in statuses, statuses  # counted while the goal works
        message = [m for m in editor.messages() if "round budget" in m]
        assert message == ["dsh: the goal spent its round budget (2 of 2 rounds used, 7k tokens): :Dsh goal raise to go on"]


def test_a_token_budget_is_set_spent_and_raised(tmp_path, editors, monkeypatch):
    from tests.loopback_models import LoopbackModelServer, Reply

    workspace = make_workspace(tmp_path / "ws", [], CONFIG_WITHOUT_MODEL)
    with LoopbackModelServer("openai") as server:
        server.script(Reply(text="round 1 done", usage=(1200, 3400)))
        editor = loopback_editor(workspace, server, monkeypatch)
        editors.append(editor)
        new_session(editor)
        editor.typed("Dsh goal create ship retries 5 1k tokens")
        final = editor.wait_for(
            "require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy() and require('dsh').statusline()",
            timeout=60, what="the token budget to be spent",
        )
        assert final == "◎ 1/5 · 4.6k/1k tok · blocked: token-budget-exhausted"
        assert [m for m in editor.messages() if "token budget" in m] == [
            "dsh: token budget spent (1 of 5 rounds used, 4.6k of 1k tokens): :Dsh goal raise to go on"]
        editor.typed("Dsh goal edit 20k tokens")
        raised = editor.wait_for("require('dsh.state').goal().maxTokens == 20000 and require('dsh').statusline()")
        assert raised == "◎ 1/5 · 4.6k/20k tok · blocked: token-budget-exhausted"


# ---- U-4: files the agent changed come back into their buffers ---------------------------


def test_a_file_the_agent_edits_is_reloaded_and_unsaved_edits_are_kept(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [
        {"toolCalls": [{"name": "edit_file", "arguments": {"path": "notes.txt", "oldText": "hello", "newText": "hello world"}}]},
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "draft.txt", "content": "agent's draft\n"}}]},
        {"toolCalls": [{"name": "run_command", "arguments": {"command": "sleep 0.05; echo 'by a command' > made.txt"}}]},
        {"text": "done"},
    ], TOOLS_CONFIG)
    # Nothing asks first (the person's own setting: a workspace may not drop approvals).
    editor.lua("require('dsh').setup({ cmd = { ..., 'serve' }, config = { tools = { approve = {} } } })", dshd_binary())
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    (workspace / "draft.txt").write_text("first draft\n", encoding="utf-8")
    (workspace / "made.txt").write_text("before\n", encoding="utf-8")
    editor.cmd(f"edit {workspace / 'made.txt'}")
    made = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.cmd(f"edit {workspace / 'notes.txt'}")
    notes = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.cmd(f"edit {workspace / 'draft.txt'}")
    draft = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.feed("A and mine<Esc>")  # the person's own unsaved change
    editor.wait_for("vim.bo.modified")
    editor.cmd("buffer " + str(notes))
    session_id = new_session(editor)
    editor.typed("Dsh prompt fix the greeting and rewrite the draft")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30, what="the turn to end")
    # The unmodified buffer shows the agent's edit.
    editor.wait_for(f"vim.api.nvim_buf_get_lines({notes}, 0, -1, false)[1] == 'hello world'", what="notes.txt reloaded")
    assert editor.lua(f"return vim.bo[{notes}].modified") is False
    # A file a command rewrote comes back too.
    editor.wait_for(f"vim.api.nvim_buf_get_lines({made}, 0, -1, false)[1] == 'by a command'", what="made.txt reloaded")
    # The modified one keeps the person's text, and they are told.
    assert editor.lua(f"return vim.api.nvim_buf_get_lines({draft}, 0, -1, false)") == ["first draft and mine"]
    assert (workspace / "draft.txt").read_text(encoding="utf-8") == "agent's draft\n"
    assert any("the agent changed draft.txt; your unsaved edits there are kept" in m for m in editor.messages()), editor.messages()
    results = tool_results(log_events(workspace, session_id), "edit_file")
    assert results and results[0]["ok"] is True
    # A :w now would not silently undo the edit: the reloaded buffer holds it.
    editor.cmd("write")
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "hello world\n"


# ---- U-5: sessions come back ----------------------------------------------------------------


def test_the_last_session_comes_back_and_open_switches_the_chat(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [{"text": "first answer"}, {"text": "second answer"}])
    first = new_session(editor)
    editor.typed("Dsh prompt /plan tidy the parser")
    editor.wait_for("_G.dsh_test.turns[1]", timeout=30)
    editor.typed("Dsh session new")
    editor.wait_for(f"select(2, require('dsh').current()) ~= '{first}'")
    second = editor.lua("return select(2, require('dsh').current())")
    editor.typed("Dsh prompt write the docs")
    editor.wait_for("_G.dsh_test.turns[2]", timeout=30)
    editor.close()
    editors.remove(editor)

    # A new Neovim: :Dsh chat takes up the last session (no new empty one).
    editor = open_editor(workspace)
    editors.append(editor)
    editor.typed("Dsh chat")
    editor.wait_for(f"select(2, require('dsh').current()) == '{second}'", what="the last session")
    lines = wait_for_chat(editor, "write the docs")
    assert any("continued" in m for m in editor.messages()), editor.messages()
    sessions = sorted(p.name for p in (workspace / ".dsh" / "sessions").iterdir())
    assert sessions == sorted([first, second])  # nothing new was made

    # The picker: titles, the time in words, newest first.
    labels = editor.lua("""
        local cmds = require('dsh.commands')
        return vim.tbl_map(function(s) return cmds.session_label(s, os.time()) end, require('dsh.state').sessions)
    """)
    write_artifact("session-picker.txt", "\n".join(labels) + "\n")
    assert labels[0].startswith("write the docs  ·  just now"), labels
    assert labels[1].startswith("tidy the parser  ·  just now"), labels  # /plan stripped by the daemon
    # :Dsh session open switches the chat window to the opened session.
    chat_win = editor.lua("return vim.api.nvim_get_current_win()")
    editor.typed(f"Dsh session open {first}")
    editor.wait_for(f"select(2, require('dsh').current()) == '{first}'")
    editor.wait_for(f"vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf({chat_win})):find('{first}', 1, true)",
                    what="the chat window to show the opened session")
    wait_for_chat(editor, "tidy the parser")


def test_tui_a_long_notice_does_not_stop_work_and_a_stale_one_goes(tmp_path):
    import time

    workspace = make_workspace(tmp_path / "ws", [])
    long = "the model server answered 500 Internal Server Error and said " + "more words " * 30
    # A short command to give it: a command line longer than the screen would wait for Enter itself.
    tui = tui_editor(tmp_path, workspace, "notices", extra=f"""
require('dsh.errors').clear_after_ms = 1500
function _G.long_notice() require('dsh.errors').notify({json.dumps(long)}, vim.log.levels.WARN) end
function _G.short_notice() require('dsh.errors').notify('approval of Edit a.txt closed: the turn ended.', vim.log.levels.WARN) end
""")
    try:
        tui.wait_for("~")
        tui.keys(":lua long_notice()", "Enter")
        screen = tui.wait_for("(:Dsh messages)")
        write_artifact("tui-long-notice.txt", screen)
        assert "Press ENTER" not in screen
        assert screen.count("more words") > 20  # whole, for a while, in a float that takes no keys
        last = screen.rstrip("\n").splitlines()[-1]
        assert last.startswith("dsh: the model server answered 500") and len(last) <= 110, last
        # Work goes on at once: the next key is a command, not the answer to a prompt.
        tui.keys("ihello", "Escape")
        tui.wait_for("hello")
        # Stale: cleared from the screen; :Dsh messages has it whole.
        tui.keys(":lua short_notice()", "Enter")
        tui.wait_for("approval of Edit a.txt closed")
        screen = tui.wait_gone("approval of Edit a.txt closed", timeout=10)
        write_artifact("tui-stale-notice-cleared.txt", screen)
        tui.keys(":Dsh messages", "Enter")
        screen = tui.wait_for("dsh://messages")
        write_artifact("tui-dsh-messages.txt", screen)
        assert "more words more words" in screen and "approval of Edit a.txt closed" in screen
    finally:
        tui.kill()


def test_tui_the_readme_walk_with_a_real_provider(tmp_path, monkeypatch):
    """The README's steps as a new user takes them, on the example workspace, with the
    README's own settings pointing at a real OpenAI-compatible server (a loopback one)."""
    import shutil
    import time

    from tests.loopback_models import Call, LoopbackModelServer, Reply

    workspace = tmp_path / "ws"
    shutil.copytree(PLUGIN_DIR.parents[1] / "examples" / "workspace", workspace,
                    ignore=shutil.ignore_patterns("sessions"))
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(text="I read http/client.py; here is my plan.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN})]),
            Reply(text="Plan approved: I start with the failing test."),
        )
        init = tmp_path / "init-readme.lua"
        # As README.md writes it (steps 2 and 3), with this machine's paths.
        init.write_text(f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
require('dsh').setup({{
  cmd = {{ {json.dumps(dshd_binary())}, 'serve' }},
  model = {{ provider = 'openai', model = 'loopback-1', baseUrl = {json.dumps(server.base_url)}, apiKeyEnv = 'DSH_LOOPBACK_KEY' }},
}})
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
""", encoding="utf-8")
        import os
        # The person trusts the folder as the example's README says ([trust] folders here), so
        # the only notice is about the script (untrusted, its MCP server would be named first).
        (tmp_path / "xdg" / "dsh").mkdir(parents=True)
        (tmp_path / "xdg" / "dsh" / "config.toml").write_text(f"[trust]\nfolders = [{json.dumps(str(workspace))}]\n")
        tui = Tmux(f"dsh-readme-{os.getpid()}", workspace,
                   ["env", "TERM=xterm-256color", f"DSH_LOOPBACK_KEY={KEY}", "PATH=/usr/bin:/bin",
                    f"XDG_CONFIG_HOME={tmp_path / 'xdg'}",
                    nvim_binary(), "-n", "-i", "NONE", "-u", str(init), "http/client.py"], width=110, height=40)
        started_at = time.monotonic()
        try:
            tui.wait_for("client.py")
            tui.keys(":Dsh chat", "Enter")
            tui.wait_for("your message")
            tui.keys("i", "/plan Add retries to the HTTP client", "Escape", "Enter")
            screen = tui.wait_for("keep planning", timeout=60)
            tui.wait_for("waiting for you")
            tui.keys(":Dsh answer", "Enter")
            time.sleep(0.7)
            screen = tui.wait_for("Plan: make the parser strict")
            write_artifact("tui-readme-walk-review.txt", screen)
            tui.keys("a")
            screen = tui.wait_for("Plan approved: I start with the failing test.", timeout=60)
            write_artifact("tui-readme-walk-approved.txt", screen)
            took = time.monotonic() - started_at
            assert "### Plan: make the parser strict · approved" in screen
            # The example's script is ignored for a reason that is not trust, and said so.
            tui.keys(":Dsh messages", "Enter")
            screen = tui.wait_for("dsh://messages")
            write_artifact("tui-readme-walk-messages.txt", screen + f"\n(walk took {took:.1f} s)\n")
            assert "model.script ignored: the provider is openai" in screen
            assert "untrusted workspace: model.script" not in screen
        finally:
            tui.kill()
    assert len(server.requests) == 2  # the plan, then the approved step: a real server answered both
    assert {k.lower(): v for k, v in server.requests[0].headers.items()}.get("authorization") == f"Bearer {KEY}"
