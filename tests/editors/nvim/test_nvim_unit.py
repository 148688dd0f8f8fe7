"""The Neovim plugin's parts in a real headless Neovim, without a daemon.

Each test drives the real plugin modules (statusline, handlers, review float, command
parser, error messages, transcript rendering, help file) in `nvim --embed --headless`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import PLUGIN_DIR, Editor, write_artifact  # noqa: E402

from dshd.daemon import to_wire  # noqa: E402
from dshd.folds.events import BlockedReason  # noqa: E402
from dshd.services.goals import GoalView  # noqa: E402

SID = "s-0123456789abcdefghjkmnpqrs"


@pytest.fixture
def editor():
    ed = Editor()
    yield ed
    errors = ed.lua_errors()
    ed.close()
    assert not errors, errors


def goal_view(rounds=0, max_rounds=40, phase="active", activation="armed", **extra):
    """A GoalView as the daemon sends it: its words (status, actions) made by the daemon's own
    code (dshd.api.words), so these tests show the plugin displays what a daemon sends."""
    view = {
        "id": "g-1",
        "revision": 1,
        "objective": "make the tests pass",
        "phase": phase,
        "maxRounds": max_rounds,
        "roundsStarted": rounds,
        "roundsLeft": max_rounds - rounds,
        "createdAt": "2026-11-29T18:40:18.123Z",
        "updatedAt": "2026-11-29T18:40:18.123Z",
        "activation": activation,
    }
    view.update(extra)
    # The core's GoalView (snake_case) through the LSP door's converter, as the daemon sends it.
    core = {re.sub("[A-Z]", lambda m: "_" + m.group(0).lower(), key): value for key, value in view.items()}
    core.setdefault("tokens_used", 0)
    if isinstance(core.get("blocked_reason"), dict):
        core["blocked_reason"] = BlockedReason(**core["blocked_reason"])
    return to_wire.goal_view(GoalView(**core))


# ---- statusline ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("view", "text"),
    [
        (None, "◎ no goal"),
        (goal_view(37, 256), "◎ 37/256 · active"),
        (goal_view(0, 40), "◎ 0/40 · active"),
        (goal_view(37, 256, activation="disarmed"), "◎ 37/256 · waiting for you to resume"),
        (
            goal_view(40, 40, "blocked", "disarmed",
                      blockedReason={"code": "round-budget-exhausted", "message": "spent"}),
            "◎ 40/40 · blocked: round-budget-exhausted",
        ),
        (goal_view(3, 40, "paused", "disarmed"), "◎ 3/40 · paused"),
        (goal_view(9, 40, "complete", "disarmed"), "◎ 9/40 · complete"),
        (goal_view(3, 40, tokensUsed=12400), "◎ 3/40 · 12.4k tok · active"),
        (goal_view(3, 40, tokensUsed=12400, maxTokens=50000), "◎ 3/40 · 12.4k/50k tok · active"),
        # No token counted and no budget: no token figure (the daemon always sends tokensUsed).
        (goal_view(3, 40, tokensUsed=0), "◎ 3/40 · active"),
        (goal_view(3, 40, tokensUsed=0, maxTokens=50000), "◎ 3/40 · 0/50k tok · active"),
    ],
)
def test_statusline_format(editor, view, text):
    assert editor.lua("return require('dsh.statusline').format(...)", view) == text


def test_the_statusline_shows_the_daemons_words_as_they_are(editor):
    """Words no formula of the goal's fields gives: the plugin shows them, and works out no
    text, tone or action of its own."""
    view = {**goal_view(3, 40), "status": {
        "text": "the daemon's line 100%", "short": "its state", "tone": "warning", "usage": "its usage",
        "detail": ["Goal: its first line", "its second line"]},
        "actions": [{"id": "clear", "label": "Clear"}, {"id": "resume", "label": "Resume"}]}
    lua = "return require('dsh.statusline').{}(...)".format
    assert editor.lua(lua("format"), view) == "◎ the daemon's line 100%%"  # % escaped for 'statusline'
    assert editor.lua(lua("highlight"), view) == "DiagnosticWarn"  # an active goal, but the daemon's tone
    assert editor.lua(lua("actions"), view) == ["clear", "resume"]  # its order, even resume on an armed goal
    assert editor.lua(lua("usage"), view) == "its usage"
    assert editor.lua(lua("describe"), view) == "its usage · its state"
    detail = editor.lua("return require('dsh.commands').describe_goal(...)", view)
    assert detail == "Goal: its first line\nits second line\nActions: clear, resume"
    calm = {**view, "status": {**view["status"], "tone": "none"}, "phase": "blocked"}
    assert editor.lua(lua("highlight"), calm) is None
    # No goal: the only words of the plugin's own.
    assert editor.lua(lua("format"), None) == "◎ no goal"
    assert editor.lua(lua("actions"), None) == ["create"]


def test_statusline_says_working_only_while_something_runs_and_waiting_while_asked(editor):
    fmt = "return require('dsh.statusline').format(...)"
    assert editor.lua(fmt, None, {"activity": "waiting", "plan": True}) == "◎ waiting for you · plan · no goal"
    assert editor.lua(fmt, goal_view(3, 40), {"activity": "working"}) == "◎ ⟳ 3/40 · active"
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    handlers = "require('dsh.handlers').table()"
    at = "2026-11-29T18:40:18.123Z"
    editor.lua(f"{handlers}['dsh/session/event'](nil, ...)", {"agentId": "a-1", "sessionId": SID, "event": {
        "seq": 3, "type": "turn/open", "at": at, "turn": 1, "data": {"turn": 1, "cause": "prompt"}}})
    activity = f"{handlers}['dsh/agent/activity'](nil, ...)"
    editor.lua(activity, {"agentId": "a-1", "sessionId": SID, "activity": "working"})
    assert editor.lua("return require('dsh').statusline()") == "◎ ⟳ no goal"
    # The turn is still open, but it waits for the person: not "working".
    editor.lua(activity, {"agentId": "a-1", "sessionId": SID, "activity": "waiting", "question": "approval"})
    assert editor.lua("return require('dsh').statusline()") == "◎ waiting for you · no goal"
    assert editor.lua("return require('dsh.state').activity()") == "waiting"
    editor.lua(activity, {"agentId": "a-1", "sessionId": SID, "activity": "idle"})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"  # told idle: the open turn is not work
    # Paused only once nothing runs.
    editor.lua("require('dsh.state').set_goal('a-1', ...)", goal_view(3, 40, "paused", "disarmed"))
    assert editor.lua("return require('dsh.state').activity()") == "paused"
    editor.lua(activity, {"agentId": "a-1", "sessionId": SID, "activity": "working"})
    assert editor.lua("return require('dsh.state').activity()") == "working"


def test_times_in_words_and_session_labels(editor):
    ago = "return require('dsh.commands').ago(...)"
    now = editor.lua("return require('dsh.commands').epoch('2026-12-01T14:00:00Z')")
    assert now == 1796133600
    assert editor.lua("return require('dsh.commands').epoch('2026-12-01T16:00:00+02:00')") == now
    assert editor.lua(ago, "2026-12-01T13:59:30.5Z", now) == "just now"
    assert editor.lua(ago, "2026-12-01T13:55:00Z", now) == "5 min ago"
    assert editor.lua(ago, "2026-12-01T12:00:00Z", now) == "2 h ago"
    assert editor.lua(ago, "2026-11-30T10:00:00Z", now) == "yesterday"
    assert editor.lua(ago, "2026-11-26T14:00:00Z", now) == "5 days ago"
    assert editor.lua(ago, "2026-09-01T14:00:00Z", now) == "on 2026-09-01"
    label = editor.lua("return require('dsh.commands').session_label(...)", {
        "sessionId": SID, "title": "add retries", "updatedAt": "2026-12-01T12:00:00Z",
        "goal": goal_view(3, 40, "paused", "disarmed")}, now)
    assert label == "add retries  ·  2 h ago  ·  goal 3/40 · paused"
    # What the session's live agent does (loaded in the daemon by any editor), goal kept.
    label = editor.lua("return require('dsh.commands').session_label(...)", {
        "sessionId": SID, "title": "add retries", "updatedAt": "2026-12-01T12:00:00Z", "activity": "waiting",
        "question": "plan-review", "goal": goal_view(3, 40, "paused", "disarmed")}, now)
    assert label == "add retries  ·  2 h ago  ·  waiting for you: plan review  ·  goal 3/40 · paused"
    for extra, words in (({"activity": "waiting", "question": "approval"}, "waiting for you: approval"), ({"activity": "working"}, "working")):
        assert editor.lua("return require('dsh.commands').session_label(...)", {"sessionId": SID, **extra}, now) == f"Untitled session  ·  {words}"
    assert editor.lua("return require('dsh.commands').session_label(...)", {"sessionId": SID}, now) == "Untitled session"
    newest = editor.lua("return vim.tbl_map(function(s) return s.sessionId end, require('dsh.commands').newest_first(...))",
                        [{"sessionId": "a", "updatedAt": "2026-12-01T10:00:00Z"},
                         {"sessionId": "b", "updatedAt": "2026-12-01T12:00:00Z"}])
    assert newest == ["b", "a"]


def test_a_long_notice_is_one_line_and_kept_whole(editor):
    editor.nvim.options["columns"] = 60
    long = "the model server answered 500 Internal Server Error: " + "details " * 40
    editor.lua("require('dsh.errors').notify(...)", long)
    shown = editor.messages()[-1]
    width = editor.lua("return vim.fn.strdisplaywidth(...)", shown)
    assert width <= 60 - 12 and shown.endswith("… (:Dsh messages)"), shown
    assert editor.lua("return require('dsh.errors').history[#require('dsh.errors').history].text") == "dsh: " + long
    editor.typed("Dsh messages")
    editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://messages', 1, true)")
    assert long.strip() in " ".join(editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert editor.lua("return require('dsh.errors').fit('short', 40)") == "short"


def test_a_stale_notice_is_cleared(editor):
    editor.lua("require('dsh.errors').clear_after_ms = 200")
    editor.lua("require('dsh.errors').notify('approval of Edit a.txt closed: the turn ended.', vim.log.levels.WARN)")
    assert "approval of Edit a.txt closed" in editor.lua("return require('dsh.errors').showing()")
    # Cleared from the screen once stale (it stays in :messages and :Dsh messages).
    editor.wait_for("require('dsh.errors').showing() == nil", timeout=5, what="the notice to be cleared")
    assert "approval of Edit a.txt closed" in editor.lua("return vim.fn.execute('messages')")
    # A notice that something else replaced is left alone (it is not on screen any more).
    editor.lua("require('dsh.errors').clear_after_ms = 300")
    editor.lua("require('dsh.errors').notify('first', vim.log.levels.INFO)")
    editor.lua("vim.api.nvim_echo({ { 'the person\\'s own message' } }, true, {})")
    import time
    time.sleep(0.6)
    assert editor.lua("return require('dsh.errors').showing()") == "dsh: first"


def test_partial_plan_and_waiting_tool_call_words(editor):
    fmt = "return require('dsh.chat.formatters').format(...).lines"
    plan = {"id": "tool-1.1.c1", "kind": "plan-review", "turn": 1, "callId": "c1", "questionId": "plan-review-c1",
            "title": "Plan: x", "plan": "# Plan: x\n1. one", "outcome": "pending",
            "outcomeText": "waiting for your review", "partial": True}
    lines = editor.lua(fmt, plan)
    assert lines[1] == "### Plan: x · being written…" and not any("waiting for your review" in l for l in lines)
    done = editor.lua(fmt, {**plan, "partial": False})
    assert done[1] == "### Plan: x · waiting for your review" and not any("▍" in l for l in done)
    call = {"id": "tool-1.1.c2", "kind": "tool-call", "turn": 1, "callId": "c2", "name": "edit_file",
            "title": "Edit a.txt", "status": "running", "partial": False, "arguments": {"path": "a.txt"}}
    assert editor.lua(fmt, {**call, "waitingFor": "Edit a.txt · allow?"})[2] == \
        "  ⏸ waiting for you: Edit a.txt · allow? · ga or :Dsh answer opens it"
    assert not any("waiting" in l for l in editor.lua(fmt, call))
    # The daemon's own "waiting" (its approval is open): said in the head, once.
    waiting = {**call, "status": "waiting"}
    assert editor.lua(fmt, waiting)[1] == "▸ Edit a.txt ⏸ waiting for you"
    both = editor.lua(fmt, {**waiting, "waitingFor": "Edit a.txt · allow?"})
    assert both[1] == "▸ Edit a.txt ⏸" and sum("waiting for you" in l for l in both) == 1


def test_statusline_shows_plan_mode_and_a_busy_mark(editor):
    fmt = "return require('dsh.statusline').format(...)"
    assert editor.lua(fmt, goal_view(3, 40), {"plan": True}) == "◎ plan · 3/40 · active"
    assert editor.lua(fmt, goal_view(3, 40), {"busy": True}) == "◎ ⟳ 3/40 · active"
    assert editor.lua(fmt, None, {"plan": True, "busy": True}) == "◎ ⟳ plan · no goal"
    # The marks follow the daemon: plan mode from dsh/plan/changed, busy from turn events.
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    handlers = "require('dsh.handlers').table()"
    editor.lua(f"{handlers}['dsh/plan/changed'](nil, ...)", {"agentId": "a-1", "sessionId": SID, "active": True})
    assert editor.lua("return require('dsh').statusline()") == "◎ plan · no goal"
    at = "2026-11-29T18:40:18.123Z"
    editor.lua(f"{handlers}['dsh/session/event'](nil, ...)", {"agentId": "a-1", "sessionId": SID, "event": {
        "seq": 3, "type": "turn/open", "at": at, "turn": 1, "data": {"turn": 1, "cause": "continuation"}}})
    assert editor.lua("return require('dsh').statusline()") == "◎ ⟳ plan · no goal"
    editor.lua(f"{handlers}['dsh/session/event'](nil, ...)", {"agentId": "a-1", "sessionId": SID, "event": {
        "seq": 9, "type": "turn/close", "at": at, "turn": 1, "data": {"turn": 1, "stopReason": "end-turn"}}})
    assert editor.lua("return require('dsh').statusline()") == "◎ plan · no goal"


@pytest.mark.parametrize(
    ("view", "text"),
    [
        (None, "no goal"),
        (goal_view(3, 40), "3 of 40 rounds used · active"),
        (goal_view(3, 40, activation="disarmed"), "3 of 40 rounds used · waiting for you to resume"),
        (goal_view(3, 40, tokensUsed=12400, maxTokens=50000), "3 of 40 rounds used, 12.4k of 50k tokens · active"),
        (goal_view(40, 40, "blocked", "disarmed", blockedReason={"code": "x", "message": "y"}),
         "40 of 40 rounds used · blocked: x"),
    ],
)
def test_goal_described_in_words(editor, view, text):
    assert editor.lua("return require('dsh.statusline').describe(...)", view) == text


@pytest.mark.parametrize(
    ("view", "verbs"),
    [
        (None, ["create"]),
        (goal_view(3, 40), ["edit", "pause", "complete", "block", "clear", "disarm"]),
        (goal_view(3, 40, activation="disarmed"), ["edit", "pause", "resume", "complete", "block", "clear"]),
        (goal_view(3, 40, "paused", "disarmed"), ["edit", "resume", "complete", "block", "clear"]),
        (goal_view(40, 40, "blocked", "disarmed", blockedReason={"code": "x", "message": "y"}),
         ["edit", "complete", "clear"]),
        (goal_view(9, 40, "complete", "disarmed"), ["create", "clear"]),
    ],
)
def test_goal_verbs_follow_the_phase(editor, view, verbs):
    assert editor.lua("return require('dsh.commands').goal_verbs(...)", view) == verbs


def test_goal_completion_offers_only_what_the_phase_allows(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.lua("require('dsh.state').set_goal('a-1', ...)", goal_view(9, 40, "complete", "disarmed"))
    # (and the timeline, a read whatever the phase)
    assert editor.lua("return vim.fn.getcompletion('Dsh goal ', 'cmdline')") == ["create", "clear", "timeline"]
    detail = editor.lua("return require('dsh.commands').describe_goal(...)", goal_view(9, 40, "complete", "disarmed"))
    assert "resume" not in detail and "Rounds: 9 of 40 used, 31 left" in detail
    assert "evision" not in detail  # no internal words (U-6)


@pytest.mark.parametrize(
    ("view", "group"),
    [
        (goal_view(3, 40), None),
        (goal_view(3, 40, activation="disarmed"), "DiagnosticHint"),
        (goal_view(40, 40, "blocked", "disarmed", blockedReason={"code": "x", "message": "y"}), "DiagnosticWarn"),
        (goal_view(3, 40, "paused", "disarmed"), None),
    ],
)
def test_statusline_highlight(editor, view, group):
    assert editor.lua("return require('dsh.statusline').highlight(...)", view) == group


def test_statusline_follows_goal_changed_for_the_current_agent_only(editor):
    notify = "require('dsh.handlers').table()['dsh/goal/changed'](nil, ...)"
    # No session: nothing to show.
    assert editor.lua("return require('dsh').statusline()") == ""
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"

    editor.lua(notify, {"agentId": "a-1", "sessionId": SID, "op": "create", "revision": 1,
                        "goal": goal_view(0, 40)})
    assert editor.lua("return require('dsh').statusline()") == "◎ 0/40 · active"
    editor.lua(notify, {"agentId": "a-1", "sessionId": SID, "op": "round", "revision": 1,
                        "goal": goal_view(1, 40)})
    assert editor.lua("return require('dsh').statusline()") == "◎ 1/40 · active"

    # Another agent's goal does not touch this statusline.
    editor.lua(notify, {"agentId": "a-2", "sessionId": SID, "op": "create", "revision": 1,
                        "goal": goal_view(5, 9)})
    assert editor.lua("return require('dsh').statusline()") == "◎ 1/40 · active"

    editor.lua(notify, {"agentId": "a-1", "sessionId": SID, "op": "disarm", "revision": 1,
                        "goal": goal_view(1, 40, activation="disarmed")})
    assert editor.lua("return require('dsh').statusline()") == "◎ 1/40 · waiting for you to resume"
    # After clear the notification has no goal field.
    editor.lua(notify, {"agentId": "a-1", "sessionId": SID, "op": "clear", "revision": 2})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"
    assert editor.lua("return _G.dsh_test.statuses") == [
        "◎ no goal", "◎ 0/40 · active", "◎ 1/40 · active", "◎ 1/40 · waiting for you to resume", "◎ no goal",
    ]
    # It works as a statusline expression.
    editor.lua(notify, {"agentId": "a-1", "sessionId": SID, "op": "create", "revision": 3,
                        "goal": goal_view(2, 40)})
    editor.cmd("set laststatus=2 statusline=%{v:lua.require'dsh'.statusline()}")
    shown = editor.lua(
        "return vim.api.nvim_eval_statusline(vim.o.statusline, {}).str"
    )
    assert shown == "◎ 2/40 · active"


def test_statusline_is_cheap(editor):
    per_call_us = editor.lua(
        """
        require('dsh.state').set_current('a-1', ...)
        local statusline = require('dsh').statusline
        local n = 200000
        local t0 = vim.uv.hrtime()
        for _ = 1, n do statusline() end
        return (vim.uv.hrtime() - t0) / n / 1000
        """,
        SID,
    )
    write_artifact("statusline-cost.txt", f"require('dsh').statusline(): {per_call_us:.3f} µs per call\n")
    assert per_call_us < 5, per_call_us


def test_plan_changed_tracks_plan_state(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    handler = "require('dsh.handlers').table()['dsh/plan/changed'](nil, ...)"
    editor.lua(handler, {"agentId": "a-1", "sessionId": SID, "active": True})
    assert editor.lua("return require('dsh').plan_active()") is True
    editor.lua(handler, {"agentId": "a-1", "sessionId": SID, "active": True, "pending": False})
    assert editor.lua("return require('dsh.state').plan()") == {"active": True, "pending": False}
    editor.lua(handler, {"agentId": "a-1", "sessionId": SID, "active": False})
    assert editor.lua("return require('dsh').plan_active()") is False


# ---- :Dsh parsing and completion -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "action"),
    [
        ("", {"action": "status"}),
        ("session new", {"action": "session.new"}),
        ("session new my work", {"action": "session.new", "title": "my work"}),
        ("session open", {"action": "session.open", "reload": False}),
        (f"session open {SID}", {"action": "session.open", "session_id": SID, "reload": False}),
        ("session list", {"action": "session.list"}),
        ("session fork", {"action": "session.fork"}),
        ("session fork 12", {"action": "session.fork", "at_seq": 12}),
        ("session close", {"action": "session.close"}),
        ("prompt  fix  the  bug ", {"action": "prompt", "text": "fix  the  bug"}),
        ("prompt /plan write a plan", {"action": "prompt", "text": "/plan write a plan"}),
        ("steer also run lint", {"action": "steer", "text": "also run lint"}),
        ("cancel", {"action": "cancel"}),
        ("plan", {"action": "plan.show"}),
        ("plan on", {"action": "plan.set", "active": True}),
        ("plan off", {"action": "plan.set", "active": False}),
        ("goal", {"action": "goal.show"}),
        ("goal create fix the tests", {"action": "goal.create", "objective": "fix the tests"}),
        ("goal create fix the tests 40",
         {"action": "goal.create", "objective": "fix the tests", "max_rounds": 40}),
        ("goal create 40", {"action": "goal.create", "objective": "40"}),
        ("goal edit", {"action": "goal.edit"}),
        ("goal edit 80", {"action": "goal.edit", "max_rounds": 80}),
        ("goal edit ship it", {"action": "goal.edit", "objective": "ship it"}),
        ("goal edit ship it 12", {"action": "goal.edit", "objective": "ship it", "max_rounds": 12}),
        ("goal create fix the tests 40 200k tokens",
         {"action": "goal.create", "objective": "fix the tests", "max_rounds": 40, "max_tokens": 200000}),
        ("goal create fix the tests 1.5M tokens",
         {"action": "goal.create", "objective": "fix the tests", "max_tokens": 1500000}),
        ("goal edit 400k tokens", {"action": "goal.edit", "max_tokens": 400000}),
        ("goal edit 60 250000 tok", {"action": "goal.edit", "max_rounds": 60, "max_tokens": 250000}),
        ("goal pause", {"action": "goal.pause"}),
        ("goal resume", {"action": "goal.resume"}),
        ("goal complete", {"action": "goal.complete"}),
        ("goal clear", {"action": "goal.clear"}),
        ("goal disarm", {"action": "goal.disarm"}),
        ("goal block waiting-for-ci the CI is red",
         {"action": "goal.block", "code": "waiting-for-ci", "message": "the CI is red"}),
        ("transcript", {"action": "transcript"}),
        ("chat", {"action": "chat", "where": "split"}),
        ("chat tab", {"action": "chat", "where": "tab"}),
        ("chat older", {"action": "chat.older"}),
        ("stop", {"action": "cancel"}),
        ("config", {"action": "config"}),
        ("trust", {"action": "trust"}),
        ("sandbox", {"action": "permission.show"}),
        ("sandbox read-only", {"action": "permission.set", "sandbox": "read-only"}),
        ("approve", {"action": "permission.show"}),
        ("approve none", {"action": "permission.set", "approve": []}),
        ("approve write exec", {"action": "permission.set", "approve": ["write", "exec"]}),
        ("approve write,exec", {"action": "permission.set", "approve": ["write", "exec"]}),
        ("restart", {"action": "restart"}),
    ],
)
def test_parse(editor, args, action):
    assert editor.lua("return require('dsh.commands').parse(...)", args, False) == action


def test_parse_bang_reloads(editor):
    assert editor.lua("return require('dsh.commands').parse(...)", f"session open {SID}", True) == {
        "action": "session.open", "session_id": SID, "reload": True}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ("frobnicate", "unknown subcommand"),
        ("prompt", "usage: :Dsh prompt {text}"),
        ("steer   ", "usage: :Dsh steer {text}"),
        ("plan maybe", "usage: :Dsh plan"),
        ("goal create x 0k tokens", "the token budget must be a positive whole number"),
        ("goal create 0", None),  # "0" alone is an objective, not a budget
        ("goal create fix 0", "rounds must be a positive whole number"),
        ("goal edit 0", "rounds must be a positive whole number"),
        ("goal edit 0k tokens", "the token budget must be a positive whole number"),
        ("goal block Bad-Code oops", "lowercase-kebab-case"),
        ("goal block a--b oops", "lowercase-kebab-case"),
        ("goal block -a oops", "lowercase-kebab-case"),
        ("goal block waiting", "usage: :Dsh goal block"),
        ("goal pause now", "no arguments"),
        ("goal explode", "usage: :Dsh goal"),
        ("session fork x", "seq to fork at"),
        ("session fork 0", "seq to fork at"),
        ("session", "usage: :Dsh session"),
        ("cancel everything", "no arguments"),
        ("sandbox loose", "usage: :Dsh sandbox"),
        ("approve write write", "each class once"),
        ("approve everything", "usage: :Dsh approve"),
    ],
)
def test_parse_rejects_with_usage(editor, args, needle):
    action, error = editor.lua("return {require('dsh.commands').parse(...)}", args, False) + [None] * 0, None
    result = editor.lua("local a, e = require('dsh.commands').parse(...); return {a or vim.NIL, e or vim.NIL}", args, False)
    if needle is None:
        assert result[0] is not None and result[1] is None
    else:
        assert result[0] is None
        assert needle in result[1]


def test_bad_command_is_a_clear_message_and_sends_nothing(editor):
    editor.typed("Dsh goal block Bad oops")
    editor.wait_for("#_G.dsh_test.messages > 0")
    assert any("lowercase-kebab-case" in m for m in editor.messages())
    # Parsing failed before anything started: no daemon was launched.
    assert editor.lua("return #vim.lsp.get_clients({ name = 'dsh' })") == 0


@pytest.mark.parametrize(
    ("cmdline", "arglead", "expected"),
    [
        ("Dsh ", "", ["answer", "approve", "cancel", "chat", "config", "goal", "messages", "plan", "prompt", "restart",
                      "rewind", "sandbox", "session", "steer", "stop", "transcript", "trust"]),
        ("Dsh s", "s", ["sandbox", "session", "steer", "stop"]),
        ("Dsh chat ", "", ["split", "tab", "here", "older"]),
        ("Dsh rewind ", "", ["list"]),
        ("Dsh session ", "", ["new", "open", "list", "fork", "close"]),
        ("Dsh goal p", "p", ["pause"]),
        ("Dsh goal ", "", ["create", "edit", "raise", "pause", "resume", "complete", "clear", "disarm", "block",
                           "timeline"]),
        ("Dsh plan o", "o", ["on", "off"]),
        ("Dsh prompt some", "some", []),
    ],
)
def test_completion(editor, cmdline, arglead, expected):
    got = editor.lua("return vim.fn.getcompletion(..., 'cmdline')", cmdline)
    assert got == expected
    direct = editor.lua("return require('dsh.commands').complete(...)", arglead, cmdline, len(cmdline))
    assert direct == expected


def test_completion_offers_listed_session_ids(editor):
    editor.lua("require('dsh.state').sessions = ...", [{"sessionId": SID, "title": "t"}])
    assert editor.lua("return vim.fn.getcompletion('Dsh session open ', 'cmdline')") == [SID]


# ---- setup and client config ----------------------------------------------------------


def test_setup_rejects_unknown_and_mistyped_options(editor):
    ok, err = editor.lua("return {pcall(require('dsh').setup, { autostrat = true })}")
    assert not ok and "unknown option" in err and "autostrat" in err
    ok, err = editor.lua("return {pcall(require('dsh').setup, { cmd = 'dshd serve' })}")
    assert not ok and "cmd" in err


def test_client_config_declares_questions_and_handles_every_method(editor):
    editor.lua("require('dsh').setup({ cmd = { '/opt/dshd', 'serve' }, config = { plan = { section = 'x' } } })")
    # A user's vim.lsp.config cannot drop the protocol capability or handlers.
    editor.lua("vim.lsp.config('dsh', { capabilities = { experimental = { other = true } } })")
    cfg = editor.lua(
        """
        local cfg = require('dsh.config').client_config('/tmp/ws')
        local handlers = vim.tbl_keys(cfg.handlers); table.sort(handlers)
        return { cmd = cfg.cmd, caps = cfg.capabilities.experimental, root = cfg.root_dir,
                 init = cfg.init_options, handlers = handlers, name = cfg.name }
        """
    )
    assert cfg["cmd"] == ["/opt/dshd", "serve"]
    assert cfg["caps"]["dsh"] == {"questions": True, "permissions": True}
    assert cfg["root"] == "/tmp/ws"
    assert cfg["init"] == {"config": {"plan": {"section": "x"}}, "trusted": False}
    assert cfg["name"] == "dsh"
    assert cfg["handlers"] == ["$/cancelRequest", "dsh/agent/activity", "dsh/agent/delta", "dsh/chat/item", "dsh/goal/changed",
                               "dsh/permission/ask", "dsh/plan/changed", "dsh/question/resolved", "dsh/questions/ask",
                               "dsh/session/clients", "dsh/session/event", "window/showMessage"]


def test_lsp_config_table_is_lspconfig_shaped(editor):
    cfg = editor.lua(
        """
        local c = dofile(vim.api.nvim_get_runtime_file('lsp/dsh.lua', false)[1])
        return { cmd = c.cmd, markers = c.root_markers, caps = c.capabilities,
                 resolved = vim.lsp.config.dsh.cmd }
        """
    )
    assert cfg["cmd"] == ["dshd", "connect"]
    assert cfg["markers"] == [".dsh", ".git"]
    assert cfg["caps"] == {"experimental": {"dsh": {"questions": True, "permissions": True}}}
    assert cfg["resolved"] == ["dshd", "connect"]


def test_root_is_found_by_markers(editor, tmp_path):
    (tmp_path / "ws" / ".dsh").mkdir(parents=True)
    (tmp_path / "ws" / "src" / "deep").mkdir(parents=True)
    root = editor.lua("return require('dsh.config').find_root(...)", str(tmp_path / "ws" / "src" / "deep"))
    assert root == str(tmp_path / "ws")


def test_missing_dshd_is_reported_with_what_to_do(editor, tmp_path):
    editor.lua("require('dsh').setup({ cmd = { ... } })", str(tmp_path / "no-such-dshd"))
    editor.typed("Dsh session new")
    editor.wait_for("#_G.dsh_test.messages > 0")
    assert any("dshd not found" in m and "checkhealth" in m for m in editor.messages())


# ---- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        ({"kind": "stale-revision", "current": 7}, ["changed meanwhile", "retry"]),
        ({"kind": "stale-agent"}, [":Dsh session open"]),
        ({"kind": "unknown-agent"}, [":Dsh session open"]),
        ({"kind": "invalid-transition", "phase": "complete"}, ["cannot pause the goal", "complete"]),
        ({"kind": "no-goal"}, [":Dsh goal create"]),
        ({"kind": "budget-exhausted"}, [":Dsh goal edit"]),
        ({"kind": "turn-open"}, [":Dsh steer", ":Dsh cancel"]),
        ({"kind": "session-locked", "pid": 4242}, ["4242"]),
        ({"kind": "replay-failed", "seq": 12, "line": 12, "reason": "seq gap"}, ["line 12", "seq gap", "dshd log verify"]),
        ({"kind": "invalid-config", "key": "plan.section"}, ["plan.section", ".dsh/config.toml", ":Dsh config"]),
        ({"kind": "plugin-not-loaded"}, ["plugins", ".dsh/config.toml"]),
        ({"kind": "plugin-not-loaded", "plugin": "checkpoints"}, ['Add "checkpoints" to `plugins` in .dsh/config.toml']),
        ({"kind": "invalid-params", "field": "maxRounds"}, ["refused", "Check what you typed"]),
    ],
)
def test_error_messages_say_what_to_do(editor, data, needles):
    err = {"code": -32000, "message": "refused", "data": data}
    message = editor.lua(
        "return (require('dsh.errors').describe(..., { context = 'pause the goal' }))", err
    )
    for needle in needles:
        assert needle in message, message


def test_failed_initialize_error_text_is_read_back(editor):
    # Neovim reports a failed `initialize` only as text (vim.lsp.rpc.format_rpc_error).
    err = editor.lua(
        """
        local text = 'assertion failed: ' .. vim.lsp.rpc.format_rpc_error({ code = -32008,
          message = 'invalid config: plan.section must be a non-blank string',
          data = { kind = 'invalid-config', key = 'plan.section' } })
        return require('dsh.client').parse_rpc_error_text(text)
        """
    )
    assert err == {"code": -32008, "message": "invalid config: plan.section must be a non-blank string",
                   "data": {"kind": "invalid-config", "key": "plan.section"}}
    assert editor.lua("return require('dsh.client').parse_rpc_error_text('boom')") is None


def test_error_kinds_cover_the_protocol(editor):
    import json

    schema = json.loads((PLUGIN_DIR.parents[1] / "protocol" / "dshd_protocol" /
                         "dsh-protocol.schema.json").read_text())
    for kind in schema["errors"]:
        message = editor.lua(
            "return (require('dsh.errors').describe(...))",
            {"code": -32000, "message": "m", "data": {"kind": kind}},
        )
        assert not message.startswith("request failed"), (kind, message)


# ---- plan review float ---------------------------------------------------------------

PLAN = "# Plan: fix the parser\n\n1. Read the grammar\n2. Add the failing test\n3. Fix it\n"
ASK = {
    "agentId": "a-1",
    "sessionId": SID,
    "questions": [{"id": "q-1", "kind": "plan-review", "title": "Review the plan",
                   "plan": PLAN, "choices": ["approve", "revise"]}],
}

# Run the real handler the way Neovim runs a server request: inside a coroutine.
START_ASK = """
_G.review_result, _G.review_error = nil, nil
local co = coroutine.create(function(params)
  _G.review_result, _G.review_error = require('dsh.handlers').table()['dsh/questions/ask'](nil, params, {})
end)
assert(coroutine.resume(co, ...))
return coroutine.status(co)
"""


def open_review(editor, ask=ASK):
    """The review float, taken as the person would after it showed: keys answer at once
    (the 500 ms guard against keys in flight is tested on its own below)."""
    editor.lua("require('dsh.float').guard_ms = 0")
    assert editor.lua(START_ASK, ask) == "suspended"
    editor.wait_for("#require('dsh.review').list() == 1", what="the review float")
    return editor.lua(
        """
        local win = vim.api.nvim_get_current_win()
        local cfg = vim.api.nvim_win_get_config(win)
        return { relative = cfg.relative, lines = vim.api.nvim_buf_get_lines(0, 0, -1, false),
                 ft = vim.bo.filetype, modifiable = vim.bo.modifiable }
        """
    )


def review_shown(editor) -> bool:
    return editor.lua("local r = require('dsh.review').list()[1]; return r ~= nil and r.win ~= nil"
                      " and vim.api.nvim_win_is_valid(r.win)")


def test_review_float_shows_the_plan_and_a_approves(editor):
    shown = open_review(editor)
    assert shown["relative"] == "editor"
    assert shown["lines"] == PLAN.split("\n")[:-1]  # the plan's lines, numbered as in the plan
    assert shown["ft"] == "markdown" and shown["modifiable"] is False
    # The editor is free while the question waits: other work runs.
    assert editor.lua("return 1 + 1") == 2
    editor.feed("a")
    result = editor.wait_for("_G.review_result")
    assert result == {"answers": [{"id": "q-1", "choice": "approve"}]}
    assert editor.lua("return #require('dsh.review').list()") == 0
    assert editor.lua("return vim.api.nvim_win_get_config(0).relative") == ""


def test_review_r_sends_feedback_and_line_comments(editor):
    open_review(editor)
    editor.feed("3G")
    editor.feed("c")
    editor.feed("read it twice<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] ~= nil")
    editor.feed("5G")
    editor.feed("c")
    editor.feed("which test?<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[5] ~= nil")
    marks = editor.lua(
        "return vim.tbl_map(function(m) return m[2] end, vim.api.nvim_buf_get_extmarks(0, "
        "vim.api.nvim_create_namespace('dsh.review'), 0, -1, {}))"
    )
    assert marks == [2, 4]
    editor.feed("r")
    editor.feed("split step 2<CR>")
    result = editor.wait_for("_G.review_result")
    assert result == {"answers": [{
        "id": "q-1", "choice": "revise", "feedback": "split step 2",
        "comments": [{"line": 3, "text": "read it twice"}, {"line": 5, "text": "which test?"}],
    }]}


def test_review_comment_can_be_edited_and_removed(editor):
    open_review(editor)
    editor.feed("3Gc")
    editor.feed("first<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] == 'first'")
    editor.feed("c")
    editor.feed("<C-u>second<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] == 'second'")
    editor.feed("4Gc")
    editor.feed("gone soon<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[4] ~= nil")
    editor.feed("c")
    editor.feed("<C-u><CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[4] == nil")
    editor.feed("r")
    editor.feed("<CR>")
    result = editor.wait_for("_G.review_result")
    assert result == {"answers": [{"id": "q-1", "choice": "revise",
                                   "comments": [{"line": 3, "text": "second"}]}]}


def test_review_cancelled_feedback_keeps_the_review_open(editor):
    open_review(editor)
    editor.feed("r")
    editor.feed("<Esc>")
    editor.wait_for("vim.fn.mode() == 'n'")
    assert editor.lua("return _G.review_result") is None
    assert editor.lua("return #require('dsh.review').list()") == 1
    editor.feed("a")
    assert editor.wait_for("_G.review_result") == {"answers": [{"id": "q-1", "choice": "approve"}]}


def test_review_q_decides_nothing_and_answer_brings_it_back(editor):
    open_review(editor)
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.feed("q")
    editor.wait_for("not (function() local r = require('dsh.review').list()[1]; return vim.api.nvim_win_is_valid(r.win) end)()",
                    what="the float to close")
    import time
    time.sleep(0.3)
    # Still open: nothing was answered, and the statusline says it waits for you.
    assert editor.lua("return _G.review_result") is None
    assert editor.lua("return #require('dsh.review').list()") == 1
    assert editor.lua("return require('dsh').statusline()") == "◎ waiting for you · no goal"
    editor.typed("Dsh answer")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win", what="the float back, focused")
    editor.feed("a")
    assert editor.wait_for("_G.review_result") == {"answers": [{"id": "q-1", "choice": "approve"}]}
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"


def test_review_closed_any_other_way_decides_nothing(editor):
    open_review(editor)
    editor.cmd("close")
    import time
    time.sleep(0.3)
    assert editor.lua("return _G.review_result") is None
    assert editor.lua("return #require('dsh.review').list()") == 1
    editor.lua("require('dsh.asks').show_next()")
    assert review_shown(editor)


def test_review_withdrawn_when_the_turn_closes(editor):
    open_review(editor)
    editor.feed("q")  # hidden, still open: the daemon's end of the turn still closes it
    editor.lua(
        "require('dsh.handlers').table()['dsh/session/event'](nil, ...)",
        {"agentId": "a-1", "sessionId": SID, "event": {
            "seq": 9, "type": "turn/close", "at": "2026-11-29T18:40:18.123Z", "turn": 1,
            "data": {"turn": 1, "stopReason": "cancelled"}}},
    )
    # Ended unanswered: the request is answered RequestCancelled, never with an answer.
    assert editor.wait_for("_G.review_error")["code"] == -32800
    assert editor.lua("return _G.review_result") is None
    assert any("plan review closed" in m for m in editor.messages())
    assert editor.lua("return #require('dsh.asks').waiting()") == 0


def test_review_float_numbers_wraps_and_says_it_scrolls(editor):
    long_plan = "# Plan: a long one\n\n" + "\n".join(
        f"{i}. step {i}: " + "a reasonably long sentence that has to wrap at a word boundary " * 2 for i in range(1, 60)
    ) + "\n"
    ask = {**ASK, "questions": [{**ASK["questions"][0], "plan": long_plan}]}
    open_review(editor, ask)
    shown = editor.lua(
        """
        local win = vim.api.nvim_get_current_win()
        local cfg = vim.api.nvim_win_get_config(win)
        local footer = {}
        for _, c in ipairs(cfg.footer) do table.insert(footer, c[1]) end
        return { number = vim.wo[win].number, wrap = vim.wo[win].wrap, linebreak = vim.wo[win].linebreak,
                 footer = table.concat(footer), height = cfg.height, lines = vim.o.lines }
        """
    )
    assert shown["number"] and shown["wrap"] and shown["linebreak"]
    assert shown["height"] <= shown["lines"] - 8
    assert "↓" in shown["footer"] and "of 61" in shown["footer"], shown["footer"]
    editor.feed("G")
    editor.wait_for("(function() local c = vim.api.nvim_win_get_config(0).footer; return c[#c][1]:find('↑', 1, true) end)()")
    editor.feed("a")
    assert editor.wait_for("_G.review_result") == {"answers": [{"id": "q-1", "choice": "approve"}]}


def test_review_scroll_text(editor):
    text = "return require('dsh.float').scroll_text(...)"
    assert editor.lua(text, 1, 5, 5) == ""
    assert editor.lua(text, 1, 20, 45) == "lines 1-20 of 45 ↓"
    assert editor.lua(text, 10, 30, 45) == "lines 10-30 of 45 ↕"
    assert editor.lua(text, 26, 45, 45) == "lines 26-45 of 45 ↑"


def comment_line_3(editor, text="read it twice"):
    editor.feed("3Gc")
    editor.feed(f"{text}<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] ~= nil")


def test_review_closed_with_a_comment_keeps_it_for_later(editor):
    open_review(editor)
    comment_line_3(editor)
    editor.feed("q")
    editor.wait_for("not " + "(function() local r = require('dsh.review').list()[1]; return vim.api.nvim_win_is_valid(r.win) end)()")
    assert editor.lua("return _G.review_result") is None
    editor.typed("Dsh answer")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")
    # The comment is still there, on screen and in the answer.
    marks = editor.lua("return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('dsh.review'), 0, -1, {})")
    assert marks == 1
    editor.feed("r")
    editor.feed("<CR>")
    assert editor.wait_for("_G.review_result") == {"answers": [{
        "id": "q-1", "choice": "revise", "comments": [{"line": 3, "text": "read it twice"}]}]}


def test_review_approve_with_a_comment_asks(editor):
    open_review(editor)
    comment_line_3(editor)
    editor.feed("a")
    editor.feed("<CR>")  # keep reviewing
    editor.wait_for("vim.fn.mode() == 'n'")
    assert editor.lua("return _G.review_result") is None
    assert "your 1 comment would be dropped" in editor.asked()[-1]
    editor.feed("a")
    editor.feed("3<CR>")  # approve and drop them
    assert editor.wait_for("_G.review_result") == {"answers": [{"id": "q-1", "choice": "approve"}]}


def test_review_feedback_abandoned_with_esc_is_kept_as_a_draft(editor):
    open_review(editor)
    editor.feed("r")
    editor.feed("split step 2")
    editor.feed("<Esc>")
    editor.wait_for("require('dsh.review').list()[1].feedback == 'split step 2'")
    editor.feed("q")  # closed: the draft stays with the review
    editor.wait_for("vim.fn.mode() == 'n'")
    editor.typed("Dsh answer")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")
    editor.feed("r")  # the prompt starts with the draft
    editor.feed(" first<CR>")
    assert editor.wait_for("_G.review_result") == {"answers": [{
        "id": "q-1", "choice": "revise", "feedback": "split step 2 first"}]}


def test_review_withdrawn_keeps_drafts_in_the_message(editor):
    # The daemon's question for tool call c-7 is "plan-review-c-7".
    ask = {**ASK, "questions": [{**ASK["questions"][0], "id": "plan-review-c-7"}]}
    open_review(editor, ask)
    comment_line_3(editor, "read it twice")
    result = {"agentId": "a-1", "sessionId": SID, "event": {
        "seq": 9, "type": "tool/result", "at": "2026-11-29T18:40:18.123Z", "turn": 1,
        "data": {"callId": "c-6", "ok": False, "content": "x"}}}
    editor.lua("require('dsh.handlers').table()['dsh/session/event'](nil, ...)", result)
    assert editor.lua("return #require('dsh.review').list()") == 1  # another call's result
    result["event"]["data"]["callId"] = "c-7"
    editor.lua("require('dsh.handlers').table()['dsh/session/event'](nil, ...)", result)
    assert editor.wait_for("_G.review_error")["code"] == -32800
    message = [m for m in editor.messages() if "plan review closed" in m][0]
    assert "line 3: read it twice" in message or "(:Dsh messages)" in message
    full = editor.lua("return require('dsh.errors').history[#require('dsh.errors').history].text")
    assert "line 3: read it twice" in full


# ---- U-1: a question that opens while the person types ---------------------------------


def test_a_review_that_opens_while_typing_takes_no_keys(editor):
    """Typing in a buffer in Insert mode when the review arrives: the float shows beside
    the cursor without the focus, the person keeps typing there, and they are told."""
    editor.cmd("enew")
    editor.feed("ifirst words a")
    editor.wait_for("vim.fn.mode() == 'i'")
    assert editor.lua(START_ASK, ASK) == "suspended"
    editor.wait_for("#require('dsh.review').list() == 1")
    editor.feed("s r q and more")  # answer letters among them
    editor.wait_for("vim.api.nvim_get_current_line() == 'first words as r q and more'")
    state = editor.lua("""
        local r = require('dsh.review').list()[1]
        return { mode = vim.fn.mode(), current = vim.api.nvim_get_current_win() == r.win,
                 shown = vim.api.nvim_win_is_valid(r.win), result = _G.review_result or vim.NIL }
    """)
    assert state == {"mode": "i", "current": False, "shown": True, "result": None}
    title = editor.lua("local c = vim.api.nvim_win_get_config(require('dsh.review').list()[1].win);"
                       " return c.title[1][1]")
    assert title == " Review the plan · :Dsh answer or ga to answer "
    assert any("waits for you: :Dsh answer" in m for m in editor.messages()), editor.messages()
    # The float keeps clear of the row the person types on.
    rows = editor.lua("""
        local r = require('dsh.review').list()[1]
        local cfg = vim.api.nvim_win_get_config(r.win)
        return { top = cfg.row, height = cfg.height, cursor = vim.fn.screenrow() }
    """)
    assert not (rows["top"] <= rows["cursor"] - 1 <= rows["top"] + rows["height"] + 1), rows


def test_the_first_question_after_a_key_in_normal_mode_takes_no_focus(editor):
    # Keys are timed from startup, not from when the question code first loads.
    assert editor.lua("return package.loaded['dsh.float'] == nil")
    editor.feed("0")  # a Normal-mode command, just typed
    editor.wait_for("require('dsh.keys').last_at > 0")
    assert editor.lua(START_ASK, ASK) == "suspended"
    editor.wait_for("#require('dsh.review').list() == 1")
    assert not editor.lua("return vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")


def test_keys_in_the_first_500_ms_answer_nothing(editor):
    assert editor.lua(START_ASK, ASK) == "suspended"  # the person is idle: the float takes the focus
    editor.wait_for("#require('dsh.review').list() == 1")
    assert editor.lua("return vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")
    editor.feed("a")
    import time
    time.sleep(0.2)
    assert editor.lua("return _G.review_result") is None  # too soon: a key in flight
    time.sleep(0.5)
    editor.feed("a")
    assert editor.wait_for("_G.review_result") == {"answers": [{"id": "q-1", "choice": "approve"}]}


def test_other_letters_answer_nothing(editor):
    open_review(editor)
    editor.feed("xyzbnmeiop")
    import time
    time.sleep(0.3)
    assert editor.lua("return _G.review_result") is None
    assert editor.lua("return #require('dsh.review').list()") == 1


def test_previous_plan_and_diff(editor):
    plans = [{"callId": "c1", "plan": "# A\n1. one\n"}, {"callId": "c2", "plan": "# A\n1. one\n2. two\n"},
             {"callId": "c3", "plan": "# A\n1. uno\n2. two\n"}]
    previous = "return require('dsh.review').previous_plan(...)"
    assert editor.lua(previous, plans, {"id": "plan-review-c3", "plan": plans[2]["plan"]}) == plans[1]["plan"]
    assert editor.lua(previous, plans, {"id": "plan-review-c2", "plan": plans[1]["plan"]}) == plans[0]["plan"]
    assert editor.lua(previous, plans, {"id": "plan-review-c1", "plan": plans[0]["plan"]}) is None
    assert editor.lua(previous, plans, {"id": "other", "plan": "# B\n"}) == plans[2]["plan"]
    lines = editor.lua("return require('dsh.review').diff_lines(...)", plans[1]["plan"], plans[2]["plan"])
    assert "-1. one" in lines and "+1. uno" in lines and " 2. two" in lines
    assert editor.lua("return require('dsh.review').diff_lines(...)", "x", "x\n") == []


def test_build_answer(editor):
    build = "return require('dsh.review').build_answer(...)"
    assert editor.lua(build, "q", "approve", "ignored", {3: "x"}) == {"id": "q", "choice": "approve"}
    assert editor.lua(build, "q", "revise", "", {}) == {"id": "q", "choice": "revise"}


# ---- transcript rendering --------------------------------------------------------------


def test_transcript_render(editor):
    render = "return require('dsh.transcript').render(...)"
    at = "2026-11-29T18:40:18.123Z"
    assert editor.lua(render, {"seq": 1, "type": "session/start", "at": at,
                               "data": {"sessionId": SID, "formatVersion": 1}}) == [f"   1 session {SID}"]
    assert editor.lua(render, {"seq": 3, "type": "user/message", "at": at, "turn": 1,
                               "data": {"text": "hi\nthere", "source": "user"}}) == ["   3 > hi", "       there"]
    assert editor.lua(render, {"seq": 4, "type": "tool/call", "at": at, "turn": 1,
                               "data": {"callId": "c1", "name": "exit_plan_mode",
                                        "arguments": {"plan": "# P"}}}) == [
        '   4 → exit_plan_mode {"plan":"# P"}']
    assert editor.lua(render, {"seq": 5, "type": "plan/mode", "at": at,
                               "data": {"active": False}}) == ["   5 plan mode off"]
    sent_back = {"seq": 6, "type": "tool/result", "at": at, "turn": 1,
                 "data": {"callId": "c1", "ok": False, "content": "The person wants you to keep planning."}}
    assert editor.lua(render, sent_back, "exit_plan_mode") == [
        "   6 ← plan not approved: The person wants you to keep planning."]
    assert editor.lua(render, sent_back, "read_file")[0].startswith("   6 ← failed ")


# ---- help file -----------------------------------------------------------------------------


def test_help_file_has_tags_and_every_link_resolves(editor, tmp_path):
    import re
    import shutil

    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN_DIR / "doc", doc)
    editor.cmd(f"helptags {doc}")  # fails on duplicate tags
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text().splitlines()}
    for needed in ["dsh.txt", "dsh-setup", ":Dsh", "dsh-commands", "dsh-plan-review",
                   "dsh-statusline", "dsh-errors", "dsh-health", "DshGoalChanged"]:
        assert needed in tags
    editor.lua("vim.opt.rtp:prepend(...)", str(tmp_path))
    text = (doc / "dsh.txt").read_text()
    links = set(re.findall(r"\|([^|\s]+)\|", text))
    assert links
    for link in sorted(links):
        editor.cmd(f"help {link}")  # raises E149 when a link goes nowhere
    editor.cmd("help :Dsh-goal-create")
    assert editor.lua("return vim.fn.expand('%:t')") == "dsh.txt"
    # :help dsh lands on the guide's start, not in the Lua API section.
    editor.cmd("help dsh")
    landed = editor.lua("return { file = vim.fn.expand('%:t'), line = vim.api.nvim_get_current_line() }")
    assert landed["file"] == "dsh.txt" and "*dsh*" in landed["line"], landed
    assert "LUA API" not in landed["line"]


# ---- a lint: no stray globals ---------------------------------------------------------------

KNOWN_GLOBALS = {"vim", "require", "ipairs", "pairs", "type", "tostring", "tonumber", "table", "string",
                 "math", "coroutine", "error", "pcall", "assert", "setmetatable", "select", "dofile", "bit", "os",
                 "next", "debug", "package", "io"}


def test_no_lua_file_touches_an_unknown_global(editor):
    # LuaJIT's own bytecode listing: GSET writes a global, GGET reads one. A typo in a
    # name (`requre`, `stat` for `state`) shows up as an unknown GGET.
    accesses = editor.lua(
        """
        local bc = require('jit.bc')
        local found = {}
        for _, file in ipairs(vim.fn.globpath(..., '**/*.lua', false, true)) do
          local out = {}
          bc.dump(assert(loadfile(file)), { write = function(_, s) table.insert(out, s) end,
                                             close = function() end, flush = function() end }, true)
          for line in table.concat(out):gmatch('[^\\n]+') do
            local op, name = line:match('(G[GS]ET)%s.-; "([^"]+)"')
            if op then table.insert(found, { file = vim.fs.basename(file), op = op, name = name }) end
          end
        end
        return found
        """,
        str(PLUGIN_DIR),
    )
    assert accesses, "the bytecode listing found no global access at all"
    assert [a for a in accesses if a["op"] == "GSET"] == []
    assert [a for a in accesses if a["name"] not in KNOWN_GLOBALS] == []


# ---- notifications ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "view", "needles", "level"),
    [
        ("block", goal_view(12, 40, "blocked", "disarmed",
                            blockedReason={"code": "dependency-conflict", "message": "urllib3 clashes"}),
         ["the agent blocked the goal: urllib3 clashes (dependency-conflict)"], "WARN"),
        ("block", goal_view(40, 40, "blocked", "disarmed",
                            blockedReason={"code": "round-budget-exhausted", "message": "all 40 used"}),
         ["spent its round budget (40 of 40 rounds used): :Dsh goal raise to go on"], "WARN"),
        ("block", goal_view(8, 40, "blocked", "disarmed", tokensUsed=1260000, maxTokens=1000000,
                            blockedReason={"code": "token-budget-exhausted", "message": "over"}),
         ["token budget spent (8 of 40 rounds used, 1.3M of 1M tokens): :Dsh goal raise to go on"], "WARN"),
        ("complete", goal_view(6, 40, "complete", "disarmed", tokensUsed=950),
         ["goal complete: make the tests pass (6 of 40 rounds used, 950 tokens)"], "INFO"),
    ],
)
def test_goal_changes_the_person_did_not_make_are_told(editor, op, view, needles, level):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.lua("require('dsh.handlers').table()['dsh/goal/changed'](nil, ...)",
               {"agentId": "a-1", "sessionId": SID, "op": op, "revision": 2, "goal": view})
    messages = editor.lua("return _G.dsh_test.messages")
    assert len(messages) == 1, messages
    for needle in needles:
        assert needle in messages[0]["msg"]
    assert messages[0]["level"] == editor.lua(f"return vim.log.levels.{level}")


def test_a_goal_change_this_editor_asked_for_is_told_once(editor):
    editor.lua("require('dsh.notices').own_write('a-1', 'complete', 1)")
    editor.lua("require('dsh.handlers').table()['dsh/goal/changed'](nil, ...)",
               {"agentId": "a-1", "sessionId": SID, "op": "complete", "revision": 2,
                "goal": goal_view(6, 40, "complete", "disarmed")})
    assert editor.messages() == []
    # Rounds, pauses and the like are the statusline's business, not a notification.
    editor.lua("require('dsh.handlers').table()['dsh/goal/changed'](nil, ...)",
               {"agentId": "a-1", "sessionId": SID, "op": "round", "revision": 2, "goal": goal_view(7, 40)})
    assert editor.messages() == []


def test_a_turn_that_ends_with_a_model_error_is_told(editor):
    at = "2026-11-29T18:40:18.123Z"
    editor.lua("require('dsh.handlers').table()['dsh/session/event'](nil, ...)", {
        "agentId": "a-1", "sessionId": SID, "event": {
            "seq": 9, "type": "turn/close", "at": at, "turn": 4,
            "data": {"turn": 4, "stopReason": "model-error",
                     "error": {"kind": "auth", "message": "the server refused the key: set OPENAI_API_KEY"}}}})
    messages = editor.lua("return _G.dsh_test.messages")
    assert [m["msg"] for m in messages] == [
        "dsh: model error (auth): the server refused the key: set OPENAI_API_KEY"]
    assert messages[0]["level"] == editor.lua("return vim.log.levels.ERROR")
    editor.lua("require('dsh.handlers').table()['dsh/session/event'](nil, ...)", {
        "agentId": "a-1", "sessionId": SID, "event": {
            "seq": 12, "type": "turn/close", "at": at, "turn": 5, "data": {"turn": 5, "stopReason": "end-turn"}}})
    assert len(editor.messages()) == 1


@pytest.mark.parametrize(
    ("key", "line"),
    # A missing key in a present table finds the table's header; no table, nothing.
    [("goals.maxRounds", 6), ("plugins", 1), ("model.provider", 3), ("model.apiKeyEnv", 2), ("tools.sandbox", None)],
)
def test_config_key_is_found_in_the_file(editor, key, line):
    lines = ['plugins = ["plan"]', '[model]', 'provider = "openai"', '', '[goals]', 'maxRounds = "many"']
    assert editor.lua("return require('dsh.configfile').find_key(...)", lines, key) == line


def test_help_tags_are_made_when_the_plugin_loads(tmp_path):
    import shutil
    import subprocess

    copy = tmp_path / "dsh.nvim"
    shutil.copytree(PLUGIN_DIR, copy, ignore=shutil.ignore_patterns("tags", "tests"))
    assert not (copy / "doc" / "tags").exists()
    ed = Editor(plugin_dir=copy)
    try:
        assert (copy / "doc" / "tags").exists()
        ed.cmd("help dsh-chat")
        assert ed.lua("return vim.fn.expand('%:p')") == str(copy / "doc" / "dsh.txt")
    finally:
        ed.close()
    # In the repository the generated file is ignored: loading the plugin leaves no trace.
    ignored = subprocess.run(["git", "-C", str(PLUGIN_DIR), "check-ignore", "-q", "doc/tags"])
    assert ignored.returncode == 0


def test_policy_described_in_words(editor):
    describe = "return require('dsh.commands').describe_policy(...)"
    assert editor.lua(describe, {"sandbox": "workspace-write", "network": False, "approve": ["write", "exec"]}) == \
        "commands run in workspace-write, network off; asks before write, exec"
    assert editor.lua(describe, {"sandbox": "full-access", "network": True, "approve": []}) == \
        "commands run in full-access, network on; asks before nothing"


def test_trust_reads_neovims_trust_database(editor, tmp_path):
    ws = tmp_path / "ws"
    (ws / ".dsh").mkdir(parents=True)
    config = ws / ".dsh" / "config.toml"
    config.write_text('[model]\nbaseUrl = "http://example.invalid"\n', encoding="utf-8")
    state = tmp_path / "state"
    (state / "nvim").mkdir(parents=True)
    editor.lua("vim.env.XDG_STATE_HOME = ...", str(state))
    trusted = "return require('dsh.trust').trusted(...)"
    assert editor.lua(trusted, str(ws)) is False  # no database yet
    # `:trust` on the file records its hash: trusted while the file stays as it was.
    editor.cmd(f"edit {config}")
    editor.cmd("trust")
    assert editor.lua(trusted, str(ws)) is True
    config.write_text('[model]\nbaseUrl = "http://elsewhere.invalid"\n', encoding="utf-8")
    assert editor.lua(trusted, str(ws)) is False  # changed since: asked again
    editor.cmd("bwipeout!")
    editor.cmd(f"noautocmd edit {ws}")  # the folder as a buffer, then :trust
    editor.cmd("trust")
    assert editor.lua(trusted, str(ws)) is True  # the folder itself is trusted


def test_an_ignored_script_is_not_blamed_on_trust(editor):
    # The daemon's own reason: a script the chosen provider never reads (not trust).
    notice = "return require('dsh.trust').notice(...)"
    script = {"file": "/w/.dsh/config.toml", "key": "model.script",
              "why": "the provider is openai: only the scripted provider reads a script"}
    assert editor.lua(notice, [script]) == \
        "model.script ignored: the provider is openai: only the scripted provider reads a script"
    untrusted = {"file": "/w/.dsh/config.toml", "key": "model.baseUrl",
                 "why": "the workspace is not trusted: only you choose where requests (and your API key) go"}
    assert editor.lua(notice, [script, untrusted]) == "untrusted workspace: model.baseUrl ignored; :Dsh trust uses them"


def test_the_ignored_keys_notice_is_one_short_line(editor):
    notice = "return require('dsh.trust').notice(...)"
    item = {"file": "/w/.dsh/config.toml", "key": "model.baseUrl", "why": "not trusted"}
    assert editor.lua(notice, []) is None
    assert editor.lua(notice, [item]) == "untrusted workspace: model.baseUrl ignored; :Dsh trust uses them"
    assert editor.lua(notice, [item, {**item, "key": "tools.sandbox"}]) == \
        "untrusted workspace: model.baseUrl and 1 more setting ignored; :Dsh trust uses them"


# ---- approvals: deliberate keys only, closing decides nothing ------------------------------

START_APPROVAL = """
_G.approval_result, _G.approval_error = nil, nil
local co = coroutine.create(function(params)
  _G.approval_result, _G.approval_error = require('dsh.handlers').table()['dsh/permission/ask'](nil, params, {})
end)
assert(coroutine.resume(co, ...))
return coroutine.status(co)
"""
APPROVAL = {"agentId": "a-1", "sessionId": SID, "callId": "c-9", "tool": "edit_file", "mutability": "write",
            "title": "Edit a.txt", "diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n"}


def test_an_approval_takes_only_its_own_keys_after_500_ms_and_q_decides_nothing(editor):
    import time

    assert editor.lua(START_APPROVAL, APPROVAL) == "suspended"
    editor.wait_for("#require('dsh.approvals').list() == 1")
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.feed("a")  # at once: a key in flight, not an answer
    time.sleep(0.2)
    assert editor.lua("return _G.approval_result") is None
    time.sleep(0.5)
    editor.feed("xyzbnmeiopdfghjkl")  # no other letter answers
    time.sleep(0.3)
    assert editor.lua("return _G.approval_result") is None
    editor.feed("q")  # closes the float; the approval still waits
    editor.wait_for("not vim.api.nvim_win_is_valid(require('dsh.approvals').list()[1].win)")
    time.sleep(0.3)
    assert editor.lua("return _G.approval_result") is None
    assert editor.lua("return require('dsh').statusline()") == "◎ waiting for you · no goal"
    editor.typed("Dsh answer")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.approvals').list()[1].win")
    time.sleep(0.6)
    editor.feed("s")
    assert editor.wait_for("_G.approval_result") == {"outcome": "allow-session"}
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"


# ---- D-4/D-5: several clients on one session -------------------------------------------

CLIENTS = "require('dsh.handlers').table()['dsh/session/clients'](nil, ...)"
RESOLVED = "require('dsh.handlers').table()['dsh/question/resolved'](nil, ...)"


def clients(*names, you=0):
    return [{"clientId": f"c-{i + 1}", "clientName": name, "you": i == you} for i, name in enumerate(names)]


@pytest.mark.parametrize(
    ("others", "text"),
    [
        ([], ""),
        (["VS Code"], "with VS Code"),
        (["VS Code", "Zed"], "with VS Code and Zed"),
        (["VS Code", "Zed", "client 4"], "with VS Code and 2 others"),
    ],
)
def test_who_else_is_attached_in_words(editor, others, text):
    assert editor.lua("return require('dsh.statusline').others_text(...)", others) == text


def test_the_statusline_and_the_chat_bar_show_who_else_is_attached(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    # Alone (this editor only): nothing more than before.
    editor.lua(CLIENTS, {"agentId": "a-1", "sessionId": SID, "clients": clients("Neovim")})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"
    editor.lua(CLIENTS, {"agentId": "a-1", "sessionId": SID, "clients": clients("Neovim", "Visual Studio Code")})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal · with Visual Studio Code"
    # Joining is told in one line; this editor is never "another".
    assert "dsh: this session: Visual Studio Code joined" in editor.messages()
    # Another agent's list does not touch this statusline.
    editor.lua(CLIENTS, {"agentId": "a-2", "sessionId": SID, "clients": clients("Neovim", "Zed", "Emacs")})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal · with Visual Studio Code"
    # The chat's bar says it too, beside the session's title.
    bar = editor.lua(
        """
        local buf = vim.api.nvim_create_buf(true, true)
        vim.api.nvim_win_set_buf(0, buf)
        require('dsh.chat').views()[...] = { buf = buf, agent_id = 'a-1', session_id = ..., store = require('dsh.chat.store').new() }
        return vim.api.nvim_eval_statusline(require('dsh.chat').winbar(), { use_winbar = true }).str
        """,
        SID,
    )
    assert "new session · with Visual Studio Code" in bar, bar
    editor.lua(CLIENTS, {"agentId": "a-1", "sessionId": SID, "clients": clients("Visual Studio Code", "Neovim", you=1)})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal · with Visual Studio Code"
    editor.lua(CLIENTS, {"agentId": "a-1", "sessionId": SID, "clients": clients("Neovim")})
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"
    assert "dsh: this session: Visual Studio Code left" in editor.messages()


def test_an_answer_given_elsewhere_closes_the_review_and_says_who(editor):
    ask = {**ASK, "questions": [{**ASK["questions"][0], "id": "plan-review-c-7"}]}
    open_review(editor, ask)
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    # Another question's news changes nothing here.
    editor.lua(RESOLVED, {"agentId": "a-1", "sessionId": SID, "questionId": "plan-review-c-6", "kind": "plan-review",
                          "outcome": "approve", "by": {"clientName": "Visual Studio Code"}})
    assert editor.lua("return #require('dsh.review').list()") == 1
    editor.lua(RESOLVED, {"agentId": "a-1", "sessionId": SID, "questionId": "plan-review-c-7", "kind": "plan-review",
                          "outcome": "approve", "by": {"clientName": "Visual Studio Code"}})
    # Closed, answered RequestCancelled (no answer of this editor's), and told in one line.
    assert editor.wait_for("_G.review_error")["code"] == -32800
    assert editor.lua("return _G.review_result") is None
    assert editor.lua("return #require('dsh.review').list()") == 0
    assert 'dsh: plan review "Review the plan": approved by Visual Studio Code' in editor.messages()
    assert editor.lua("return require('dsh').statusline()") == "◎ no goal"


def test_an_approval_answered_elsewhere_closes_and_says_who(editor):
    assert editor.lua(START_APPROVAL, APPROVAL) == "suspended"
    editor.wait_for("#require('dsh.approvals').list() == 1")
    editor.lua(RESOLVED, {"agentId": "a-1", "sessionId": SID, "questionId": "c-9", "kind": "permission",
                          "outcome": "allow-session", "by": {"clientName": "Zed"}})
    assert editor.wait_for("_G.approval_error")["code"] == -32800
    assert editor.lua("return _G.approval_result") is None
    assert editor.lua("return #require('dsh.approvals').list()") == 0
    assert "dsh: approval of Edit a.txt: allowed for this session by Zed" in editor.messages()


def test_the_ids_of_the_daemons_asks_are_read_from_the_messages(editor):
    """`$/cancelRequest` names a request by id, which Neovim does not give a handler: the
    plugin notes the ids of ask messages as they are read, in order, per method."""
    noted = editor.lua(
        """
        local client = require('dsh.client')
        local asked = {}
        client.note_asked(vim.json.encode({ jsonrpc = '2.0', id = 'q-1', method = 'dsh/questions/ask', params = {} }), asked)
        client.note_asked(vim.json.encode({ jsonrpc = '2.0', id = 'p-1', method = 'dsh/permission/ask', params = {} }), asked)
        client.note_asked(vim.json.encode({ jsonrpc = '2.0', id = 'q-2', method = 'dsh/questions/ask', params = {} }), asked)
        -- A notification that quotes the method name is no ask.
        client.note_asked(vim.json.encode({ jsonrpc = '2.0', method = 'dsh/chat/item', params = { text = '"dsh/questions/ask"' } }), asked)
        return asked
        """
    )
    assert noted == {"dsh/questions/ask": ["q-1", "q-2"], "dsh/permission/ask": ["p-1"]}


def test_setup_server_mode_builds_the_command(editor):
    cmd = "return require('dsh.config').client_config('/tmp/ws').cmd"
    # By default: the workspace's shared daemon, named by the root.
    assert editor.lua(cmd) == ["dshd", "connect", "--workspace", "/tmp/ws"]
    assert editor.lua("return require('dsh.config').client_config('/tmp/ws').cmd_cwd") == "/tmp/ws"
    editor.lua("require('dsh').setup({ server = 'serve', dshd = '/opt/dshd' })")
    assert editor.lua(cmd) == ["/opt/dshd", "serve"]
    editor.lua("require('dsh').setup({ dshd = '/opt/dshd' })")
    assert editor.lua(cmd) == ["/opt/dshd", "connect", "--workspace", "/tmp/ws"]
    # A whole command wins.
    editor.lua("require('dsh').setup({ cmd = { '/opt/dshd', 'serve' }, server = 'connect' })")
    assert editor.lua(cmd) == ["/opt/dshd", "serve"]
    bad = editor.lua("return select(2, pcall(require('dsh').setup, { server = 'remote' }))")
    assert "server" in bad and "'connect' or 'serve'" in bad


def test_client_name_is_sent_at_initialize(editor):
    editor.lua("require('dsh').setup({ client_name = 'Neovim (laptop)' })")
    params = editor.lua(
        """
        local cfg = require('dsh.config').client_config('/tmp/ws')
        local params = { clientInfo = { name = 'Neovim', version = '0.11.4' } }
        cfg.before_init(params, cfg)
        return params.clientInfo
        """
    )
    assert params == {"name": "Neovim (laptop)", "version": "0.11.4"}


def test_an_answer_that_came_second_is_told_it_changed_nothing(editor):
    editor.lua("require('dsh.float').guard_ms = 0")
    assert editor.lua(START_APPROVAL, APPROVAL) == "suspended"
    editor.wait_for("#require('dsh.approvals').list() == 1")
    editor.lua("require('dsh.asks').show_next()")
    editor.feed("a")
    assert editor.wait_for("_G.approval_result") == {"outcome": "allow-once"}
    # The same answer won (from here or elsewhere): nothing to say.
    editor.lua(RESOLVED, {"agentId": "a-1", "sessionId": SID, "questionId": "c-9", "kind": "permission",
                          "outcome": "allow-once", "by": {"clientName": "Neovim"}})
    assert not [m for m in editor.messages() if "changed nothing" in m]
    # Another answer won: the person learns theirs did nothing.
    editor.lua(RESOLVED, {"agentId": "a-1", "sessionId": SID, "questionId": "c-9", "kind": "permission",
                          "outcome": "reject", "by": {"clientName": "Zed"}})
    assert "dsh: approval of Edit a.txt: answered in Zed first (rejected); your answer changed nothing" in editor.messages()
    # The daemon's own notice of the same (the answer reached it after it withdrew the ask)
    # is not said twice; any other notice still is.
    show = "require('dsh.handlers').table()['window/showMessage'](nil, ...)"
    editor.lua(show, {"type": 3, "message": "Your answer to the approval of edit_file came too late: Zed answered it"
                                            " first (reject). Your answer changed nothing."})
    editor.lua(show, {"type": 3, "message": "something else"})
    assert [m for m in editor.messages() if "changed nothing" in m] == [
        "dsh: approval of Edit a.txt: answered in Zed first (rejected); your answer changed nothing"]
    assert any("something else" in m for m in editor.messages())
