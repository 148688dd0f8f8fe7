"""Several Neovims on one live session, through the workspace's shared daemon (D-1..D-6).

Each Neovim is a real headless one with the plugin's defaults: it starts `dshd connect`,
which finds the workspace's daemon (or starts it) and forwards bytes. Two or three of
them open the same session; keys are typed as people type them; what each one shows is
read from that editor, and what was decided from the session log on disk. Every test
runs its daemons under a private XDG_RUNTIME_DIR and checks at the end that they left by
themselves once nobody was connected (`[daemon] idleTimeoutS`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import daemon_pids, runtime_dir, shared_editor, stop_daemons, write_artifact  # noqa: E402

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


def make_workspace(root: Path, replies: list[dict]) -> Path:
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(CONFIG, encoding="utf-8")
    (root / "script.json").write_text(json.dumps({"replies": replies}), encoding="utf-8")
    return root


class Shared:
    """A workspace, its private runtime folder, and the Neovims opened on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.runtime = runtime_dir()
        self.workspace: Path | None = None
        self.editors = []

    def start(self, replies: list[dict]) -> Path:
        self.workspace = make_workspace(self.tmp_path / "ws", replies)
        return self.workspace

    def editor(self, name: str, **setup):
        editor = shared_editor(self.workspace, self.runtime, name, **setup)
        self.editors.append(editor)
        return editor

    def close(self, editor) -> None:
        problems = editor.lua_errors()
        editor.close()
        self.editors.remove(editor)
        assert not problems, problems


@pytest.fixture
def shared(tmp_path):
    s = Shared(tmp_path)
    yield s
    problems = []
    for editor in list(s.editors):
        problems += editor.lua_errors()
        editor.close()
    # With nobody connected the daemon leaves by itself after its idle time.
    killed = stop_daemons(s.runtime, wait_s=IDLE_S + 8)
    assert not problems, problems
    assert not killed, f"daemons still running {IDLE_S + 8} s after the last editor left: {killed}"


def log_events(workspace: Path, session_id: str) -> list[dict]:
    text = (workspace / ".dsh" / "sessions" / session_id / "log.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def tool_results(events: list[dict], name: str) -> list[dict]:
    calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call" and e["data"]["name"] == name}
    return [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["callId"] in calls]


def new_session(editor) -> str:
    editor.typed("Dsh session new")
    editor.wait_for("require('dsh').current() ~= nil", timeout=30, what="a session")
    return editor.lua("return select(2, require('dsh').current())")


def join(editor, session_id: str) -> None:
    editor.typed(f"Dsh session open {session_id}")
    editor.wait_for(f"select(2, require('dsh').current()) == '{session_id}'", timeout=30, what="the session, open")


def others(editor) -> list[str]:
    return editor.lua("return require('dsh.state').others()")


def wait_others(editor, names: list[str]) -> None:
    editor.wait_for(f"vim.deep_equal(require('dsh.state').others(), {lua_list(names)})", timeout=20,
                    what=f"others attached == {names}")


def lua_list(names: list[str]) -> str:
    return "{" + ", ".join(json.dumps(n) for n in names) + "}"


def chat_lines(editor) -> list[str]:
    return editor.lua(
        "local v = require('dsh.chat').views()[select(2, require('dsh').current())];"
        " return v and vim.api.nvim_buf_get_lines(v.buf, 0, -1, false) or {}"
    )


def wait_for_chat(editor, text: str, timeout: float = 30.0) -> list[str]:
    editor.wait_for(
        "(function() local v = require('dsh.chat').views()[select(2, require('dsh').current())];"
        f" return v and vim.iter(vim.api.nvim_buf_get_lines(v.buf, 0, -1, false)):any(function(l) return l:find({json.dumps(text)}, 1, true) end) end)()",
        timeout=timeout, what=f"{text!r} in the chat",
    )
    return chat_lines(editor)


def go_answer(editor, module: str) -> None:
    """Go to the question that waits and let its 500 ms guard pass, as a person would."""
    editor.typed("Dsh answer")
    editor.wait_for(f"(function() local x = require('dsh.{module}').list()[1]; "
                    "return x ~= nil and vim.api.nvim_get_current_win() == x.win end)()",
                    what=f"the {module} float, focused")
    time.sleep(0.6)


def told(editor, needle: str) -> bool:
    return any(needle in m for m in editor.messages())


def test_two_neovims_on_one_session_see_each_others_prompt_and_answer(shared):
    shared.start([{"text": "answer to A", "delayMs": 200}, {"text": "answer to B", "delayMs": 200}])
    a, b = shared.editor("nvim A"), shared.editor("nvim B")
    session_id = new_session(a)
    join(b, session_id)
    # One daemon serves both; each editor shows the other one, never itself.
    assert len(daemon_pids(shared.runtime)) == 1
    wait_others(a, ["nvim B"])
    wait_others(b, ["nvim A"])
    assert a.lua("return require('dsh').statusline()") == "◎ no goal · with nvim B"
    assert b.lua("return require('dsh').statusline()") == "◎ no goal · with nvim A"
    assert told(a, "this session: nvim B joined")
    for editor in (a, b):
        editor.typed("Dsh chat")
        editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)")
    bar = b.lua("return vim.api.nvim_eval_statusline(require('dsh.chat').winbar(), { use_winbar = true }).str")
    assert "with nvim A" in bar, bar

    # A types a prompt in its chat: both chats show it and the answer.
    a.feed("ihello from A<C-s>")
    for editor in (a, b):
        wait_for_chat(editor, "answer to A")
        assert any("hello from A" in line for line in chat_lines(editor))
    # B answers in its own chat: A sees it too.
    b.feed("<Esc>")
    b.wait_for("not require('dsh.state').busy()", what="the first turn over in B")
    b.feed("ihello from B<C-s>")
    for editor in (a, b):
        wait_for_chat(editor, "answer to B")
        assert any("hello from B" in line for line in chat_lines(editor))
    write_artifact("shared-chat-a.txt", "\n".join(chat_lines(a)) + "\n")
    write_artifact("shared-chat-b.txt", "\n".join(chat_lines(b)) + "\n")
    texts = [e["data"]["text"] for e in log_events(shared.workspace, session_id) if e["type"] == "user/message"]
    assert texts == ["hello from A", "hello from B"]

    # B leaves: A is told, and alone again.
    shared.close(b)
    wait_others(a, [])
    assert told(a, "this session: nvim B left")
    assert a.lua("return require('dsh').statusline()") == "◎ no goal"


def plan_review_on_both(shared, names=("nvim A", "nvim B")):
    """A plan review asked of two Neovims on one session; both floats open."""
    shared.start([EXIT_WITH_PLAN, {"text": "on it"}, {"text": "more"}])
    a, b = (shared.editor(n) for n in names)
    session_id = new_session(a)
    join(b, session_id)
    wait_others(a, [names[1]])
    a.typed("Dsh plan on")
    b.wait_for("require('dsh').plan_active()", what="plan mode on, seen by B")
    b.typed("Dsh prompt add retries")
    for editor in (a, b):
        editor.wait_for("#require('dsh.review').list() == 1", timeout=30, what="the plan review float")
    return a, b, session_id


def test_first_answer_wins_and_the_other_window_closes(shared):
    a, b, session_id = plan_review_on_both(shared)
    assert b.lua("return require('dsh').statusline()") == "◎ waiting for you · plan · no goal · with nvim A"
    go_answer(a, "review")
    a.feed("a")
    # B's window closes by itself and B is told in one line who answered what.
    b.wait_for("#require('dsh.review').list() == 0", what="B's review to close")
    b.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('approved by nvim A', 1, true) end)",
               what="B told who answered")
    assert told(b, 'plan review "')
    for editor in (a, b):
        editor.wait_for("not require('dsh').plan_active()", what="plan mode off everywhere")
        editor.wait_for("not require('dsh.state').busy()", what="the turn over")
    assert b.lua("return require('dsh').statusline()") == "◎ no goal · with nvim A"
    [result] = tool_results(log_events(shared.workspace, session_id), "exit_plan_mode")
    assert result["ok"] is True
    # A answered: A is told nothing about its own answer.
    assert not told(a, "approved by")
    write_artifact("shared-first-answer-b-messages.txt", "\n".join(b.messages()) + "\n")


def test_both_answering_at_once_commits_one_answer(shared):
    shared.start([
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}]},
        {"text": "done"},
    ])
    a, b = shared.editor("nvim A"), shared.editor("nvim B")
    session_id = new_session(a)
    join(b, session_id)
    wait_others(b, ["nvim A"])
    a.typed("Dsh prompt write a file")
    for editor in (a, b):
        editor.wait_for("#require('dsh.approvals').list() == 1", timeout=30, what="the approval float")
        go_answer(editor, "approvals")
    # Both press their key at (nearly) the same moment: A allows once, B for the session.
    a.nvim.input("a")
    b.nvim.input("s")
    for editor in (a, b):
        editor.wait_for("#require('dsh.approvals').list() == 0", what="every approval window closed")
        editor.wait_for("not require('dsh.state').busy()", what="the turn over")
    decisions = [e["data"] for e in log_events(shared.workspace, session_id) if e["type"] == "permission/decision"]
    assert len(decisions) == 1, decisions
    outcome = decisions[0]["outcome"]
    assert outcome in ("allow-once", "allow-session")
    winner, loser = (a, b) if outcome == "allow-once" else (b, a)
    winner_name = "nvim A" if winner is a else "nvim B"
    # The loser learns who won: its window closed on the news, or its late answer was told
    # that it changed nothing.
    loser.wait_for(
        "vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find(" + json.dumps("by " + winner_name) + ", 1, true)"
        " or m.msg:find('changed nothing', 1, true) end)",
        what="the loser told",
    )
    assert (shared.workspace / "a.txt").read_text(encoding="utf-8") == "x\n"
    write_artifact("shared-both-answer-loser-messages.txt", "\n".join(loser.messages()) + "\n")


def test_a_neovim_that_attaches_mid_question_is_asked_and_its_answer_counts(shared):
    shared.start([EXIT_WITH_PLAN, {"text": "on it"}])
    a = shared.editor("nvim A")
    session_id = new_session(a)
    a.typed("Dsh plan on")
    a.wait_for("require('dsh').plan_active()")
    a.typed("Dsh prompt add retries")
    a.wait_for("#require('dsh.review').list() == 1", timeout=30, what="A's review")
    # C's session picker says the session waits for a plan review (the daemon's row, C's words).
    c = shared.editor("nvim C")
    c.typed("Dsh session list")
    c.wait_for("#require('dsh.state').sessions == 1", what="C's session list")
    label = c.lua("return require('dsh.commands').session_label(require('dsh.state').sessions[1], os.time())")
    assert "waiting for you: plan review" in label, label
    c.feed("<CR>")  # the default vim.ui.select asks for a number: none chosen
    # C opens the session while the review waits: it is asked too.
    join(c, session_id)
    c.wait_for("#require('dsh.review').list() == 1", timeout=20, what="the open review sent to C")
    assert c.lua("return require('dsh.review').list()[1].question.plan") == PLAN
    go_answer(c, "review")
    c.feed("r")
    c.feed("retry only connection errors<CR>")
    a.wait_for("#require('dsh.review').list() == 0", what="A's review to close")
    a.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('sent back to keep planning by nvim C', 1, true) end)",
               what="A told who answered")
    [result] = tool_results(log_events(shared.workspace, session_id), "exit_plan_mode")
    assert result["ok"] is False and "retry only connection errors" in json.dumps(result["content"])


def test_a_review_cancelled_from_the_other_neovim_is_withdrawn(shared):
    a, b, session_id = plan_review_on_both(shared)
    # A's float closed (it waits); B cancels the turn.
    b.typed("Dsh cancel")
    for editor in (a, b):
        editor.wait_for("#require('dsh.review').list() == 0", what="the review withdrawn everywhere")
    a.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('plan review closed', 1, true) end)")
    assert all(r["ok"] is False for r in tool_results(log_events(shared.workspace, session_id), "exit_plan_mode"))
    for editor in (a, b):
        assert editor.lua("return require('dsh').plan_active()") is True


def test_killing_the_shared_daemon_mid_goal_reattaches_both_and_runs_nothing(shared):
    shared.start([{"text": f"round {i}", "delayMs": 150} for i in range(200)])
    a, b = shared.editor("nvim A"), shared.editor("nvim B")
    session_id = new_session(a)
    join(b, session_id)
    wait_others(a, ["nvim B"])
    a.typed("Dsh goal create keep going 100")
    b.wait_for("require('dsh.state').goal() and require('dsh.state').goal().roundsStarted >= 2", timeout=30,
               what="B sees the goal's rounds")
    [pid] = daemon_pids(shared.runtime)
    os.kill(pid, signal.SIGKILL)
    # Both forwarders end; both editors start `dshd connect` again at once: one daemon
    # serves them, and both are back on the session, disarmed.
    for editor in (a, b):
        editor.wait_for("require('dsh').statusline():find('waiting for you to resume', 1, true)", timeout=40,
                        what="the session reopened, disarmed")
        editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('reopening your session', 1, true) end)")
        gone = [m for m in editor.messages() if "went away" in m or "crashed" in m]
        assert gone == ["dsh: the shared dshd daemon went away; restarting it and reopening your session"], gone
        assert select_session(editor) == session_id
    pids = daemon_pids(shared.runtime)
    assert len(pids) == 1 and pids != [pid], pids
    wait_others(a, ["nvim B"])
    wait_others(b, ["nvim A"])
    # Nothing runs by itself: no round starts in the next seconds.
    rounds = count_requests(shared.workspace, session_id)
    time.sleep(2.0)
    assert count_requests(shared.workspace, session_id) == rounds
    # Either may resume it; the other sees it run.
    b.typed("Dsh goal resume")
    a.wait_for("require('dsh.state').goal().activation == 'armed'", what="A sees the resume")
    write_artifact("shared-kill-a-messages.txt", "\n".join(a.messages()) + "\n")


def select_session(editor) -> str:
    return editor.lua("return select(2, require('dsh').current())")


def count_requests(workspace: Path, session_id: str) -> int:
    return sum(1 for e in log_events(workspace, session_id) if e["type"] == "request/header")


def test_the_goal_runs_while_one_neovim_watches_and_stops_when_the_last_leaves(shared):
    shared.start([{"text": f"round {i}", "delayMs": 150} for i in range(400)])
    a, b = shared.editor("nvim A"), shared.editor("nvim B")
    session_id = new_session(a)
    join(b, session_id)
    a.typed("Dsh goal create keep going 300")
    a.wait_for("require('dsh.state').goal() and require('dsh.state').goal().roundsStarted >= 2", timeout=30)
    shared.close(a)
    # B still watches: the goal stays armed and its rounds go on.
    wait_others(b, [])
    seen = b.lua("return require('dsh.state').goal().roundsStarted")
    b.wait_for(f"require('dsh.state').goal().roundsStarted >= {seen + 2}", timeout=20, what="rounds going on")
    assert b.lua("return require('dsh.state').goal().activation") == "armed"
    shared.close(b)
    # Nobody watches: the goal is disarmed; no round starts after the one running ends
    # (given time for the daemon to see the connection go, on a loaded machine too).
    time.sleep(2.0)
    rounds = count_requests(shared.workspace, session_id)
    time.sleep(1.5)
    assert count_requests(shared.workspace, session_id) == rounds
    # (The fixture checks that the daemon then leaves after its idle time.)


def test_the_daemons_cancel_request_names_the_ask_it_withdraws(shared):
    """When the daemon stops waiting before anything is committed (here: the person's time
    ran out), its `$/cancelRequest` is what closes the window: the plugin found the request
    by the id it read as the message came in."""
    shared.start([EXIT_WITH_PLAN, {"text": "keep planning"}])
    a = shared.editor("nvim A", question_timeout_ms=1500)
    new_session(a)
    a.typed("Dsh plan on")
    a.wait_for("require('dsh').plan_active()")
    a.typed("Dsh prompt add retries")
    a.wait_for("#require('dsh.review').list() == 1", timeout=30, what="the review")
    request = a.lua("return require('dsh.review').list()[1].meta.request")
    assert isinstance(request["id"], str) and request["id"]  # the daemon's id of this ask
    a.wait_for("#require('dsh.review').list() == 0", timeout=20, what="the review withdrawn")
    a.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('plan review closed', 1, true) end)")
    assert told(a, "plan review closed: dshd stopped waiting for it"), a.messages()
    a.wait_for("not require('dsh.state').busy()", what="the turn over")


def test_tui_two_neovims_one_review_answered_in_the_other(shared):
    """Neovim's own terminal UI, twice, in tmux: each statusline names the other; the plan
    review opens on both screens, B approves, and A's float goes with one line saying so."""
    import shutil

    from editors.nvim.test_nvim_daemon import Tmux
    from nvim_harness import PLUGIN_DIR, dshd_binary, nvim_binary

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI capture needs it")
    workspace = shared.start([EXIT_WITH_PLAN, {"text": "on it"}])
    screens = {}
    for name in ("nvim A", "nvim B"):
        init = shared.tmp_path / f"init-{name[-1]}.lua"
        init.write_text(
            f"""
vim.opt.rtp:prepend({json.dumps(str(PLUGIN_DIR))})
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'dsh'.statusline()}} "
require('dsh').setup({{ dshd = {json.dumps(dshd_binary())}, client_name = {json.dumps(name)}, notify_turns = false }})
""",
            encoding="utf-8",
        )
        screens[name] = Tmux(f"dsh-shared-{name[-1]}-{os.getpid()}", workspace,
                             ["env", "TERM=xterm-256color", f"XDG_RUNTIME_DIR={shared.runtime}",
                              nvim_binary(), "-n", "-i", "NONE", "-u", str(init)])
    a, b = screens["nvim A"], screens["nvim B"]
    try:
        a.wait_for("~")
        b.wait_for("~")
        a.keys(":Dsh session new", "Enter")
        a.wait_for("◎ no goal")
        [session_dir] = (workspace / ".dsh" / "sessions").iterdir()
        b.keys(f":Dsh session open {session_dir.name}", "Enter")
        b.wait_for("◎ no goal · with nvim A")
        a.wait_for("◎ no goal · with nvim B")
        a.keys(":Dsh plan on", "Enter")
        a.wait_for("◎ plan · no goal · with nvim B")
        a.keys(":Dsh prompt add retries", "Enter")
        a.wait_for("keep planning")
        screen_b = b.wait_for("keep planning")
        write_artifact("tui-shared-review-b.txt", screen_b)
        assert "◎ waiting for you · plan · no goal · with nvim A" in b.wait_for("waiting for you")
        b.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        b.keys("a")
        screen_a = a.wait_for('approved by nvim B')
        screen_a = a.wait_gone("keep planning")
        write_artifact("tui-shared-answered-elsewhere-a.txt", screen_a)
        assert "◎ no goal · with nvim B" in a.wait_for("◎ no goal · with nvim B", timeout=30)
        [result] = tool_results(log_events(workspace, session_dir.name), "exit_plan_mode")
        assert result["ok"] is True
    finally:
        for tui in screens.values():
            tui.keys(":qa!", "Enter")
        time.sleep(0.5)
        for tui in screens.values():
            tui.kill()


def test_checkhealth_says_the_daemon_is_shared_and_checks_the_config_in_its_own(shared):
    workspace = shared.start([])
    a = shared.editor("nvim A")
    a.cmd("checkhealth dsh")
    report = "\n".join(a.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    write_artifact("checkhealth-shared.txt", report + "\n")
    assert "ERROR" not in report, report
    assert "OK connects to the workspace's shared daemon (dshd connect" in report
    assert f"OK workspace: {workspace}" in report
    # The config is checked by a fresh `dshd serve`, so no shared daemon was left behind.
    assert "OK workspace config valid" in report
    assert daemon_pids(shared.runtime) == []
