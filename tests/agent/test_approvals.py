"""The approvals gate in process (agent/approvals.py): a real Workspace, the scripted model,
an in-process seam playing the person. Covers what the wire tests cannot see: the next
model request itself, and the seam's contract (a malformed return fails closed)."""

from __future__ import annotations

import asyncio

from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from dshd.agent.tools import Tool, ToolOutcome
from tests.agent_support import events_of, make_workspace, until

EDIT = {"name": "edit_file", "arguments": {"path": "app.py", "oldText": "hi", "newText": "hello"}}


def workspace(tmp_path, replies, answer, config=None):
    (tmp_path / "app.py").write_text("print('hi')\n")
    approvals = InProcessApprovals(answer)
    return make_workspace(tmp_path, replies, approvals=approvals, config=config), approvals


async def test_reject_feedback_is_in_the_next_model_request(tmp_path):
    ws, approvals = workspace(
        tmp_path, [{"toolCalls": [EDIT]}, {"text": "ok"}], lambda r: ApprovalAnswer("reject", "Use 'hey' instead.")
    )
    agent = ws.create_session()
    await agent.prompt("greet")
    assert (tmp_path / "app.py").read_text() == "print('hi')\n"
    [request] = approvals.asked
    assert request.tool == "edit_file" and request.mutability == "write" and request.agent_id == agent.agent_id
    next_request = ws.model.requests[1]
    tool_message = next_request.messages[-1]
    assert tool_message.role == "tool" and tool_message.ok is False
    assert "Use 'hey' instead." in tool_message.text and "rejected" in tool_message.text


async def test_a_yes_with_a_note_runs_and_passes_the_note(tmp_path):
    ws, _ = workspace(tmp_path, [{"toolCalls": [EDIT]}, {"text": "ok"}], lambda r: ApprovalAnswer("allow-once", "ok, once"))
    agent = ws.create_session()
    await agent.prompt("greet")
    assert (tmp_path / "app.py").read_text() == "print('hello')\n"
    assert "The person's note: ok, once" in ws.model.requests[1].messages[-1].text
    [decision] = events_of(agent, "permission/decision")
    assert decision.data.feedback == "ok, once" and decision.data.by == "person"


async def test_a_malformed_answer_from_any_seam_fails_closed(tmp_path):
    ws, _ = workspace(tmp_path, [{"toolCalls": [EDIT]}, {"text": "ok"}], lambda r: {"outcome": "allow-once"})
    agent = ws.create_session()
    await agent.prompt("greet")
    assert (tmp_path / "app.py").read_text() == "print('hi')\n"
    assert "malformed" in ws.model.requests[1].messages[-1].text
    assert [(d.data.outcome, d.data.by) for d in events_of(agent, "permission/decision")] == [("reject", "fail-closed")]


async def test_cancel_while_asking_records_a_fail_closed_decision(tmp_path):
    waiting = asyncio.Event()

    async def never(request):
        waiting.set()
        await asyncio.sleep(60)

    ws, _ = workspace(tmp_path, [{"toolCalls": [EDIT]}, {"text": "never"}], never)
    agent = ws.create_session()
    prompt = asyncio.ensure_future(agent.prompt("greet"))
    await asyncio.wait_for(waiting.wait(), 5)
    await agent.cancel()
    assert (await prompt).stop_reason == "cancelled"
    assert [(d.data.outcome, d.data.by) for d in events_of(agent, "permission/decision")] == [("reject", "fail-closed")]
    assert (tmp_path / "app.py").read_text() == "print('hi')\n"


async def test_any_tool_is_gated_by_its_class_with_a_default_title(tmp_path):
    """The gate knows classes, not tools: a plugin's exec tool without a preview is asked
    about with its name and arguments; a read tool is asked about only when approve lists read."""
    ran: list[dict] = []

    async def deploy(ctx, arguments):
        ran.append(arguments)
        return ToolOutcome.success("deployed")

    ws, approvals = workspace(
        tmp_path,
        [
            {"toolCalls": [{"name": "deploy", "arguments": {"target": "prod"}}]},
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "app.py"}}]},
            {"text": "done"},
        ],
        lambda r: ApprovalAnswer("allow-once"),
        config={"tools": {"approve": ["read", "exec"]}},
    )
    agent = ws.create_session()
    agent.tools.add(Tool("deploy", "Deploy.", {"type": "object"}, deploy, mutability="exec"))
    await agent.prompt("ship")
    assert ran == [{"target": "prod"}]
    assert [(r.tool, r.mutability, r.title) for r in approvals.asked] == [
        ("deploy", "exec", 'deploy {"target": "prod"}'),
        ("read_file", "read", 'read_file {"path": "app.py"}'),
    ]
    assert [d.data.tool for d in events_of(agent, "permission/decision")] == ["deploy", "read_file"]


async def test_reads_are_not_recorded_when_nobody_is_asked(tmp_path):
    ws, approvals = workspace(
        tmp_path, [{"toolCalls": [{"name": "read_file", "arguments": {"path": "app.py"}}]}, {"text": "ok"}],
        lambda r: ApprovalAnswer("reject"),
    )
    agent = ws.create_session()
    await agent.prompt("look")
    assert approvals.asked == [] and events_of(agent, "permission/decision") == []
    await until(lambda: not agent.turn_running)
