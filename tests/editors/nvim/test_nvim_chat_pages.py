"""A long session's chat in a real Neovim against the real daemon: the chat opens on its
newest page (dsh/chat/get beforeSeq, 200 items), earlier pages load in front of it on
demand (:Dsh chat older, scrolling to the top) without moving what the window shows, and
live upserts of a new turn still land at the end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from long_session import SESSION_ID, write_long_session  # noqa: E402
from nvim_harness import write_artifact  # noqa: E402

from .test_nvim_daemon import chat_lines, make_workspace, open_editor, wait_for_chat  # noqa: E402

pytestmark = pytest.mark.slow

TURNS = 800  # 4,001 events, 2,401 chat items

VIEW = f"require('dsh.chat').views()['{SESSION_ID}']"


def shown(editor) -> list[str]:
    return editor.lua(f"return vim.tbl_map(function(i) return i.id end, {VIEW}.store:items())")


def test_a_long_chat_opens_on_its_newest_page_and_loads_earlier_ones(tmp_path):
    workspace = make_workspace(tmp_path / "ws", [{"text": "a live reply"}])
    write_long_session(workspace, TURNS)
    editor = open_editor(workspace)
    try:
        editor.typed(f"Dsh session open {SESSION_ID}")
        editor.wait_for(f"select(2, require('dsh').current()) == '{SESSION_ID}'", what="the long session open")
        editor.typed("Dsh chat")
        lines = wait_for_chat(editor, f"question {TURNS}")
        # The newest page only: 200 items, the last turns, a line saying more is above.
        ids = shown(editor)
        assert len(ids) == 200
        text = "\n".join(lines)
        assert f"answer {TURNS}" in text and "question 1\n" not in text and "# Session" not in text
        assert lines[0].startswith("⋯ earlier messages")
        first_question = min(int(l.split()[1]) for l in lines if l.startswith("question "))
        assert first_question > TURNS - 70
        # The cursor is in the prompt area, at the end, as on any chat.
        assert editor.lua("return vim.api.nvim_win_get_cursor(0)[1]") == len(lines)

        # :Dsh chat older puts the page before it in front; the window stays on its line.
        before_cursor = editor.lua("return vim.api.nvim_buf_line_count(0) - vim.api.nvim_win_get_cursor(0)[1]")
        editor.typed("Dsh chat older")
        editor.wait_for(f"#{VIEW}.store:items() == 400", what="the page before the newest")
        older = shown(editor)
        assert older[200:] == ids  # in front, in list order, the newest page unchanged
        assert editor.lua("return vim.api.nvim_buf_line_count(0) - vim.api.nvim_win_get_cursor(0)[1]") == before_cursor

        # Scrolling to the top loads the next page before it, and on until the first.
        editor.feed("gg")
        editor.wait_for(f"#{VIEW}.store:items() == 600", what="a page loaded by scrolling to the top")
        for _ in range(20):
            if editor.lua(f"return {VIEW}.older_seq == nil"):
                break
            count = editor.lua(f"return #{VIEW}.store:items()")
            editor.feed("gg")
            editor.wait_for(f"#{VIEW}.store:items() > {count} or {VIEW}.older_seq == nil", what="one more page")
        assert editor.lua(f"return #{VIEW}.store:items()") == 2401
        lines = chat_lines(editor)
        assert lines[0] == "# Session \"long\""  # the whole conversation, no "earlier" line left
        questions = [int(l.split()[1]) for l in lines if l.startswith("question ")]
        assert questions == list(range(1, TURNS + 1))  # each once, in order

        # Live upserts still land at the end.
        editor.feed("G")
        editor.feed("ihello<Esc>")
        editor.wait_for("vim.fn.mode() == 'n'")
        editor.feed("<CR>")
        lines = wait_for_chat(editor, f"─── Turn {TURNS + 1} finished ───")
        assert "a live reply" in "\n".join(lines[-12:])
        write_artifact("chat-pages.txt", "\n".join(lines[:20] + ["…"] + lines[-20:]) + "\n")
        assert not editor.lua_errors()
    finally:
        editor.close()
