"""The tool-step seam (agent/tool_steps.py): hooks around a step's tools, on a real
Workspace with the scripted model."""

from __future__ import annotations

from agent_support import make_workspace, types_of

from dshd.agent import Tool, ToolOutcome
from dshd.agent.turn_end import TurnEnd

NO_ASKING = {"tools": {"approve": []}}  # the write tool runs without a person's yes


def add_tools(agent, ran):
    async def run(ctx, arguments):
        ran.append((ctx.step, arguments.get("n")))
        return ToolOutcome.success("ok")

    schema = {"type": "object"}
    agent.tools.add(Tool("peek", "Read.", schema, run, mutability="read"))
    agent.tools.add(Tool("poke", "Write.", schema, run, mutability="write"))


async def test_hooks_run_after_the_calls_are_recorded_and_after_the_last_result(tmp_path):
    ws = make_workspace(
        tmp_path,
        [
            {"toolCalls": [{"name": "peek", "arguments": {"n": 1}}, {"name": "poke", "arguments": {"n": 2}}]},
            {"toolCalls": [{"name": "nowhere", "arguments": {}}]},
            {"text": "done"},
        ],
        plugins=[],
        config=NO_ASKING,
    )
    agent = ws.create_session()
    ran: list = []
    add_tools(agent, ran)
    seen: list = []

    async def before(step):
        # Both calls are in the log, neither has run yet.
        seen.append(("before", step.turn, step.step, step.calls, step.may_change_files, list(ran), types_of(agent)[-2:]))

    async def after(step):
        seen.append(("after", step.step, len(ran), types_of(agent)[-1]))

    agent.tool_steps.add_before(before)
    agent.tool_steps.add_after(after)
    assert await agent.prompt("go") == TurnEnd(1, "end-turn")
    assert seen == [
        ("before", 1, 1, (("peek", "read"), ("poke", "write")), True, [], ["tool/call", "tool/call"]),
        ("after", 1, 2, "tool/result"),
        # An unknown tool cannot run: it counts as read.
        ("before", 1, 2, (("nowhere", "read"),), False, [(1, 1), (1, 2)], ["request/header", "tool/call"]),
        ("after", 2, 2, "tool/result"),
    ]
    await ws.shutdown()


async def test_a_hook_that_raises_does_not_stop_the_step(tmp_path):
    ws = make_workspace(
        tmp_path, [{"toolCalls": [{"name": "poke", "arguments": {"n": 1}}]}, {"text": "done"}], plugins=[], config=NO_ASKING
    )
    agent = ws.create_session()
    ran: list = []
    add_tools(agent, ran)
    later: list = []

    async def broken(step):
        raise RuntimeError("snapshot failed")

    async def fine(step):
        later.append(step.step)

    agent.tool_steps.add_before(broken)
    agent.tool_steps.add_before(fine)
    remove = agent.tool_steps.add_after(broken)
    assert await agent.prompt("go") == TurnEnd(1, "end-turn")
    assert ran == [(1, 1)] and later == [1]  # the tool ran, and the next hook too
    remove()
    assert agent.tool_steps.after_hooks == []
    await ws.shutdown()


async def test_a_step_without_tool_calls_runs_no_hooks(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "just words"}], plugins=[])
    agent = ws.create_session()
    seen: list = []

    async def hook(step):
        seen.append(step)

    agent.tool_steps.add_before(hook)
    agent.tool_steps.add_after(hook)
    assert (await agent.prompt("hi")).stop_reason == "end-turn"
    assert seen == []
    await ws.shutdown()
