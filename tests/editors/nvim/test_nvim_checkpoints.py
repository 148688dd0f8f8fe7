"""Rewind to here (SPEC 20, K-3) in Neovim's own terminal UI against the real daemon.

Neovim runs in tmux (and, for the list of checkpoints, headless under pynvim) with the
plugin, which starts the real `dshd serve` with its scripted model; the model's steps rewrite a file with `write_file`, so the daemon takes a checkpoint
before each. Keys are typed as a person types them; what the screen shows is read with
capture-pane (kept in artifacts/nvim/tui-rewind-*.txt), what happened is read from the
files on disk and the session log.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import write_artifact as keep  # noqa: E402

from tests.editors.nvim.test_nvim_daemon import (  # noqa: E402
    CONFIG,
    editors,  # noqa: F401 - the fixture
    log_events,
    make_workspace,
    new_session,
    started,
    tui_editor,
)

pytestmark = pytest.mark.editor

CHECKPOINTS_CONFIG = CONFIG.replace('plugins = ["plan", "goals"]', 'plugins = ["plan", "goals", "tools", "checkpoints"]')

SCRIPT = [
    {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "written by the agent\n"}}]},
    {"text": "Rewrote the notes."},
    {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "the agent again\n"}}]},
    {"text": "Rewrote them once more."},
]


def session_ids(workspace: Path) -> list[str]:
    return sorted(p.name for p in (workspace / ".dsh" / "sessions").iterdir() if (p / "log.jsonl").exists())


def restores(workspace: Path, session_id: str) -> list[dict]:
    return [e["data"] for e in log_events(workspace, session_id) if e["type"] == "checkpoint/restored"]


def test_tui_rewind_shows_the_diff_a_stray_key_cancels_f_restores_and_a_person_edit_needs_o(tmp_path):
    workspace = make_workspace(tmp_path / "ws", SCRIPT, CHECKPOINTS_CONFIG)
    notes = workspace / "notes.txt"
    notes.write_text("as the person left it\n", encoding="utf-8")
    tui = tui_editor(tmp_path, workspace, "rewind")
    try:
        tui.wait_for("~")
        tui.keys(":Dsh chat here", "Enter")
        tui.wait_for("your message")
        tui.keys(":Dsh approve none", "Enter")  # this session asks nothing: the steps just run
        tui.wait_for("asks before nothing")
        tui.keys("i", "tidy up the notes", "C-s")
        screen = tui.wait_for("Turn 1 finished", timeout=30)
        assert notes.read_text(encoding="utf-8") == "written by the agent\n"
        # The message and the tool call that can rewind say so; the reply does not.
        screen = tui.wait_for("⟲ R rewinds to here")
        keep("tui-rewind-chat.txt", screen)
        reply_line = next(line for line in screen.splitlines() if "Rewrote the notes." in line)
        assert "⟲" not in reply_line
        [session_id] = session_ids(workspace)

        # R on the reply: nothing happens, and it says why.
        tui.keys("Escape", ":call search('Rewrote the notes')", "Enter")
        tui.keys("R")
        tui.wait_for("only your messages and tool calls marked")

        # R on the person's message: the diff in a tab of its own, then the question.
        tui.keys("gg", ":call search('^## You')", "Enter")
        tui.keys("R")
        screen = tui.wait_for("Rewind to here?")
        keep("tui-rewind-diff.txt", screen)
        assert "after rewind" in screen and "now · turn 1" in screen
        assert "written by the agent" in screen and "as the person left it" in screen
        assert "f rewind files · c files and conversation · q or any other key cancels" in screen
        assert "put back  notes.txt" in screen

        # A stray key is "no": nothing rewound, the diff stays.
        time.sleep(0.7)  # the question's guard against keys already in flight
        tui.keys("j")
        screen = tui.wait_for("not rewound")
        tui.wait_gone("Rewind to here?")
        keep("tui-rewind-cancelled.txt", screen)
        assert notes.read_text(encoding="utf-8") == "written by the agent\n"
        assert restores(workspace, session_id) == []

        # R in the diff asks again; f rewinds the files.
        tui.keys("R")
        tui.wait_for("Rewind to here?")
        time.sleep(0.7)
        tui.keys("f")
        screen = tui.wait_for("rewound 1 file: notes.txt")
        keep("tui-rewind-files.txt", screen)
        assert "after rewind" not in screen  # the diff's tab closed
        assert notes.read_text(encoding="utf-8") == "as the person left it\n"
        [restored] = restores(workspace, session_id)
        assert restored["files"] == ["notes.txt"] and restored.get("forced", []) == []

        # Turn 2 rewrites the file; then the person changes it in a terminal.
        tui.keys("G", "i", "once more please", "C-s")
        tui.wait_for("Turn 2 finished", timeout=30)
        assert notes.read_text(encoding="utf-8") == "the agent again\n"
        notes.write_text("my own edit\n", encoding="utf-8")
        # This time R on turn 2's tool call (the checkpoint taken before its step).
        tui.keys("Escape", "G", ":call search('^▸ Write', 'b')", "Enter")
        tui.keys("R")
        screen = tui.wait_for("Rewind to here?")
        keep("tui-rewind-person-changed.txt", screen)
        assert "✎ changed by you since" in screen
        assert "my own edit" in screen
        assert "Rewind to before turn 2, step 1?" in screen  # the tool call's step
        time.sleep(0.7)
        # c asks first: the person's edit needs its own key, another stray key is "no".
        tui.keys("c")
        screen = tui.wait_for("Overwrite your changes?")
        keep("tui-rewind-force.txt", screen)
        assert "o overwrite my changes and rewind · q or any other key cancels" in screen
        time.sleep(0.7)
        tui.keys("c")  # the same key again is not the second, explicit answer
        tui.wait_for("not rewound")
        assert notes.read_text(encoding="utf-8") == "my own edit\n"
        assert len(restores(workspace, session_id)) == 1

        tui.keys("R")
        tui.wait_for("Rewind to here?")
        time.sleep(0.7)
        tui.keys("c")
        tui.wait_for("Overwrite your changes?")
        time.sleep(0.7)
        tui.keys("o")
        # The fork's chat: turn 2 is cut where its step began, its reply is not in it.
        screen = tui.wait_for("cut here by a fork")
        keep("tui-rewind-conversation.txt", screen)
        assert "Rewrote them once more." not in screen
        assert "Rewrote the notes." in screen and "once more please" in screen
        tui.keys(":Dsh messages", "Enter")
        screen = tui.wait_for("the conversation goes on")  # (the line wraps after it)
        keep("tui-rewind-messages.txt", screen)
        assert "rewound 1 file: notes.txt (your changes to notes.txt overwritten); the conversation goes on" in screen
        assert notes.read_text(encoding="utf-8") == "as the person left it\n"
        restored = restores(workspace, session_id)[-1]
        assert restored["files"] == ["notes.txt"] and restored.get("forced") == ["notes.txt"]
        assert len(session_ids(workspace)) == 2  # the fork
    finally:
        tui.kill()
    # (A json dump of what the log says, for the artifacts.)
    keep("tui-rewind-log.json", json.dumps(restores(workspace, session_id), indent=2) + "\n")


NINE = [f"f{i}.txt" for i in range(9)]


def test_rewind_list_shows_many_files_as_one_unified_diff_and_f_deletes_what_the_step_created(tmp_path, editors):
    workspace, editor = started(tmp_path, editors, [
        {"toolCalls": [{"name": "write_file", "arguments": {"path": p, "content": f"{p} by the agent\n"}} for p in NINE]},
        {"text": "Wrote nine files."},
    ], CHECKPOINTS_CONFIG)
    session_id = new_session(editor)
    editor.typed("Dsh approve none")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('asks before nothing', 1, true) end)")
    editor.typed("Dsh prompt write nine files")
    editor.wait_for("#_G.dsh_test.turns == 1", what="the turn's end")
    assert all((workspace / p).exists() for p in NINE)

    def pick_newest() -> dict:
        # A fresh record each time: the second pick must wait for its own list, not the first's.
        editor.lua("_G.dsh_test.asked = {}")
        editor.typed("Dsh rewind list")
        editor.wait_for("vim.tbl_contains(_G.dsh_test.asked, 'Rewind to before')", what="the list of checkpoints")
        editor.feed("1<CR>")  # the default vim.ui.select asks for a number; newest first
        editor.wait_for("(require('dsh.rewind').current() or {}).asking == 'Rewind to here?'", what="the question")
        return editor.lua(
            """
            local rw = require('dsh.rewind').current()
            local buf = rw.bufs[1]
            return { layout = rw.layout, reason = rw.layout_reason, filetype = vim.bo[buf].filetype,
                     lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), tabs = #vim.api.nvim_list_tabpages() }
            """
        )

    shown = pick_newest()
    keep("rewind-unified-diff.txt", "\n".join(shown["lines"]) + "\n")
    # Nine files: one unified diff, not two long columns.
    assert (shown["layout"], shown["reason"], shown["filetype"]) == ("unified", "9 files: one unified diff", "diff")
    assert shown["tabs"] == 2
    assert "── f0.txt · delete ──" in shown["lines"] and "-f0.txt by the agent" in shown["lines"]
    time.sleep(0.6)  # the question's guard
    editor.feed("q")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('not rewound', 1, true) end)")
    editor.feed("q")  # in the diff: closes its tab
    editor.wait_for("#vim.api.nvim_list_tabpages() == 1", what="the diff's tab to close")
    assert all((workspace / p).exists() for p in NINE)
    assert restores(workspace, session_id) == []

    pick_newest()
    time.sleep(0.6)
    editor.feed("f")
    editor.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('rewound 9 files', 1, true) end)")
    assert not any((workspace / p).exists() for p in NINE)
    [restored] = restores(workspace, session_id)
    assert sorted(restored["files"]) == NINE
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == 1
