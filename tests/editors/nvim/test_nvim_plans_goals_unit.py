"""The plugin's plans of record, goal timeline, waiting state and raise action, in a real
headless Neovim without a daemon.

What the daemon would send is made by the daemon's own code (its fold records through
the LSP door's converters, dshd.daemon.to_wire), so these tests show the plugin displays
what a daemon sends.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import Editor, write_artifact  # noqa: E402

from dshd.daemon import to_wire  # noqa: E402
from dshd.folds.plans import PlanComment, PlanRecord  # noqa: E402
from dshd.folds.rounds import GoalRoundRecord, GoalRounds, RoundTokens  # noqa: E402
from tests.editors.nvim.test_nvim_unit import SID, goal_view  # noqa: E402

PLAN_1 = (
    "# Plan: make the parser strict\n"
    "\n"
    "1. Read the grammar in docs/grammar.md\n"
    "2. Add a failing test for trailing commas\n"
    "3. Reject trailing commas in parse_list\n"
)
PLAN_2 = (
    "# Plan: make the parser strict\n"
    "\n"
    "1. Read the grammar in docs/grammar.md, section 4.2 (lists)\n"
    "2. Add a failing test for trailing commas\n"
    "3. Reject trailing commas in parse_list\n"
    "4. Run the whole test suite\n"
)


@pytest.fixture
def editor():
    ed = Editor()
    yield ed
    errors = ed.lua_errors()
    ed.close()
    assert not errors, errors


def plan_records() -> list[dict]:
    first = PlanRecord(
        call_id="c1", seq=7, title="Plan: make the parser strict", markdown=PLAN_1, outcome="revise",
        at="2026-12-01T21:05:03.120Z", feedback="say which section",
        comments=(PlanComment(line=3, text="cite the section"),),
    )
    second = PlanRecord(call_id="c2", seq=15, title="Plan: make the parser strict", markdown=PLAN_2,
                        outcome="approved", at="2026-12-01T21:07:44.010Z")
    return [to_wire.plan_record(first), to_wire.plan_record(second)]


def rounds_result() -> dict:
    def record(n, started, ended, tokens, tools, waited, outcome, estimated=False):
        return GoalRoundRecord(round=n, revision=1, turn=n + 1, started_at=started, ended_at=ended,
                               tokens=RoundTokens(*tokens), estimated=estimated, tool_calls=tools,
                               waited_ms=waited, outcome=outcome)

    return to_wire.goal_rounds(GoalRounds(goal_id="g-1", rounds=[
        record(1, "2026-12-01T21:05:03.100Z", "2026-12-01T21:05:15.400Z", (8200, 6100, 1200), 3, 0, "end-turn"),
        record(2, "2026-12-01T21:05:16.000Z", "2026-12-01T21:06:40.000Z", (2900, 2500, 310), 1, 80000, "end-turn"),
        record(3, "2026-12-01T21:06:41.000Z", "2026-12-01T21:06:42.000Z", (900, 0, 40), 0, 0, "model-error"),
        record(4, "2026-12-01T21:07:01.000Z", None, (0, 0, 0), 0, 0, "running"),
    ]))


# ---- plans of record ------------------------------------------------------------------------


def test_the_picker_labels_say_outcome_and_what_the_person_said(editor):
    plans = plan_records()
    now = editor.lua("return require('dsh.commands').epoch('2026-12-01T21:10:00Z')")
    labels = editor.lua(
        "local plans, now = ...; local p = require('dsh.plans')"
        "; return { p.label(plans[1], 1, now), p.label(plans[2], 2, now) }",
        plans, now,
    )
    assert labels == [
        "#1 Plan: make the parser strict · sent back · 1 comment, feedback · 4 min ago",
        "#2 Plan: make the parser strict · approved · 2 min ago",
    ]


def test_a_plan_of_record_opens_read_only_with_its_comments_and_its_diff(editor):
    plans = plan_records()
    shown = editor.lua(
        """
        local plans = ...
        local p = require('dsh.plans')
        local buf = p.show(plans, 1, 's-1', vim.api.nvim_get_current_win(), false)
        local ns = vim.api.nvim_create_namespace('dsh.plans')
        local marks = vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
        local header, beside = {}, {}
        for _, m in ipairs(marks) do
          for _, vl in ipairs(m[4].virt_lines or {}) do table.insert(header, vl[1][1]) end
          if m[4].virt_text then beside[tostring(m[2] + 1)] = m[4].virt_text[1][1] end
        end
        return { lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), modifiable = vim.bo[buf].modifiable,
                 header = header, beside = beside, winbar = vim.wo.winbar,
                 topfill = vim.fn.winsaveview().topfill, name = vim.api.nvim_buf_get_name(buf) }
        """,
        plans,
    )
    assert shown["lines"] == PLAN_1.splitlines() and shown["modifiable"] is False
    assert shown["name"] == "dsh://plan/s-1/1"
    assert shown["header"] == [
        "Plan 1 of 2 · sent back · 2026-12-01 21:05:03 UTC",
        "Feedback: say which section",
        "1 comment, at the end of their lines («)",
    ]
    assert shown["topfill"] == 3  # the header is in view, above line 1
    assert shown["beside"] == {"3": "  « cite the section"}
    assert "d changes since the plan before" in shown["winbar"] and "]p newer" in shown["winbar"]
    # ]p: the next plan; d: its diff to the plan before, in the same window.
    editor.feed("]p")
    editor.wait_for("vim.api.nvim_buf_get_name(0) == 'dsh://plan/s-1/2'")
    editor.feed("d")
    editor.wait_for("vim.bo.filetype == 'diff'")
    diff = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert diff[:2] == ["--- plan 1: Plan: make the parser strict (sent back)", "+++ plan 2: Plan: make the parser strict"]
    assert "-1. Read the grammar in docs/grammar.md" in diff
    assert "+1. Read the grammar in docs/grammar.md, section 4.2 (lists)" in diff
    assert "+4. Run the whole test suite" in diff
    editor.feed("d")
    editor.wait_for("vim.api.nvim_buf_get_name(0) == 'dsh://plan/s-1/2'")
    # The first plan has nothing before it.
    assert editor.lua("return require('dsh.plans').diff_to_previous(..., 1)", plans) == []


def test_the_review_sets_the_round_befores_notes_beside_the_revised_plan(editor):
    previous = {"callId": "c1", "title": "Plan: make the parser strict", "markdown": PLAN_1,
                "feedback": "say which section", "comments": [{"line": 3, "text": "cite the section"},
                                                              {"line": 5, "text": "only in lists"}]}
    notes = editor.lua("""
        local notes = require('dsh.review').previous_notes(...)
        local beside = {}
        for line, texts in pairs(notes.beside) do beside[tostring(line)] = texts end
        notes.beside = beside
        return notes
        """, previous, PLAN_2)
    assert notes["header"] == [
        'Your review of the plan before ("Plan: make the parser strict"):',
        "  feedback: say which section",
        '  line 3 "1. Read the grammar in docs/grammar.md": cite the section  → line 3, changed',
        '  line 5 "3. Reject trailing commas in parse_list": only in lists  → line 5, unchanged',
    ]
    assert notes["beside"] == {"3": ["cite the section"], "5": ["only in lists"]}
    # A line moved by lines added above it is found where it is now.
    moved = editor.lua("return { require('dsh.review').line_in_revision(...) }", "a\nb\nc\n", "new\na\nb\nc\n", 3)
    assert moved == [4, False]
    removed = editor.lua("return { require('dsh.review').line_in_revision(...) }", "a\nb\nc\n", "a\nc\n", 2)
    assert removed == [1, True]


def test_a_goal_from_a_plan_names_it_as_every_client_does(editor):
    from dshd.acp.questions import plan_goal_objective

    title = "Plan: make the parser strict"
    objective = editor.lua("return require('dsh.review').goal_objective(...)", {"title": title})
    assert objective == plan_goal_objective(title) == 'Carry out the approved plan "Plan: make the parser strict"'


# ---- the goal timeline ----------------------------------------------------------------------


def test_the_timeline_has_a_line_per_round_with_tokens_waits_and_outcome(editor):
    view = goal_view(4, 40, tokensUsed=13550)
    lines, marks = editor.lua(
        "local r, g, now = ...; return { require('dsh.timeline').render(r, g, now) }",
        rounds_result(), view, editor.lua("return require('dsh.timeline').epoch_ms('2026-12-01T21:07:05.500Z')"),
    )
    write_artifact("goal-timeline-unit.txt", "\n".join(lines) + "\n")
    assert lines[0] == "Goal: make the tests pass"
    assert lines[1] == "◎ 4/40 · 13.6k tok · active"
    rows = [line for line in lines if line[:5].strip().isdigit()]
    assert len(rows) == 4
    assert rows[0].split()[:4] == ["1", "1", "21:05:03", "12s"] and rows[0].endswith("done")
    assert "8.2k (6.1k) / 1.2k" in rows[0]
    assert "1m 20s" in rows[1]  # it waited for the person
    assert rows[2].endswith("model error")
    assert rows[3].endswith("running…") and "4.5s…" in rows[3]  # measured to now
    # The bar is longest for the round that used the most tokens.
    bars = [row.count("█") for row in rows]
    assert bars[0] == 16 and bars[0] > bars[1] > bars[3] == 0
    assert lines[-1] == "4 rounds · 12k in (8.6k cached) · 1.6k out · 4 tool calls · waited for you 1m 20s"
    groups = {m[3] for m in marks}
    assert {"DiagnosticOk", "DiagnosticError", "DiagnosticInfo", "DiagnosticHint"} <= groups


def test_estimated_tokens_are_marked(editor):
    result = to_wire.goal_rounds(GoalRounds(goal_id="g-1", rounds=[GoalRoundRecord(
        round=1, revision=1, turn=2, started_at="2026-12-01T21:05:03Z", ended_at="2026-12-01T21:05:04Z",
        tokens=RoundTokens(1200, 0, 300), estimated=True, tool_calls=0, waited_ms=0, outcome="end-turn")]))
    lines = editor.lua("return (require('dsh.timeline').render(..., nil, 0))", result)
    assert "~1.2k (0) / ~300" in lines[3]
    assert lines[-1].startswith("~ estimated")


def test_a_timeline_without_a_goal_says_how_to_make_one(editor):
    lines = editor.lua("return (require('dsh.timeline').render(..., nil, 0))",
                       to_wire.goal_rounds(GoalRounds(goal_id=None, rounds=[])))
    assert lines == ["No goal in this session: :Dsh goal create {objective} [rounds]"]


@pytest.mark.parametrize(("ms", "text"), [(0, "—"), (850, "850ms"), (4100, "4.1s"), (12400, "12s"),
                                          (80000, "1m 20s"), (7500000, "2h 05m")])
def test_durations_in_words(editor, ms, text):
    assert editor.lua("return require('dsh.timeline').duration(...)", ms) == text


# ---- commands -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "action"),
    [
        ("plan history", {"action": "plan.history"}),
        ("plan history 2", {"action": "plan.history", "index": 2}),
        ("goal timeline", {"action": "goal.timeline"}),
        ("goal raise", {"action": "goal.raise"}),
        ("goal raise 80", {"action": "goal.raise", "max_rounds": 80}),
        ("goal raise 400k tokens", {"action": "goal.raise", "max_tokens": 400000}),
        ("goal raise 80 400k tokens", {"action": "goal.raise", "max_rounds": 80, "max_tokens": 400000}),
    ],
)
def test_new_subcommands_parse(editor, args, action):
    assert editor.lua("return require('dsh.commands').parse(...)", args) == action


@pytest.mark.parametrize("args", ["plan history x", "plan history 0", "goal raise lots", "goal timeline now"])
def test_bad_new_subcommands_say_how(editor, args):
    got = editor.lua("local action, err = require('dsh.commands').parse(...); return { action = action, err = err }", args)
    assert "action" not in got and ("usage" in got["err"] or "must be" in got["err"]), got


def test_raise_offers_the_spent_budget_again_on_top_of_what_is_used(editor):
    rounds = goal_view(40, 40, "blocked", "disarmed", blockedReason={"code": "round-budget-exhausted", "message": "x"})
    tokens = goal_view(8, 40, "blocked", "disarmed", tokensUsed=51000, maxTokens=50000,
                       blockedReason={"code": "token-budget-exhausted", "message": "x"})
    assert editor.lua("return { require('dsh.commands').raise_default(...) }", rounds) == ["rounds", 80]
    assert editor.lua("return { require('dsh.commands').raise_default(...) }", tokens) == ["tokens", 101000]
    assert editor.lua("return require('dsh.commands').tokens_text(...)", 100000) == "100k"
    assert editor.lua("return require('dsh.commands').tokens_text(...)", 1500000) == "1.5M"


def test_raise_is_offered_on_a_goal_blocked_for_its_budget_only(editor):
    spent = goal_view(40, 40, "blocked", "disarmed", blockedReason={"code": "round-budget-exhausted", "message": "x"})
    other = goal_view(4, 40, "blocked", "disarmed", blockedReason={"code": "dependency-conflict", "message": "x"})
    verbs = "return require('dsh.commands').goal_verbs(...)"
    assert "raise" in editor.lua(verbs, spent)
    assert "raise" not in editor.lua(verbs, other)
    # :Dsh goal raise on the other refuses, saying why, and sends nothing.
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.lua("require('dsh.state').set_goal('a-1', ...)", other)
    editor.typed("Dsh goal raise 80")
    editor.wait_for("#_G.dsh_test.messages > 0")
    assert editor.messages() == [
        "dsh: the goal was not stopped by its budget (blocked: dependency-conflict): :Dsh goal edit changes budgets"]


# ---- waiting for the person -----------------------------------------------------------------


def test_a_waiting_goal_says_so_once_in_the_statusline(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.lua("require('dsh.state').set_goal('a-1', ...)", goal_view(3, 40, waitingFor="plan-review"))
    assert editor.lua("return require('dsh').statusline()") == "◎ 3/40 · waiting for you"
    assert editor.lua("return require('dsh.state').activity()") == "waiting"
    assert editor.lua("return require('dsh').statusline_highlight()") == "DiagnosticHint"
    editor.lua("require('dsh.state').set_goal('a-1', ...)", goal_view(3, 40))
    assert editor.lua("return require('dsh').statusline()") == "◎ 3/40 · active"


def test_one_notice_per_waiting_spell(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    changed = "require('dsh.handlers').table()['dsh/goal/changed'](nil, ...)"

    def send(view):
        editor.lua(changed, {"agentId": "a-1", "sessionId": SID, "op": "waiting", "revision": 1, "goal": view})

    send(goal_view(3, 40, waitingFor="plan-review"))
    send(goal_view(3, 40, waitingFor="plan-review"))  # the same spell: told already
    send(goal_view(3, 40))  # over
    send(goal_view(3, 40, waitingFor="approval"))  # a new spell
    told = [m for m in editor.messages() if "waits for you" in m]
    assert told == ["dsh: the goal waits for you: a plan review is open (:Dsh answer)",
                    "dsh: the goal waits for you: an approval is open (:Dsh answer)"]


# ---- help -----------------------------------------------------------------------------------


def test_the_help_covers_the_new_commands_and_keys(editor, tmp_path):
    import shutil

    from nvim_harness import PLUGIN_DIR

    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN_DIR / "doc", doc)
    editor.cmd(f"helptags {doc}")  # fails on a duplicate tag
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text().splitlines()}
    assert {":Dsh-plan-history", ":Dsh-goal-raise", ":Dsh-goal-timeline", "dsh-plans", "dsh-timeline",
            "dsh-review-g", "dsh-review-previous"} <= tags
    # The keys the help names are the keys the plugin maps.
    text = " ".join((doc / "dsh.txt").read_text().split())
    keys = editor.lua("return { review = require('dsh.review').keys.approve_goal, plans = require('dsh.plans').keys,"
                      " timeline = require('dsh.timeline').keys }")
    assert keys == {"review": "g", "plans": {"diff": "d", "older": "[p", "newer": "]p", "close": "q"},
                    "timeline": {"refresh": "r", "close": "q"}}
    for needle in ["g approve and start a goal", "d the plan's changes since the plan before it",
                   "[p the plan before; ]p the plan after.", "`r` reads it again, `q` closes it."]:
        assert needle in text, needle


def test_estimated_goal_tokens_show_as_the_daemon_writes_them(editor):
    editor.lua("require('dsh.state').set_current('a-1', ...)", SID)
    editor.lua("require('dsh.state').set_goal('a-1', ...)", goal_view(3, 40, tokensUsed=12400, tokensEstimated=True))
    assert editor.lua("return require('dsh').statusline()") == "◎ 3/40 · ~12.4k tok · active"


@pytest.mark.parametrize("n", [0, 950, 999, 1000, 1049, 1050, 12400, 99949, 99950, 182400, 999499, 999500, 1500000, 1249999])
def test_token_figures_are_the_daemons_words(editor, n):
    from dshd.api.words import tokens

    assert editor.lua("return require('dsh.timeline').tokens(...)", n) == tokens(n)
