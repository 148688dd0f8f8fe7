"""`examples/workspace` (the ready workspace both editor READMEs open) plays the
conversation its README describes, against the real daemon."""

from __future__ import annotations

import pytest

import asyncio
import shutil
from pathlib import Path

from tests.e2e.conftest import Daemon
from tests.e2e.support import of_type, wait_idle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"


@pytest.mark.slow
async def test_the_example_workspace_plays_its_readme(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("sessions"))
    asked: list[dict] = []

    def person(params: dict) -> dict:
        asked.append(params)
        q = params["questions"][0]
        if len(asked) == 1:  # the first plan goes back with feedback and a comment on step 3
            return {"answers": [{"id": q["id"], "choice": "revise", "feedback": "Cap the backoff.",
                                 "comments": [{"line": 5, "text": "Not on every exception."}]}]}
        return {"answers": [{"id": q["id"], "choice": "approve"}]}

    daemons = Daemon(root)
    try:
        client = await daemons.start(answer=person)
        created = await client.request("dsh/session/create", {"title": "example"})
        agent = created["agentId"]
        await client.request("dsh/plan/set", {"agentId": agent, "active": True})
        result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries to the HTTP client"})
        assert result["stopReason"] == "end-turn"
        assert [q["questions"][0]["plan"].splitlines()[0] for q in asked] == [
            "# Plan: retries for the HTTP client", "# Plan: retries for the HTTP client (revised)"]
        assert (await client.request("dsh/plan/get", {"agentId": agent}))["active"] is False
        goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Retries for the HTTP client"})
        assert goal["maxRounds"] == 40  # from the example's config
        for _ in range(100):
            goal = await client.request("dsh/goal/get", {"agentId": agent})
            if goal["phase"] == "complete":
                break
            await asyncio.sleep(0.1)
        assert goal["phase"] == "complete", goal
        events = await wait_idle(client, agent)
        texts = [e["data"]["text"] for e in of_type(events, "assistant/message")]
        assert texts[-1] == "Done: retries are in, with tests for the policy and the cap."
        assert not any("script exhausted" in t for t in texts)
    finally:
        await daemons.stop_all()


@pytest.mark.slow
async def test_the_example_workspace_offers_its_tools_to_a_real_model(tmp_path: Path) -> None:
    """The same folder with an OpenAI-compatible model (a loopback server, chosen in the
    person's editor settings as the README says): the model is offered the workspace
    tools, and its read_file of the example's code works."""
    from loopback_models import Call, LoopbackModelServer, Reply

    from tests.e2e.test_providers import KEY, KEY_ENV, model_config

    root = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("sessions"))
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply("Let me read the client.", [Call("read_file", {"path": "http/client.py"})]),
            Reply("It makes one attempt."),
        )
        daemons = Daemon(root)
        try:
            client = await daemons.start(config=model_config(server), env={KEY_ENV: KEY})
            created = await client.request("dsh/session/create", {})
            result = await client.request(
                "dsh/agent/prompt", {"agentId": created["agentId"], "text": "How does send retry?"}
            )
            assert result["stopReason"] == "end-turn"
            first, second = server.wait_requests(2)
            offered = {tool["function"]["name"] for tool in first.json["tools"]}
            assert {"read_file", "list_files", "search", "edit_file", "write_file", "run_command"} <= offered
            assert {"exit_plan_mode", "goal_complete", "goal_block"} <= offered
            # The call ran: the second request carries the file's text as the tool result.
            tool_results = [m for m in second.json["messages"] if m["role"] == "tool"]
            assert len(tool_results) == 1
            assert "class HttpClient" in tool_results[0]["content"]
            assert "unknown tool" not in tool_results[0]["content"]
        finally:
            await daemons.stop_all()
