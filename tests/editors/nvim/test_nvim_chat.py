"""The Neovim chat buffer's builder and formatters in a real headless Neovim, fed the
shared chat fixtures (tests/fixtures/chat/): the items the daemon projects, upsert by
upsert, exactly as dsh/chat/item delivers them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import REPO, Editor, write_artifact  # noqa: E402

FIXTURE_DIR = REPO / "tests" / "fixtures" / "chat"
FIXTURES = sorted(FIXTURE_DIR.glob("*.json"))


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURE_DIR / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def editor():
    ed = Editor(columns=100, lines=40)
    yield ed
    errors = ed.lua_errors()
    ed.close()
    assert not errors, errors


# A chat buffer in the current window with no daemon behind it: the builder and store
# are the real ones; upserts are applied the way dsh/chat/item applies them.
SETUP = """
local buf = vim.api.nvim_create_buf(true, true)
vim.bo[buf].filetype = 'markdown'
vim.api.nvim_win_set_buf(0, buf)
local view = { buf = buf, store = require('dsh.chat.store').new(), builder = require('dsh.chat.builder').attach(buf) }
_G.chat_view = view
vim.wo.foldmethod = 'expr'
vim.wo.foldexpr = "v:lua.require'dsh.chat.builder'.foldexpr()"
vim.wo.foldlevel = 0
return buf
"""

UPSERT = """
local view = _G.chat_view
for _, item in ipairs(...) do
  require('dsh.chat').show(view, item)
end
return vim.api.nvim_buf_get_lines(view.buf, 0, -1, false)
"""

FRESH = """
local buf = vim.api.nvim_create_buf(true, true)
local builder = require('dsh.chat.builder').attach(buf)
builder:reset(...)
local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
vim.api.nvim_buf_delete(buf, { force = true })
return lines
"""


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_upserts_render_as_the_whole_list_does(editor, path):
    fixture = json.loads(path.read_text(encoding="utf-8"))
    editor.lua(SETUP)
    shown = []
    for step in fixture["steps"]:
        lines = editor.lua(UPSERT, step["upserts"])
        shown.append(lines)
    final = shown[-1]
    # Streaming then committing, item by item, ends exactly where a fresh list begins.
    assert final == editor.lua(FRESH, fixture["items"])
    assert final[-1] == ""  # the prompt area, empty
    write_artifact(f"chat-{path.stem}.txt", "\n".join(final) + "\n")
    # Every item the fixture holds shows its words (the daemon's text, never re-derived).
    text = "\n".join(final)
    for item in fixture["items"]:
        words = item.get("text") if item["kind"] not in ("assistant-message", "user-message") else None
        if words:
            assert words.splitlines()[0] in text, (item["id"], words)


def test_a_streamed_reply_grows_in_place(editor):
    fixture = load_fixture("conversation.json")
    editor.lua(SETUP)
    seen = []
    for step in fixture["steps"]:
        lines = editor.lua(UPSERT, step["upserts"])
        if step.get("delta", {}).get("kind") == "text":
            seen.append("\n".join(lines))
    assert len(seen) >= 3
    # Each piece shows more of the same reply, with the streaming cursor at its end.
    assert all("▍" in s for s in seen)
    assert seen[0] != seen[1] != seen[2]
    assert seen[-1].count("## dsh") == 1


def test_tool_call_details_are_folded_and_a_pending_plan_is_open(editor):
    items = load_fixture("plan-review.json")["items"]
    convo = load_fixture("conversation.json")["items"]
    editor.lua(SETUP)
    lines = editor.lua(UPSERT, convo + [i for i in items if i["kind"] == "plan-review"])
    folds = editor.lua(
        "local out = {} for l = 1, vim.api.nvim_buf_line_count(0) do out[l] = vim.fn.foldclosed(l) end return out"
    )
    header = next(i for i, line in enumerate(lines) if line.startswith("▸ Read http/client.py ✓"))
    assert folds[header] == -1  # the header line shows
    assert folds[header + 1] == header + 2  # the arguments and result below it are folded
    pending = next(i for i, line in enumerate(lines) if "waiting for your review" in line)
    assert folds[pending + 1] == -1  # a plan waiting for review is open
    sent_back = next(i for i, line in enumerate(lines) if "sent back with feedback" in line)
    assert folds[sent_back + 1] != -1  # a decided one is folded


def test_typing_in_the_prompt_survives_upserts(editor):
    editor.lua(SETUP)
    editor.feed("ifix the parser<Esc>")
    editor.wait_for("vim.api.nvim_buf_get_lines(0, -2, -1, false)[1] == 'fix the parser'")
    items = load_fixture("conversation.json")["items"]
    lines = editor.lua(UPSERT, items)
    assert lines[-1] == "fix the parser"
    assert editor.lua("return _G.chat_view.builder:prompt_lines()") == ["fix the parser"]
    # The cursor stayed in the prompt area, on what was typed.
    assert editor.lua("return vim.api.nvim_win_get_cursor(0)[1]") == len(lines)


def test_unknown_kinds_are_not_shown(editor):
    editor.lua(SETUP)
    lines = editor.lua(UPSERT, [{"id": "x-1", "kind": "from-the-future", "text": "?"},
                                {"id": "session-1", "kind": "session", "text": "Session started"}])
    assert lines == ["# Session started", "", ""]


def test_prompt_text(editor):
    assert editor.lua("return require('dsh.chat.input').text(...)", ["", "  hello", "world  ", ""]) == "hello\nworld"
