"""Rewind to here (SPEC 20, K-3) in a real headless Neovim without a daemon: the chat's
hint and key on items with and without a checkpoint, the diff's two sides, and the confirm
float that takes only explicit keys (a stray key is "no"; overwriting the person's change
needs a second, different key)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import Editor, write_artifact  # noqa: E402

pytestmark = pytest.mark.editor

DIFF = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two now\n+two then\n three\n\\ No newline at end of file\n"
FILES = [
    {"path": "notes.txt", "status": "modified", "diff": DIFF, "binary": False, "changedByPerson": False},
    {"path": "mine.md", "status": "deleted", "diff": "--- a/mine.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-my notes\n",
     "binary": False, "changedByPerson": True},
]
AT = "2026-12-02T01:00:00.000Z"
ITEMS = [
    {"id": "u-1", "kind": "user-message", "seq": 3, "at": AT, "turn": 1, "text": "tidy up", "sender": "person",
     "label": "You", "checkpoint": 9},
    {"id": "c-1", "kind": "tool-call", "seq": 8, "at": AT, "turn": 1, "step": 1, "callId": "k1", "name": "write_file",
     "title": "Write notes.txt", "arguments": {"path": "notes.txt", "content": "x\n"}, "status": "ok",
     "result": "wrote", "partial": False, "checkpoint": 9},
    {"id": "c-2", "kind": "tool-call", "seq": 12, "at": AT, "turn": 1, "step": 2, "callId": "k2", "name": "read_file",
     "title": "Read notes.txt", "arguments": {"path": "notes.txt"}, "status": "ok", "result": "x", "partial": False},
    {"id": "a-1", "kind": "assistant-message", "seq": 14, "at": AT, "turn": 1, "step": 3, "text": "Done.", "partial": False},
    {"id": "u-2", "kind": "user-message", "seq": 20, "at": AT, "turn": 2, "text": "and read it", "sender": "person",
     "label": "You"},
]


@pytest.fixture
def editor():
    ed = Editor(columns=100, lines=40)
    ed.lua("require('dsh.float').guard_ms = 0")  # the guard is the float's own test's
    yield ed
    errors = ed.lua_errors()
    ed.close()
    assert not errors, errors


def test_the_two_sides_of_a_diff_line_up_under_the_same_headers(editor):
    now, after = editor.lua("return { require('dsh.rewind').split_lines(...) }", FILES)
    assert now == ["── notes.txt · put back ──", "⋯ @@ -1,3 +1,3 @@", "one", "two now", "three", "",
                   "── mine.md · delete · ✎ changed by you since ──", "⋯ @@ -1 +0,0 @@", "my notes"]
    assert after == ["── notes.txt · put back ──", "⋯ @@ -1,3 +1,3 @@", "one", "two then", "three", "",
                     "── mine.md · delete · ✎ changed by you since ──", "⋯ @@ -1 +0,0 @@"]
    assert editor.lua("return require('dsh.rewind').layout(...)", FILES) == "split"


def test_many_files_or_one_without_a_text_diff_open_one_unified_diff(editor):
    binary = [FILES[0], {"path": "logo.png", "status": "modified", "binary": True, "changedByPerson": False}]
    assert editor.lua("return { require('dsh.rewind').layout(...) }", binary) == [
        "unified", "logo.png has no text diff: one unified diff"]
    lines = editor.lua("return require('dsh.rewind').unified_lines(...)", binary)
    assert lines[-2:] == ["── logo.png · put back ──", "Binary file logo.png differs"]
    many = [dict(FILES[0], path=f"f{i}.txt") for i in range(9)]
    assert editor.lua("return require('dsh.rewind').layout(...)", many) == "unified"


def test_a_chat_item_with_a_checkpoint_shows_the_hint_and_r_says_why_on_the_others(editor):
    editor.lua(
        """
        local buf = vim.api.nvim_create_buf(true, true)
        vim.api.nvim_win_set_buf(0, buf)
        local view = { buf = buf, store = require('dsh.chat.store').new(), builder = require('dsh.chat.builder').attach(buf) }
        _G.view = view
        for _, item in ipairs(...) do require('dsh.chat').show(view, item) end
        """,
        # The tool call first runs, then its result rewrites it whole (its fold grew): its
        # hint must stay on its own line, not be pushed onto what follows.
        [ITEMS[0], dict(ITEMS[1], status="running", result=None), *ITEMS[1:]],
    )
    shown = editor.lua(
        """
        local buf, out = _G.view.buf, {}
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        local ns = vim.api.nvim_create_namespace('dsh.chat.hl')
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
          if m[4].virt_text then lines[m[2] + 1] = lines[m[2] + 1] .. m[4].virt_text[1][1] end
        end
        return lines
        """
    )
    write_artifact("chat-rewind-hints.txt", "\n".join(shown) + "\n")
    hinted = [line for line in shown if "⟲ R rewinds to here" in line]
    assert hinted == ["## You  ⟲ R rewinds to here", "▸ Write notes.txt ✓  ⟲ R rewinds to here"]
    # The key on each line: the item under the cursor, and why nothing happens without a checkpoint.
    why = editor.lua(
        """
        local out = {}
        for row = 1, vim.api.nvim_buf_line_count(0) do
          vim.api.nvim_win_set_cursor(0, { row, 0 })
          local item = require('dsh.chat').item_at_cursor(_G.view)
          table.insert(out, { item and item.id or vim.NIL, require('dsh.rewind').why_not(item) or vim.NIL })
        end
        return out
        """
    )
    by_item = {item: reason for item, reason in why}
    assert by_item["u-1"] is None and by_item["c-1"] is None
    assert "its step could only read" in by_item["c-2"]
    assert "only your messages and tool calls marked ⟲" in by_item["a-1"]
    assert "no step of its turn could change files" in by_item["u-2"]
    assert by_item[None].startswith("put the cursor on")  # the prompt area


ASK = """
_G.events = {}
for _, name in ipairs({ 'DshRewindCancelled', 'DshRewound' }) do
  vim.api.nvim_create_autocmd('User', { pattern = name, callback = function() table.insert(_G.events, name) end })
end
_G.sent = {}
-- The daemon is not here: record the restore the float asks for instead of sending it.
require('dsh.client').request = function(method, params) table.insert(_G.sent, { method, params }) end
_G.rw = { agent_id = 'a-1', seq = 9, point = { turn = 1, step = 1, seq = 9 }, files = ... }
"""
# The float reads its key itself: started from the loop, as a key or a response starts it.
ASK_AGAIN = "vim.schedule(function() require('dsh.rewind').ask(_G.rw) end)"


def asking(editor: Editor, title: str = "Rewind to here?") -> dict:
    """Wait until the float asks `title`; then what it shows."""
    editor.wait_for(f"(require('dsh.rewind').current() or {{}}).asking == {title!r}", what=title)
    return editor.lua(
        """
        local win = require('dsh.rewind').current().float_win
        local cfg = vim.api.nvim_win_get_config(win)
        local footer = {}
        for _, c in ipairs(cfg.footer) do table.insert(footer, c[1]) end
        return { relative = cfg.relative, title = cfg.title[1][1], footer = table.concat(footer),
                 current = vim.api.nvim_get_current_win() == win,
                 lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false) }
        """
    )


def closed(editor: Editor) -> bool:
    return editor.lua("return (require('dsh.rewind').current() or {}).float_win == nil")


def test_the_confirm_float_takes_only_its_keys_and_a_stray_key_is_no(editor):
    editor.lua(ASK, FILES[:1])
    editor.lua(ASK_AGAIN)
    shown = asking(editor)
    assert shown["current"]
    assert shown["relative"] == "editor" and shown["title"] == " Rewind to here? "
    assert shown["lines"] == ["Rewind to before turn 1, step 1? 1 file goes back:", "    put back  notes.txt"]
    assert "f rewind files · c files and conversation · q or any other key cancels" in shown["footer"]
    editor.feed("x")
    editor.wait_for("#_G.events == 1")
    assert editor.lua("return _G.events") == ["DshRewindCancelled"]
    assert closed(editor) and editor.lua("return vim.api.nvim_win_get_config(0).relative") == ""
    assert editor.lua("return _G.sent") == []
    # <Esc> too; then f asks the daemon for the files only.
    editor.lua(ASK_AGAIN)
    asking(editor)
    editor.feed("<Esc>")
    editor.wait_for("#_G.events == 2")
    editor.lua(ASK_AGAIN)
    asking(editor)
    editor.feed("f")
    sent = editor.wait_for("_G.sent[1]")
    assert sent == ["dsh/checkpoint/restore", {"agentId": "a-1", "seq": 9, "files": True,
                                              "conversation": False, "force": False}]


def test_a_file_the_person_changed_needs_a_second_different_key(editor):
    editor.lua(ASK, FILES)
    editor.lua(ASK_AGAIN)
    assert "✎ changed by you since the agent's last step" in asking(editor)["lines"][-1]
    editor.feed("c")
    lines = asking(editor, "Overwrite your changes?")["lines"]
    assert lines[:2] == ["You changed this file since the agent's last step:", "  ✎ mine.md"]
    editor.feed("c")  # the first key again is not the second answer
    editor.wait_for("#_G.events == 1")
    assert editor.lua("return _G.sent") == []
    editor.lua(ASK_AGAIN)
    asking(editor)
    editor.feed("c")
    asking(editor, "Overwrite your changes?")
    editor.feed("o")
    sent = editor.wait_for("_G.sent[1]")
    assert sent == ["dsh/checkpoint/restore", {"agentId": "a-1", "seq": 9, "files": True,
                                              "conversation": True, "force": True}]


def test_a_key_typed_before_the_float_could_be_read_answers_nothing(editor):
    import time

    editor.lua("require('dsh.float').guard_ms = 400")
    editor.lua(ASK, FILES[:1])
    editor.lua(ASK_AGAIN)
    asking(editor)
    editor.feed("f")  # in flight as it opened: not an answer, and not a "no" either
    time.sleep(0.1)
    assert editor.lua("return _G.sent") == [] and editor.lua("return _G.events") == []
    assert not closed(editor)
    time.sleep(0.4)
    editor.feed("f")
    assert editor.wait_for("_G.sent[1]")[0] == "dsh/checkpoint/restore"


@pytest.mark.parametrize(
    ("args", "action"),
    [("rewind", {"action": "rewind"}), ("rewind list", {"action": "rewind.list"})],
)
def test_parse_rewind(editor, args, action):
    assert editor.lua("return require('dsh.commands').parse(...)", args) == action


def test_outcome_words(editor):
    words = editor.lua("return require('dsh.rewind').outcome_words(...)",
                       {"restored": ["a.txt", "b.txt"], "forced": ["b.txt"],
                        "agent": {"agentId": "a-2", "sessionId": "s-2"}}, True)
    assert words == "rewound 2 files: a.txt, b.txt (your changes to b.txt overwritten); the conversation goes on from there in session s-2"


def test_a_hostile_file_name_stays_on_its_line(editor):
    hostile = [{"path": "a\nb\x1b[2J.txt", "status": "modified", "binary": True, "changedByPerson": True}]
    lines, _ = editor.lua("return { require('dsh.rewind').confirm_lines({ seq = 3 }, ...) }", hostile)
    assert lines[1] == "  ✎ put back  a?b?[2J.txt"
    assert editor.lua("return require('dsh.rewind').unified_lines(...)", hostile)[0] == (
        "── a?b?[2J.txt · put back · ✎ changed by you since ──")
    assert editor.lua("return require('dsh.rewind').force_lines({ ... })[2]", "x\ny") == "  ✎ x?y"


def test_with_no_file_to_change_only_the_conversation_can_rewind(editor):
    editor.lua(ASK, [])
    editor.lua(ASK_AGAIN)
    shown = asking(editor)
    assert shown["lines"][0] == "The files are as they were before turn 1, step 1: no file changes."
    assert "c rewind the conversation · q or any other key cancels" in shown["footer"]
    editor.feed("f")  # not a choice here: "no"
    editor.wait_for("#_G.events == 1")
    assert editor.lua("return _G.sent") == []
    editor.lua(ASK_AGAIN)
    asking(editor)
    editor.feed("c")
    assert editor.wait_for("_G.sent[1]")[1]["conversation"] is True
