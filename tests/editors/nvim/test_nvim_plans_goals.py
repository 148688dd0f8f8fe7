"""Plans of record, goals from plans, and spend you can see, in Neovim against the real
daemon (`dshd serve`) and its scripted model.

A real headless Neovim loads the plugin, which starts the real daemon; keys are typed as a
person would. What the plugin shows is read from the editor, what it did from the session
log on disk. One test runs Neovim's own terminal UI in tmux (its screens are kept in
artifacts/nvim/), one runs two Neovims on the workspace's shared daemon.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import Editor, write_artifact  # noqa: E402

from tests.editors.nvim.test_nvim_daemon import (  # noqa: E402
    EXIT_WITH_PLAN,
    PLAN,
    TOOLS_CONFIG,
    editors,  # noqa: F401 - the fixture
    go_answer,
    log_events,
    make_workspace,
    new_session,
    started,
    tui_editor,
    wait_for_log,
)
from tests.editors.nvim.test_nvim_shared import go_answer as shared_go_answer  # noqa: E402
from tests.editors.nvim.test_nvim_shared import log_events as shared_log  # noqa: E402
from tests.editors.nvim.test_nvim_shared import plan_review_on_both, shared  # noqa: E402, F401 - the fixture

PLAN_2 = PLAN.replace("1. Read the grammar in docs/grammar.md", "1. Read the grammar in docs/grammar.md, section 4.2") + (
    "4. Run the whole test suite\n"
)
EXIT_WITH_PLAN_2 = {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN_2}}]}
TITLE = "Plan: make the parser strict"

pytestmark = pytest.mark.slow
OBJECTIVE = f'Carry out the approved plan "{TITLE}"'


def review_snapshot(editor: Editor) -> str:
    """The review float as a person sees it: title, the notes above the plan (virtual
    lines), the plan with what stands at the end of its lines, the footer."""
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
        local above = {}
        for _, name in ipairs({ 'dsh.review.previous', 'dsh.review' }) do
          local ns = vim.api.nvim_create_namespace(name)
          for _, m in ipairs(vim.api.nvim_buf_get_extmarks(review.buf, ns, 0, -1, { details = true })) do
            for _, vl in ipairs(m[4].virt_lines or {}) do table.insert(above, text(vl)) end
            if m[4].virt_text then lines[m[2] + 1] = lines[m[2] + 1] .. text(m[4].virt_text) end
          end
        end
        return { title = text(cfg.title), footer = text(cfg.footer), width = cfg.width, above = above,
                 lines = lines, topfill = vim.fn.winsaveview().topfill }
        """
    )
    width = max(shot["width"], len(shot["title"]) + 4, len(shot["footer"]) + 4)
    body = [f"│{line:<{width}}│" for line in shot["above"][: shot["topfill"]] + shot["lines"]]
    return "\n".join(["╭" + shot["title"].center(width, "─") + "╮", *body,
                      "╰" + shot["footer"].center(width, "─") + "╯"]) + "\n"


def buffer_snapshot(editor: Editor) -> str:
    """The current window: its winbar, virtual lines above line 1, lines with their
    end-of-line virtual text."""
    shot = editor.lua(
        """
        local buf = vim.api.nvim_get_current_buf()
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        local above = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })) do
          for _, vl in ipairs(m[4].virt_lines or {}) do table.insert(above, vl[1][1]) end
          if m[4].virt_text then lines[m[2] + 1] = lines[m[2] + 1] .. m[4].virt_text[1][1] end
        end
        return { winbar = vim.wo.winbar, name = vim.api.nvim_buf_get_name(buf), above = above, lines = lines }
        """
    )
    return "\n".join([f"[{shot['name']}]{shot['winbar']}", *shot["above"], *shot["lines"]]) + "\n"


def results_of(events: list[dict], name: str) -> list[dict]:
    calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call" and e["data"]["name"] == name}
    return [e for e in events if e["type"] == "tool/result" and e["data"]["callId"] in calls]


def test_a_revised_plan_shows_last_rounds_notes_and_approve_starts_a_goal_named_after_it(tmp_path, editors):
    rounds = [{"text": f"round {i} done", "usage": {"inputTokens": 1000 * i, "outputTokens": 100 * i}} for i in range(1, 6)]
    workspace, editor = started(tmp_path, editors, [EXIT_WITH_PLAN, EXIT_WITH_PLAN_2, {"text": "On it."}, *rounds])
    session_id = new_session(editor)
    editor.typed("Dsh plan on")
    editor.wait_for("require('dsh').plan_active()")
    editor.typed("Dsh prompt make the parser strict")
    editor.wait_for("#require('dsh.review').list() == 1", timeout=30, what="the first review")
    go_answer(editor)
    assert editor.lua("return require('dsh.review').list()[1].question.previous") is None
    # Send it back with a comment on line 3 and feedback.
    editor.feed("3G")
    editor.feed("c")
    editor.feed("cite the section<CR>")
    editor.wait_for("require('dsh.review').list()[1].comments[3] ~= nil")
    editor.feed("r")
    editor.feed("say which section<CR>")

    # P-23: the revised plan's review carries what was said, set beside it.
    editor.wait_for("(function() local r = require('dsh.review').list()[1]; return r and r.question.plan:find('4.2', 1, true) end)()",
                    timeout=30, what="the revised plan's review")
    go_answer(editor)
    previous = editor.lua("return require('dsh.review').list()[1].question.previous")
    assert previous["feedback"] == "say which section"
    assert previous["comments"] == [{"line": 3, "text": "cite the section"}]
    shot = review_snapshot(editor)
    write_artifact("plan-review-previous.txt", shot)
    assert f'Your review of the plan before ("{TITLE}"):' in shot
    assert "  feedback: say which section" in shot
    assert '  line 3 "1. Read the grammar in docs/grammar.md": cite the section  → line 3, changed' in shot
    assert "1. Read the grammar in docs/grammar.md, section 4.2  ⟲ last round: cite the section" in shot
    assert "a approve · g + goal · r keep planning" in shot
    # `d` compares with the plan that was sent back.
    editor.feed("d")
    editor.wait_for("vim.bo.filetype == 'diff'")
    assert "+4. Run the whole test suite" in editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    editor.feed("q")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")
    time.sleep(0.6)

    # P-24: g asks for the budgets first: <Esc> there decides nothing.
    editor.feed("g")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked] == 'Round budget: '")
    editor.feed("<Esc>")
    time.sleep(0.5)
    assert editor.lua("return #require('dsh.review').list()") == 1
    assert [e for e in results_of(log_events(workspace, session_id), "exit_plan_mode")
            if e["data"].get("review", {}).get("outcome") == "approved"] == []
    editor.typed("Dsh answer")
    editor.wait_for("vim.api.nvim_get_current_win() == require('dsh.review').list()[1].win")
    time.sleep(0.6)
    # g again: the budgets, the approval, then the goal named after the plan.
    asked = len(editor.asked())
    editor.feed("g")
    editor.wait_for(f"#_G.dsh_test.asked > {asked} and _G.dsh_test.asked[#_G.dsh_test.asked] == 'Round budget: '")
    editor.feed("<C-u>3<CR>")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked]:find('Token budget', 1, true) ~= nil")
    editor.feed("50k<CR>")
    events = wait_for_log(workspace, session_id, lambda ev: any(
        e["type"] == "goal/change" and e["data"]["op"] == "create" for e in ev), timeout=30)
    [create] = [e for e in events if e["type"] == "goal/change" and e["data"]["op"] == "create"]
    assert create["data"]["goal"]["objective"] == OBJECTIVE
    assert create["data"]["goal"]["maxRounds"] == 3 and create["data"]["goal"]["maxTokens"] == 50000
    approved = [e for e in results_of(events, "exit_plan_mode") if e["data"].get("review", {}).get("outcome") == "approved"]
    assert len(approved) == 1 and approved[0]["seq"] < create["seq"]  # approve first, then the goal
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('plan approved; goal started', 1, true) end)",
                    what="the goal's notice")

    # The goal runs its three rounds and stops at its budget.
    editor.wait_for("require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy()", timeout=60,
                    what="the round budget spent")
    assert editor.lua("return require('dsh').statusline()").endswith("· blocked: round-budget-exhausted")

    # P-21: the plans of record, oldest first; either one reopens read-only.
    plans = editor.lua(
        "local done; require('dsh.plans').read(require('dsh').current(), function(p) done = p end)"
        "; vim.wait(5000, function() return done ~= nil end); return done"
    )
    assert [(p["outcome"], p["title"]) for p in plans] == [("revise", TITLE), ("approved", TITLE)]
    labels = editor.lua("local plans = ...; local out = {}; for i, p in ipairs(plans) do"
                        " out[i] = require('dsh.plans').label(p, i, os.time()) end; return out", plans)
    assert labels == [f"#1 {TITLE} · sent back · 1 comment, feedback · just now", f"#2 {TITLE} · approved · just now"]
    editor.typed("Dsh plan history 9")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('there is no plan 9', 1, true) end)")
    assert "dsh: there is no plan 9: this session has 2" in editor.messages()
    editor.typed("Dsh plan history 1")
    editor.wait_for(f"vim.api.nvim_buf_get_name(0) == 'dsh://plan/{session_id}/1'", what="plan 1")
    first = buffer_snapshot(editor)
    assert "1. Read the grammar in docs/grammar.md  « cite the section" in first
    assert "Feedback: say which section" in first and "Plan 1 of 2 · sent back" in first
    assert editor.lua("return vim.bo.modifiable") is False
    editor.feed("]p")
    editor.wait_for(f"vim.api.nvim_buf_get_name(0) == 'dsh://plan/{session_id}/2'", what="plan 2")
    editor.feed("d")
    editor.wait_for("vim.bo.filetype == 'diff'")
    changes = buffer_snapshot(editor)
    write_artifact("plan-history.txt", "\n".join(labels) + "\n\n" + first + "\n" + changes)
    assert "-1. Read the grammar in docs/grammar.md\n+1. Read the grammar in docs/grammar.md, section 4.2" in changes

    # G-22: the timeline, one line per round.
    editor.typed("Dsh goal timeline")
    editor.wait_for(f"vim.api.nvim_buf_get_name(0) == 'dsh://goal-timeline/{session_id}'"
                    " and vim.api.nvim_buf_line_count(0) > 5", what="the timeline")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    write_artifact("goal-timeline.txt", "\n".join(lines) + "\n")
    assert lines[0] == f"Goal: {OBJECTIVE}"
    rows = [line for line in lines if line[:5].strip().isdigit()]
    assert [row.split()[0] for row in rows] == ["1", "2", "3"] and all(row.endswith("done") for row in rows)
    assert "1k (0) / 100" in rows[0] and "3k (0) / 300" in rows[2]

    # G-21: raise and resume in one command; the timeline follows the rounds that run.
    # Asked without numbers: the spent budget once more on top of what is used is offered.
    editor.typed("Dsh goal raise")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked] == 'Round budget (3 of 3 used) raised to: '")
    assert editor.lua("return vim.fn.getcmdline()") == "6"
    editor.feed("<C-u>5<CR>")
    editor.wait_for("require('dsh.state').goal().maxRounds == 5 and require('dsh').goal_phase() == 'blocked'"
                    " and require('dsh.state').goal().roundsStarted == 5", timeout=60, what="two more rounds")
    events = log_events(workspace, session_id)
    ops = [e["data"]["op"] for e in events if e["type"] == "goal/change"]
    edit = len(ops) - 1 - ops[::-1].index("edit")
    assert ops[edit + 1] == "resume", ops  # the edit, then the resume naming its revision
    assert any(m.startswith("dsh: budget raised to 5 rounds; goal resumed") for m in editor.messages()), editor.messages()
    editor.wait_for("#vim.tbl_filter(function(l) return l:match('^%s+%d+%s') end,"
                    " vim.api.nvim_buf_get_lines(require('dsh.timeline').buffer(select(2, require('dsh').current())), 0, -1, false)) == 5",
                    timeout=10, what="the shown timeline to have five rounds")


def test_raise_a_spent_token_budget_asks_for_tokens_and_resumes(tmp_path, editors):
    rounds = [{"text": f"round {i} done", "usage": {"inputTokens": 900, "outputTokens": 200}} for i in range(1, 4)]
    workspace, editor = started(tmp_path, editors, rounds)
    session_id = new_session(editor)
    editor.typed("Dsh goal create make the parser strict 10 1k tokens")
    editor.wait_for("require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy()", timeout=30)
    assert editor.lua("return require('dsh.state').goal().blockedReason.code") == "token-budget-exhausted"
    assert editor.lua("return require('dsh.commands').goal_verbs(require('dsh.state').goal())")[:2] == ["edit", "raise"]
    editor.typed("Dsh goal raise")
    editor.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked] == 'Token budget (1.1k used of 1k) raised to: '")
    assert editor.lua("return vim.fn.getcmdline()") == "2.1k"
    editor.feed("<CR>")
    # One more round fits, then the raised budget is spent too.
    editor.wait_for("require('dsh.state').goal().maxTokens == 2100 and require('dsh').goal_phase() == 'blocked'"
                    " and require('dsh.state').goal().roundsStarted == 2", timeout=30, what="one more round")
    ops = [e["data"]["op"] for e in log_events(workspace, session_id) if e["type"] == "goal/change"]
    edit = ops.index("edit")
    assert ops[edit + 1] == "resume", ops
    assert any(m.startswith("dsh: budget raised to 2.1k tokens; goal resumed") for m in editor.messages()), editor.messages()


def test_a_goal_waiting_for_a_review_or_an_approval_says_so_and_tells_once(tmp_path, editors):
    write = {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "strict\n"}}]}
    workspace, editor = started(tmp_path, editors, [EXIT_WITH_PLAN, {"text": "planned"}, write, {"text": "written"}],
                                TOOLS_CONFIG)
    session_id = new_session(editor)
    editor.typed("Dsh plan on")
    editor.wait_for("require('dsh').plan_active()")
    # The goal's first round presents a plan: the goal waits for the person's review.
    editor.typed("Dsh goal create make the parser strict 2")
    editor.wait_for("(require('dsh.state').goal() or {}).waitingFor == 'plan-review'", timeout=30,
                    what="waitingFor in the goal")
    editor.wait_for("#require('dsh.review').list() == 1")
    status = editor.lua("return require('dsh').statusline()")
    assert status == "◎ plan · 0/2 · waiting for you" or status == "◎ plan · 1/2 · waiting for you", status
    assert editor.lua("return require('dsh').statusline_highlight()") == "DiagnosticHint"
    told = [m for m in editor.messages() if "waits for you" in m]
    assert len(told) == 1, editor.messages()
    go_answer(editor)
    editor.feed("a")
    # (Round 2 may be waiting for its approval already: the review's wait is over either way.)
    editor.wait_for("(require('dsh.state').goal() or {}).waitingFor ~= 'plan-review' and #require('dsh.review').list() == 0",
                    timeout=30, what="the review's wait to end")
    # Round 2 asks to write a file: waiting again, for an approval; a new spell, told again.
    editor.wait_for("(require('dsh.state').goal() or {}).waitingFor == 'approval'", timeout=30, what="the approval wait")
    editor.wait_for("#require('dsh.approvals').list() == 1")
    assert editor.lua("return require('dsh').statusline()").endswith("· waiting for you")
    told = [m for m in editor.messages() if "waits for you" in m]
    assert len(told) == 2, editor.messages()
    write_artifact("statusline-waiting.txt", "\n".join(editor.lua("return _G.dsh_test.statuses")) + "\n"
                   + "\n".join(told) + "\n")
    go_answer(editor, "approvals")
    editor.feed("a")
    editor.wait_for("require('dsh').goal_phase() == 'blocked' and not require('dsh.state').busy()", timeout=30)
    assert (workspace / "notes.txt").read_text() == "strict\n"
    assert "waiting for you" not in editor.lua("return require('dsh').statusline()")
    assert len([m for m in editor.messages() if "waits for you" in m]) == 2
    ops = [e["data"] for e in log_events(workspace, session_id) if e["type"] == "goal/change"]
    assert ops  # the waits are in process only: not a goal change in the log
    assert all(o["op"] != "waiting" for o in ops)


def test_tui_plan_history_picker_timeline_and_waiting(tmp_path):
    write = {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "strict\n"}}]}
    rounds = [{"text": f"round {i} done", "usage": {"inputTokens": 1500 * i, "outputTokens": 120 * i}} for i in range(1, 3)]
    workspace = make_workspace(tmp_path / "ws", [EXIT_WITH_PLAN, EXIT_WITH_PLAN_2, {"text": "On it."}, *rounds,
                                                 write, {"text": "written"}], TOOLS_CONFIG)
    tui = tui_editor(tmp_path, workspace, "plans")
    try:
        tui.wait_for("~")
        tui.keys(":Dsh session new", "Enter")
        tui.wait_for("◎ no goal")
        tui.keys(":Dsh plan on", "Enter")
        tui.wait_for("◎ plan · no goal")
        tui.keys(":Dsh prompt make the parser strict", "Enter")
        tui.wait_for("g + goal")
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        tui.keys("3G", "c")
        tui.wait_for("Comment on line 3")
        tui.keys("cite the section", "Enter")
        tui.wait_for("« cite the section")
        tui.keys("r")
        tui.wait_for("Feedback for the agent")
        tui.keys("say which section", "Enter")
        screen = tui.wait_for("⟲ last round: cite the section")
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        screen = tui.wait_for("Your review of the plan before")
        write_artifact("tui-plan-review-previous.txt", screen)
        assert "feedback: say which section" in screen
        tui.keys("g")
        tui.wait_for("Round budget:")
        tui.keys("C-u", "2", "Enter")
        tui.wait_for("Token budget")
        tui.keys("Enter")
        screen = tui.wait_for("2/2 · ", timeout=60)
        screen = tui.wait_for("blocked: round-budget-exhausted", timeout=60)

        # The picker (Neovim's own vim.ui.select), newest first.
        tui.keys(":Dsh plan history", "Enter")
        screen = tui.wait_for("Plans of this session")
        write_artifact("tui-plan-history-picker.txt", screen)
        assert f"#2 {TITLE} · approved" in screen and f"#1 {TITLE} · sent back · 1 comment, feedback" in screen
        tui.keys("2", "Enter")  # the second item: plan 1
        screen = tui.wait_for("Plan 1 of 2 · sent back")
        write_artifact("tui-plan-history-plan.txt", screen)
        assert "« cite the section" in screen and "Feedback: say which section" in screen
        tui.keys("]p", "d")
        screen = tui.wait_for("+++ plan 2")
        write_artifact("tui-plan-history-changes.txt", screen)
        tui.keys("q")

        tui.keys(":Dsh goal timeline", "Enter")
        screen = tui.wait_for("waited for you")
        write_artifact("tui-goal-timeline.txt", screen)
        assert "Goal timeline" in screen and "2 rounds" in screen

        # Raise the budget: the next round asks for an approval, and the goal waits.
        tui.keys(":Dsh goal raise 4", "Enter")
        screen = tui.wait_for("· waiting for you", timeout=60)
        tui.wait_for("allow?")
        screen = tui.wait_for("running…")  # the timeline shown follows: round 3 runs
        write_artifact("tui-goal-waiting.txt", screen)
        assert "◎ 3/4 · 4.9k tok · waiting for you" in screen
        assert "dsh: the goal waits for you: an approval is open (:Dsh answer)" in screen
        tui.keys(":Dsh answer", "Enter")
        time.sleep(0.7)
        tui.keys("a")
        screen = tui.wait_for("◎ 4/4 · 4.9k tok · blocked: round-budget-exhausted\n", timeout=60)
        screen = tui.wait_for("4 rounds · ")  # the timeline shown follows
        assert "waited for you never" not in screen  # the approval's wait is counted
        write_artifact("tui-goal-timeline-after-raise.txt", screen)
    finally:
        tui.kill()


def test_a_review_answered_elsewhere_while_g_asks_the_budgets_starts_no_goal(shared):  # noqa: F811
    # (The same keys on a review nobody else answers start the goal: the first test.)
    a, b, session_id = plan_review_on_both(shared)
    shared_go_answer(a, "review")
    a.feed("g")
    a.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked] == 'Round budget: '")
    # B sends the plan back meanwhile: the first answer counts.
    shared_go_answer(b, "review")
    b.feed("r")
    b.feed("smaller steps<CR>")
    a.wait_for("#require('dsh.review').list() == 0", what="A's review to close")
    a.feed("<C-u>3<CR>")
    a.wait_for("_G.dsh_test.asked[#_G.dsh_test.asked]:find('Token budget', 1, true) ~= nil")
    a.feed("<CR>")
    time.sleep(1.0)
    events = shared_log(shared.workspace, session_id)
    assert [e for e in events if e["type"] == "goal/change"] == []  # no goal was made
    assert any("sent back to keep planning by nvim B" in m for m in a.messages()), a.messages()
    assert a.lua("return require('dsh').plan_active()") is True  # the plan went back: still planning
