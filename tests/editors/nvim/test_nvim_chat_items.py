"""The chat fixtures read from Lua in a real Neovim: applying every step's upserts to the
plugin's chat store (replace by id, else append) gives the fixture's items."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import REPO, Editor  # noqa: E402

FIXTURES = sorted((REPO / "tests" / "fixtures" / "chat").glob("*.json"))


@pytest.fixture(scope="module")
def editor():
    ed = Editor()
    yield ed
    ed.close()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_lua_store_applies_the_fixture_upserts(editor, path):
    same = editor.lua(
        """
        local doc = vim.json.decode(table.concat(vim.fn.readfile(...), '\\n'))
        local store = require('dsh.chat.store').new()
        for _, step in ipairs(doc.steps) do
          for _, item in ipairs(step.upserts) do store:upsert(item) end
        end
        local got, want = store:items(), doc.items
        if #got ~= #want then return 'count ' .. #got .. ' ~= ' .. #want end
        for i = 1, #want do
          if not vim.deep_equal(got[i], want[i]) then return 'item ' .. i .. ': ' .. vim.inspect(got[i]) end
        end
        return true
        """,
        str(path),
    )
    assert same is True, same
