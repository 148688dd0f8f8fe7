"""Session pickers get what they show (the real `dshd serve`): a session created without a
title is titled by its first prompt's words, slash commands stripped; each entry of
`dsh/session/list` carries its last activity time and its goal's phase."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import write_workspace


@pytest.mark.slow
async def test_list_titles_untitled_sessions_by_their_first_prompt(workspace, daemons):
    write_workspace(workspace, replies=[{"text": "Looking."}, {"text": "Done."}, {"text": "Ok."}])
    client = await daemons.start()
    planned = await client.request("dsh/session/create", {})
    await client.request("dsh/agent/prompt", {"agentId": planned["agentId"], "text": "/plan fix the parser"})
    named = await client.request("dsh/session/create", {"title": "Given by the editor"})
    await client.request("dsh/agent/prompt", {"agentId": named["agentId"], "text": "something else"})
    empty = await client.request("dsh/session/create", {})
    goal = await client.request("dsh/goal/create", {"agentId": empty["agentId"], "objective": "Keep going"})
    await client.request("dsh/goal/pause", {"agentId": empty["agentId"], "ref": {"id": goal["id"], "revision": 1}})

    # The answer of the /plan prompt may come before the steered turn ends: wait for the title.
    sessions = {}
    for _ in range(100):
        sessions = {s["sessionId"]: s for s in (await client.request("dsh/session/list", {}))["sessions"]}
        if sessions[planned["sessionId"]]["title"] is not None:
            break
    assert sessions[planned["sessionId"]]["title"] == "fix the parser"
    assert sessions[named["sessionId"]]["title"] == "Given by the editor"  # a given title stays
    # A goal round's message is not the person's prompt: no words, no title yet.
    assert sessions[empty["sessionId"]]["title"] is None
    assert sessions[empty["sessionId"]]["goal"]["phase"] == "paused"
    for entry in sessions.values():
        assert entry["updatedAt"].endswith("Z")
    assert sessions[named["sessionId"]]["updatedAt"] >= sessions[planned["sessionId"]]["updatedAt"]

    # After a restart the title comes back from the log alone.
    await client.stop()
    again = await daemons.start()
    listed = {s["sessionId"]: s for s in (await again.request("dsh/session/list", {}))["sessions"]}
    assert listed[planned["sessionId"]]["title"] == "fix the parser"
