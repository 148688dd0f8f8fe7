"""Two real Neovims on one shared daemon: the second, set up for another model, is told so
in the editor (naming the key); `:Dsh restart` restarts the workspace's daemon (a new
pid) and both Neovims are back on their session, where a prompt works."""

from __future__ import annotations

import pytest

from tests.editors.nvim.test_nvim_shared import (  # noqa: F401 - `shared` is a fixture
    daemon_pids,
    join,
    new_session,
    select_session,
    shared,
    wait_for_chat,
    wait_others,
    write_artifact,
)

pytestmark = [pytest.mark.slow, pytest.mark.editor]

NOTICE = "Your settings are not in force"
CHAT_LINES = ("(function() local v = require('dsh.chat').views()[select(2, require('dsh').current())];"
              " return v and vim.api.nvim_buf_get_lines(v.buf, 0, -1, false) or {} end)()")


def told(editor, needle: str) -> list[str]:
    """Every notice in full (what is shown is cut to the screen's width; :Dsh messages has it whole)."""
    return [e["text"] for e in editor.lua("return require('dsh.errors').history") if needle in e["text"]]


def test_other_settings_are_told_and_dsh_restart_reattaches_both_neovims(shared):
    shared.start([{"text": "scripted answer"}] * 4)
    a = shared.editor("nvim A", model={"model": "model-x"})
    session_id = new_session(a)
    b = shared.editor("nvim B", model={"model": "model-y"})
    join(b, session_id)
    b.wait_for(f"vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find({NOTICE!r}, 1, true) end)",
               what="B told its settings are not in force")
    [notice] = told(b, NOTICE)
    assert "model.model (yours: model-y; in force: model-x)" in notice and ":Dsh restart" in notice
    assert not told(a, NOTICE)  # A's settings are the daemon's
    wait_others(a, ["nvim B"])
    for editor in (a, b):
        editor.typed("Dsh chat")
        editor.wait_for("vim.api.nvim_buf_get_name(0):find('dsh://chat/', 1, true)")
    a.typed("Dsh prompt hello")
    wait_for_chat(b, "scripted answer")
    a.wait_for("not require('dsh.state').busy()", what="the turn over")

    [old] = daemon_pids(shared.runtime)
    a.typed("Dsh restart")
    a.wait_for("vim.iter(_G.dsh_test.messages):any(function(m) return m.msg:find('restarted the daemon', 1, true) end)",
               timeout=60, what="A told the daemon restarted")
    for editor in (a, b):
        editor.wait_for(f"select(2, require('dsh').current()) == '{session_id}' and require('dsh.client').get() ~= nil",
                        timeout=40, what="the session, reopened")
    pids = daemon_pids(shared.runtime)
    assert len(pids) == 1 and pids != [old], (old, pids)
    wait_others(a, ["nvim B"])
    wait_others(b, ["nvim A"])
    assert select_session(a) == select_session(b) == session_id
    # A prompt in the same session works after the restart.
    a.typed("Dsh prompt are you still there")
    for editor in (a, b):
        editor.wait_for(f"#vim.tbl_filter(function(l) return l:find('scripted answer', 1, true) end, {CHAT_LINES}) >= 2",
                        timeout=40, what="the second answer in the chat")
    assert told(a, "restarted the daemon: pid")
    # The editor that asked reattached first: the next daemon has its settings; B is told.
    assert not told(a, NOTICE) and len(told(b, NOTICE)) == 2
    assert told(b, "the workspace's daemon restarted; reopening your session")
    assert not [m for m in a.messages() + b.messages() if "went away" in m or "crashed" in m]
    write_artifact("nvim-daemon-restart-a-messages.txt", "\n".join(a.messages()) + "\n")
    write_artifact("nvim-daemon-restart-b-messages.txt", "\n".join(b.messages()) + "\n")
