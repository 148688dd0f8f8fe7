"""`examples/workspace` (the ready workspace both editor READMEs open) plays the
conversation its README walks through, against the real daemon, step by step: the prompt,
the plan sent back and approved, a goal whose first round edits `http/client.py` (asked and
allowed), whose second calls the example's own MCP server, the checkpoints list, a rewind
with its diff, and the goal's spend with tokens (`dshd log show --goal`)."""

from __future__ import annotations

import pytest

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Daemon
from tests.e2e.support import log_path, of_type, read_log, wait_idle
from tests.sandbox_support import needs_sandbox

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"
DSHD = Path(sys.executable).with_name("dshd")
MCP_TOOL = "mcp__http-status__http_status"


def copy_example(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("sessions", "checkpoints.git", "__pycache__"))
    return root


def readme_person(asked: list[dict]):
    """The person of the README's steps 1-2: the first plan goes back with feedback and a
    comment on step 3, the revised one is approved."""

    def person(params: dict) -> dict:
        asked.append(params)
        q = params["questions"][0]
        if len(asked) == 1:
            return {"answers": [{"id": q["id"], "choice": "revise", "feedback": "Cap the backoff.",
                                 "comments": [{"line": 5, "text": "Not on every exception."}]}]}
        return {"answers": [{"id": q["id"], "choice": "approve"}]}

    return person


@pytest.mark.slow
@needs_sandbox
async def test_the_example_workspace_plays_its_readme(tmp_path: Path) -> None:
    root = copy_example(tmp_path)
    original = (root / "http" / "client.py").read_text()
    asked: list[dict] = []
    approvals: list[dict] = []
    daemons = Daemon(root)
    daemons.trusted = True  # README: trust the folder when the editor asks (its MCP server starts only then)
    try:
        client = await daemons.start(
            answer=readme_person(asked), approve=lambda p: approvals.append(p) or {"outcome": "allow-once"}
        )
        created = await client.request("dsh/session/create", {"title": "example"})
        agent, sid = created["agentId"], created["sessionId"]

        # 1-2. Plan mode on, the prompt, the plan sent back, the revised plan approved.
        await client.request("dsh/plan/set", {"agentId": agent, "active": True})
        result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries to the HTTP client"})
        assert result["stopReason"] == "end-turn"
        assert [q["questions"][0]["plan"].splitlines()[0] for q in asked] == [
            "# Plan: retries for the HTTP client", "# Plan: retries for the HTTP client (revised)"]
        assert (await client.request("dsh/plan/get", {"agentId": agent}))["active"] is False

        # 3. The goal: round 1 edits http/client.py (asked, allowed), round 2 asks the MCP server.
        goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "Retries for the HTTP client"})
        assert goal["maxRounds"] == 40  # from the example's config
        for _ in range(300):
            goal = await client.request("dsh/goal/get", {"agentId": agent})
            if goal["phase"] == "complete":
                break
            await asyncio.sleep(0.1)
        assert goal["phase"] == "complete", goal
        events = await wait_idle(client, agent)
        texts = [e["data"]["text"] for e in of_type(events, "assistant/message")]
        assert texts[-1] == "Done: `send` retries connection errors and 502/503/504, with a capped backoff."
        assert not any("script exhausted" in t for t in texts)

        edited = (root / "http" / "client.py").read_text()
        assert "class RetryPolicy" in edited and "RETRY_STATUSES" in edited and edited != original
        compile(edited, "client.py", "exec")  # the scripted edits leave working Python
        # Only the edits were asked about (the MCP tool is read-only: it runs unasked).
        assert [a["tool"] for a in approvals] == ["edit_file", "edit_file"], approvals
        assert MCP_TOOL in of_type(events, "request/header")[-1]["data"]["tools"]  # offered to the model
        names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
        results = [(names[e["data"]["callId"]], e["data"]) for e in of_type(events, "tool/result")]
        worked = [(n, r["ok"]) for n, r in results if n in ("edit_file", MCP_TOOL)]
        assert worked == [("edit_file", True), ("edit_file", True), (MCP_TOOL, True), (MCP_TOOL, True)], results
        mcp_texts = [str(r["content"]) for n, r in results if n == MCP_TOOL]
        assert "503 Service Unavailable: retry" in mcp_texts[0] and "500 Internal Server Error: do not retry" in mcp_texts[1]

        # 4. Rewind: the checkpoints list has round 1's edit step, its diff shows client.py
        # going back, and the restore puts it back.
        checkpoints = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
        assert len(checkpoints) == 1, checkpoints  # the edits' step; the read-only MCP calls take none
        [edit_step] = checkpoints
        assert edit_step["files"] == ["http/client.py"]
        diff = (await client.request("dsh/checkpoint/diff", {"agentId": agent, "seq": edit_step["seq"]}))["files"]
        assert [(f["path"], f["status"], f["changedByPerson"]) for f in diff] == [("http/client.py", "modified", False)]
        assert "class RetryPolicy" in str(diff[0])  # the diff shows what the rewind takes out
        done = await client.request("dsh/checkpoint/restore", {"agentId": agent, "seq": edit_step["seq"]})
        assert done["restored"] == ["http/client.py"] and done["forced"] == []
        assert (root / "http" / "client.py").read_text() == original
        assert len(of_type(read_log(root, sid), "checkpoint/restored")) == 1

        # 5. The spend: the goal's tokens, on the wire and in `dshd log show --goal`.
        goal = await client.request("dsh/goal/get", {"agentId": agent})
        assert goal["tokensUsed"] > 0 and not goal.get("tokensEstimated"), goal  # reported, not estimated
    finally:
        await daemons.stop_all()
    shown = subprocess.run([str(DSHD), "log", "show", str(log_path(root, sid)), "--goal"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    summary = next(line for line in shown.stdout.splitlines() if line.startswith("goal "))
    assert " 0 in + 0 out tokens" not in summary and "3 rounds" in summary, shown.stdout
    header, *rows = shown.stdout.splitlines()[shown.stdout.splitlines().index(summary) + 1:]
    assert header.split()[-5:] == ["input", "cached", "output", "tools", "outcome"]
    # Counted from the right ("took" is two cells: "1.9 s"): each round spent input and output tokens.
    assert len(rows) == 3 and all(row.split()[-5] != "0" and row.split()[-3] != "0" for row in rows), shown.stdout


@pytest.mark.slow
async def test_untrusted_the_examples_mcp_server_never_starts_and_is_named(tmp_path: Path) -> None:
    """As the README says: in a folder not trusted, the example's MCP server is left out and
    named (a repository's server is a program it would run); the rest of the walk still works,
    the MCP call failing as an unknown tool."""
    root = copy_example(tmp_path)
    daemons = Daemon(root)
    try:
        client = await daemons.start(answer=readme_person([]), approve=lambda p: {"outcome": "allow-once"})
        report = await client.request("dsh/config/get", {})
        assert report["trusted"] is False
        assert [i["key"] for i in report["ignored"]] == ["mcp.servers.http-status"], report["ignored"]
        created = await client.request("dsh/session/create", {})
        agent, sid = created["agentId"], created["sessionId"]
        await client.request("dsh/plan/set", {"agentId": agent, "active": True})
        await client.request("dsh/agent/prompt", {"agentId": agent, "text": "Add retries to the HTTP client"})
        await client.request("dsh/goal/create", {"agentId": agent, "objective": "Retries for the HTTP client"})
        for _ in range(300):
            if (await client.request("dsh/goal/get", {"agentId": agent}))["phase"] == "complete":
                break
            await asyncio.sleep(0.1)
        events = await wait_idle(client, agent)
        header = of_type(events, "request/header")[-1]
        assert not any(str(t).startswith("mcp__") for t in header["data"]["tools"]), header["data"]["tools"]
        names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
        mcp = [e["data"] for e in of_type(events, "tool/result") if names[e["data"]["callId"]] == MCP_TOOL]
        assert len(mcp) == 2 and not any(r["ok"] for r in mcp), mcp
        # Checkpoints need no trust: the edits' step is still there to rewind.
        assert len((await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]) == 1
    finally:
        await daemons.stop_all()


@pytest.mark.slow
async def test_the_example_workspace_offers_its_tools_to_a_real_model(tmp_path: Path) -> None:
    """The same folder with an OpenAI-compatible model (a loopback server, chosen in the
    person's editor settings as the README says): the model is offered the workspace
    tools, and its read_file of the example's code works."""
    from loopback_models import Call, LoopbackModelServer, Reply

    from tests.e2e.test_providers import KEY, KEY_ENV, model_config

    root = copy_example(tmp_path)
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
