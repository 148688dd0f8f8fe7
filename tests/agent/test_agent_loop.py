"""The agent loop and the Workspace on real sessions with the scripted model."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from agent_support import in_model_call, events_of, make_workspace, replay_strict, types_of, goals_of, plan_of

from dshd.agent import Decision, Tool, ToolOutcome, is_session_id
from dshd.models import TextDelta
from dshd.errors import DshError
from dshd.agent.turn_end import TurnEnd


def add_echo(agent, calls=None):
    async def echo(ctx, arguments):
        if calls is not None:
            calls.append((ctx.turn, ctx.step, arguments))
        return ToolOutcome.success(f"echo {arguments.get('text', '')}")

    agent.tools.add(Tool("echo", "Echo text back.", {"type": "object", "properties": {"text": {"type": "string"}}}, echo))


def error_of(call) -> DshError:
    with pytest.raises(DshError) as caught:
        call()
    return caught.value


async def test_agent_turn_with_tool_calls(tmp_path):
    ws = make_workspace(
        tmp_path,
        [
            {"text": "let me look", "toolCalls": [{"name": "echo", "arguments": {"text": "a"}}, {"name": "echo", "arguments": {"text": "b"}}]},
            {"toolCalls": [{"name": "missing_tool", "arguments": {}}]},
            {"text": "all done"},
        ],
        plugins=[],
    )
    agent = ws.create_session("tools")
    calls = []
    add_echo(agent, calls)
    assert await agent.prompt("please echo") == TurnEnd(1, "end-turn")
    assert types_of(agent) == [
        "session/start", "turn/open", "user/message",
        "request/header", "assistant/message", "tool/call", "tool/call", "tool/result", "tool/result",
        "request/header", "tool/call", "tool/result",
        "request/header", "assistant/message", "turn/close",
    ]
    assert calls == [(1, 1, {"text": "a"}), (1, 1, {"text": "b"})]
    results = [e.data for e in events_of(agent, "tool/result")]
    assert [r.ok for r in results] == [True, True, False]
    assert "unknown tool 'missing_tool'" in results[2].content
    headers = [e.data for e in events_of(agent, "request/header")]
    assert [h.step for h in headers] == [1, 2, 3] and headers[0].tools == ["echo"]
    # The third request carries the whole transcript, tool results included.
    third = ws.model.requests[2]
    assert [m.role for m in third.messages] == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [c.name for c in third.messages[1].tool_calls] == ["echo", "echo"]
    assert [t.name for t in third.tools] == ["echo"]
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()


async def test_agent_runs_with_no_plugins(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "plain"}], plugins=[])
    agent = ws.create_session()
    assert plan_of(agent) is None and goals_of(agent) is None
    # Only the core's own: AGENTS.md's section and /compact.
    assert agent.tools.names() == [] and agent.sections.ids() == ["project:instructions"]
    assert agent.commands.names() == ["compact"]
    assert (await agent.prompt("hello")).stop_reason == "end-turn"
    await ws.shutdown()


async def test_agent_unknown_command_and_blank_text_are_invalid_params(tmp_path):
    ws = make_workspace(tmp_path, plugins=[])
    agent = ws.create_session()
    for text, field in (("/plan", "text"), ("", "text"), ("   ", "text")):
        with pytest.raises(DshError) as caught:
            await agent.prompt(text)
        assert caught.value.kind == "invalid-params" and caught.value.data["field"] == field
    assert types_of(agent) == ["session/start"]  # nothing written
    await ws.shutdown()


async def test_agent_prompt_while_a_turn_is_open_is_turn_open(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 200}], plugins=[])
    agent = ws.create_session()
    turn = asyncio.ensure_future(agent.prompt("one"))
    await in_model_call(agent)
    with pytest.raises(DshError) as caught:
        await agent.prompt("two")
    assert caught.value.kind == "turn-open"
    assert (await turn).stop_reason == "end-turn"
    await ws.shutdown()


async def test_agent_steer_queues_into_the_next_step_or_starts_a_turn(tmp_path):
    ws = make_workspace(
        tmp_path,
        [
            {"toolCalls": [{"name": "echo", "arguments": {}}], "delayMs": 150},
            {"text": "answer", "delayMs": 150},
            {"text": "answer to the late steer"},
            {"text": "steered turn"},
        ],
        plugins=[],
    )
    agent = ws.create_session()
    add_echo(agent)
    turn = asyncio.ensure_future(agent.prompt("start"))
    await in_model_call(agent, 1)
    assert agent.steer("also check the docs") is True
    await in_model_call(agent, 2)  # step 2 is now in its model call
    assert agent.steer("and the changelog") is True  # arrives during the last step
    assert await turn == TurnEnd(1, "end-turn")
    types = types_of(agent)
    headers = [i for i, t in enumerate(types) if t == "request/header"]
    assert len(headers) == 3  # the late steer got a step of its own
    assert types[headers[1] - 1] == "user/message" and types[headers[2] - 1] == "user/message"
    texts = [e.data.text for e in events_of(agent, "user/message")]
    assert texts == ["start", "also check the docs", "and the changelog"]
    # No turn running: steer starts one with cause "steer" and returns False.
    assert agent.steer("new topic") is False
    await agent.wait_idle()
    assert events_of(agent, "turn/open")[-1].data.cause == "steer"
    assert events_of(agent, "turn/close")[-1].data.stopReason == "end-turn"
    await ws.shutdown()


async def test_agent_cancel_mid_model_call_ends_cancelled_and_disarms(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "very slow", "delayMs": 10_000}])
    agent = ws.create_session()
    view = goals_of(agent).create("long job", 10)  # the driver starts round 1 at once
    while not agent.turn_running:
        await asyncio.sleep(0.01)
    await in_model_call(agent)  # inside the model call's delay
    loop = asyncio.get_running_loop()
    started = loop.time()
    await agent.cancel()
    assert loop.time() - started < 1  # the slow model call was cancelled, not awaited
    close = events_of(agent, "turn/close")[-1].data
    assert close.stopReason == "cancelled"
    goal = goals_of(agent).get()
    assert goal.activation == "disarmed" and goal.phase == "active" and goal.revision == view.revision
    await asyncio.sleep(0.05)
    assert len(events_of(agent, "turn/open")) == 1  # the driver did not start another round
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()


async def test_agent_cancel_during_tools_gives_every_call_a_result(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "hang", "arguments": {}}, {"name": "hang", "arguments": {}}]}], plugins=[])
    agent = ws.create_session()

    async def hang(ctx, arguments):
        await asyncio.Event().wait()

    agent.tools.add(Tool("hang", "never returns", {"type": "object"}, hang))
    turn = asyncio.ensure_future(agent.prompt("go"))
    while not events_of(agent, "tool/call"):
        await asyncio.sleep(0.01)
    await agent.cancel()
    assert (await turn).stop_reason == "cancelled"
    results = [e.data for e in events_of(agent, "tool/result")]
    assert len(results) == 2 and not any(r.ok for r in results)
    await ws.shutdown()


async def test_agent_rejected_step_is_retried_then_the_turn_closes_rejected(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "x"}], plugins=[], config={"agent": {"maxStepRetries": 2}})
    agent = ws.create_session()
    proposals = []

    def reject_all(proposal, rest):
        proposals.append((proposal.step, proposal.attempt))
        return Decision.reject("not now")

    agent.pre_step.add(reject_all)
    assert (await agent.prompt("go")).stop_reason == "rejected"
    assert proposals == [(1, 1), (1, 2), (1, 3)]
    assert "request/header" not in types_of(agent)
    await ws.shutdown()


async def test_agent_max_steps_closes_the_turn(tmp_path):
    loop_reply = {"toolCalls": [{"name": "echo", "arguments": {}}]}
    ws = make_workspace(tmp_path, [loop_reply] * 5, plugins=[], config={"agent": {"maxSteps": 3}})
    agent = ws.create_session()
    add_echo(agent)
    assert (await agent.prompt("go")).stop_reason == "max-steps"
    assert len(events_of(agent, "request/header")) == 3
    await ws.shutdown()


async def test_agent_model_error_closes_the_turn(tmp_path):
    class BrokenModel:
        async def stream(self, request):
            yield TextDelta("half")
            raise ConnectionError("provider went away")

    ws = make_workspace(tmp_path, plugins=[])
    ws.model = BrokenModel()
    agent = ws.create_session()
    agent.model = ws.model
    assert (await agent.prompt("go")).stop_reason == "model-error"
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()


# ---- sessions: ids, open, reload, close, fork, list ---------------------------------------------


async def test_workspace_session_ids_and_bad_ids(tmp_path):
    ws = make_workspace(tmp_path, plugins=[])
    agent = ws.create_session("first")
    assert is_session_id(agent.session_id) and agent.agent_id.startswith("a-")
    for bad in ("../x", "/etc", "", "S-01M8MCAEXT7RTHC32VVDNH1PD2", "s-01m8mcaext7rthc32vvdnh1pd2\n", None, 5):
        assert error_of(lambda bad=bad: ws.open_session(bad)).data == {"field": "sessionId"}
    missing = "s-01m8mcaext7rthc32vvdnh1pd2"
    assert error_of(lambda: ws.open_session(missing)).kind == "invalid-params"
    assert not (tmp_path / ".dsh" / "sessions" / missing).exists()
    await ws.shutdown()


async def test_workspace_open_returns_the_live_agent_and_reload_replaces_it(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "x"}])
    agent = ws.create_session()
    await agent.prompt("hello")
    assert ws.open_session(agent.session_id) is agent
    new = ws.open_session(agent.session_id, reload=True)
    assert new is not agent and new.agent_id != agent.agent_id and new.session_id == agent.session_id
    assert error_of(lambda: ws.agent(agent.agent_id)).kind == "stale-agent"
    assert error_of(lambda: ws.agent("a-0000")).kind == "unknown-agent"
    with pytest.raises(DshError) as caught:
        await agent.prompt("old handle")
    assert caught.value.kind == "stale-agent"
    assert ws.agent(new.agent_id) is new
    ws.close(new.agent_id)
    assert error_of(lambda: ws.agent(new.agent_id)).kind == "stale-agent"
    again = ws.open_session(agent.session_id)
    assert [e.data.text for e in events_of(again, "user/message")] == ["hello"]
    await ws.shutdown()


async def test_workspace_open_session_held_by_another_process_is_session_locked(tmp_path):
    first = make_workspace(tmp_path, plugins=[])
    agent = first.create_session()
    code = (
        "import sys; sys.path[:0] = ['tests']\n"
        "from agent_support import make_workspace\n"
        "from pathlib import Path\n"
        "from dshd.errors import DshError\n"
        f"ws = make_workspace(Path({str(tmp_path)!r}), plugins=[])\n"
        "try:\n"
        f"    ws.open_session({agent.session_id!r})\n"
        "except DshError as e:\n"
        "    print(e.kind, e.data.get('pid'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    kind, pid = out.stdout.split()
    assert kind == "session-locked" and int(pid) == os.getpid()
    await first.shutdown()


async def test_workspace_reload_mid_turn_closes_the_left_open_turn_as_interrupted(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "hang", "arguments": {}}]}], plugins=[])
    agent = ws.create_session()

    async def hang(ctx, arguments):
        await asyncio.Event().wait()

    agent.tools.add(Tool("hang", "never returns", {"type": "object"}, hang))
    turn = asyncio.ensure_future(agent.prompt("go"))
    while not events_of(agent, "tool/call"):
        await asyncio.sleep(0.01)
    new = ws.open_session(agent.session_id, reload=True)  # like a crash: the old process writes nothing more
    await asyncio.wait({turn})
    assert types_of(new)[-2:] == ["tool/result", "turn/close"]
    assert events_of(new, "turn/close")[-1].data.stopReason == "interrupted"
    assert events_of(new, "tool/result")[-1].data.ok is False
    assert replay_strict(new.store.path).turn.open is False
    await ws.shutdown()


async def test_left_open_batch_closes_its_calls_in_order_without_building_the_transcript(tmp_path):
    """A crash inside a tool batch of three calls (the first answered, the second running,
    the third not started): the load writes "not run" results for the second and third,
    in call order, reading only the batch (the model transcript is not built)."""
    calls = [{"name": "quick", "arguments": {}}, {"name": "hang", "arguments": {}}, {"name": "quick", "arguments": {}}]
    ws = make_workspace(tmp_path, [{"toolCalls": calls}], plugins=[])
    agent = ws.create_session()

    async def hang(ctx, arguments):
        await asyncio.Event().wait()

    async def quick(ctx, arguments):
        return ToolOutcome(True, "done")

    agent.tools.add(Tool("hang", "never returns", {"type": "object"}, hang))
    agent.tools.add(Tool("quick", "returns", {"type": "object"}, quick))
    turn = asyncio.ensure_future(agent.prompt("go"))
    while not events_of(agent, "tool/result"):
        await asyncio.sleep(0.01)
    call_ids = [e.data.callId for e in events_of(agent, "tool/call")]
    assert len(call_ids) == 3
    new = ws.open_session(agent.session_id, reload=True)
    await asyncio.wait({turn})
    assert new._transcript is None  # closing the turn read the batch, not the conversation
    results = events_of(new, "tool/result")
    assert [(r.data.callId, r.data.ok) for r in results] == [
        (call_ids[0], True), (call_ids[1], False), (call_ids[2], False)
    ]
    assert results[-1].data.content == "not run: turn interrupted"
    assert types_of(new)[-1] == "turn/close" and replay_strict(new.store.path).turn.open is False
    await ws.shutdown()


async def test_workspace_fork_is_a_prefix_and_closes_a_turn_cut_in_the_middle(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "one", "toolCalls": [{"name": "echo", "arguments": {}}]}, {"text": "two"}])
    agent = ws.create_session("parent")
    add_echo(agent)
    plan_of(agent).set(True)
    goal = goals_of(agent).create("g", 9)
    goals_of(agent).disarm()
    await agent.prompt("go")
    source = agent.store.events()
    cut = next(e.seq for e in source if type(e).__name__ == "ToolCall")  # inside turn 1
    forked = ws.fork(agent.agent_id, cut)
    copied = forked.store.events()
    start = copied[0].data
    assert start.forkedFrom.sessionId == agent.session_id and start.forkedFrom.seq == cut
    assert start.title == "parent"
    assert [type(e) for e in copied[1:cut]] == [type(e) for e in source[1:cut]]
    assert [e.data for e in copied[1:cut]] == [e.data for e in source[1:cut]]
    assert types_of(forked, cut) == ["tool/result", "turn/close"]
    assert events_of(forked, "turn/close")[-1].data.stopReason == "forked"
    assert plan_of(forked).get().active is True  # PM-7
    fv = goals_of(forked).get()
    assert (fv.id, fv.revision, fv.activation) == (goal.id, goal.revision, "disarmed")  # G-1
    assert replay_strict(forked.store.path).turn.open is False
    whole = ws.fork(agent.agent_id)
    assert len(whole.store.events()) == len(source)
    for bad in (0, len(source) + 1, "3", True):
        assert error_of(lambda bad=bad: ws.fork(agent.agent_id, bad)).data == {"field": "atSeq"}
    await ws.shutdown()


async def test_workspace_list_sessions(tmp_path):
    ws = make_workspace(tmp_path)
    a = ws.create_session("alpha")
    b = ws.create_session()
    view = goals_of(b).create("listed goal", 7)
    goals_of(b).disarm()
    ws.close(b.agent_id)  # listed from disk
    listed = {s.session_id: s for s in ws.list_sessions()}
    assert listed[a.session_id].title == "alpha" and listed[a.session_id].goal is None
    goal = listed[b.session_id].goal
    assert goal.id == view.id and goal.max_rounds == 7 and goal.activation == "disarmed"
    assert all(s.updated_at.endswith("Z") for s in listed.values())
    await ws.shutdown()


async def test_continuation_driver_spends_rounds_and_blocks_at_budget(tmp_path):
    replies = [{"toolCalls": [{"name": "echo", "arguments": {}}]}, {"text": "round 1 done"}, {"text": "round 2 done"}]
    ws = make_workspace(tmp_path, replies)
    agent = ws.create_session()
    add_echo(agent)
    view = goals_of(agent).create("iterate", 3)
    while goals_of(agent).get().phase == "active":
        await asyncio.sleep(0.01)
    await agent.wait_idle()
    opens = events_of(agent, "turn/open")
    assert [o.data.cause for o in opens] == ["continuation"] * 3
    rounds = [e.data.goalRound.round for e in events_of(agent, "user/message") if e.data.goalRound]
    assert rounds == [1, 2, 3]
    final = goals_of(agent).get()
    assert final.phase == "blocked" and final.blocked_reason.code == "round-budget-exhausted"
    assert final.rounds_started == 3 and final.revision == view.revision + 1
    assert types_of(agent)[-1] == "goal/change"  # blocked after the last turn closed
    await ws.shutdown()


async def test_agent_steer_that_no_step_took_is_still_recorded(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "echo", "arguments": {}}], "delayMs": 150}], plugins=[], config={"agent": {"maxSteps": 1}})
    agent = ws.create_session()
    add_echo(agent)
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    assert agent.steer("one more thing") is True
    assert (await turn).stop_reason == "max-steps"
    assert types_of(agent)[-2:] == ["user/message", "turn/close"]
    assert events_of(agent, "user/message")[-1].data.text == "one more thing"
    await ws.shutdown()


# ---- live deltas and model errors --------------------------------------------------------------


async def test_agent_deltas_follow_the_stream_and_errors_close_the_turn_with_their_kind(tmp_path):
    from dshd.models import ModelError, Retrying, Stop, ToolCallDelta, ToolCallEnd, ToolCallStart

    class FlakyModel:
        def __init__(self):
            self.calls = 0

        async def stream(self, request):
            self.calls += 1
            if self.calls == 1:
                yield Retrying(2, 5, ModelError("rate-limit", "slow down"))
                yield TextDelta("ok ")
                yield ToolCallStart(0, "c1", "nope")
                yield ToolCallDelta(0, '{"a"')
                yield ToolCallDelta(0, ": 1}")
                yield ToolCallEnd(0)
                yield Stop("tool-calls")
            else:
                yield TextDelta("half a rep")
                raise ModelError("connection", "the connection dropped mid-reply: check baseUrl")

    ws = make_workspace(tmp_path, plugins=[])
    agent = ws.create_session()
    agent.model = FlakyModel()
    deltas = []
    agent.add_delta_listener(deltas.append)
    assert (await agent.prompt("go")).stop_reason == "model-error"
    kinds = [(d.step, d.kind, d.text, d.call_id, d.name, d.attempt, d.delay_ms) for d in deltas]
    assert kinds == [
        (1, "retry", None, None, None, 2, 5),
        (1, "text", "ok ", None, None, None, None),
        (1, "tool-arguments", '{"a"', "c1", "nope", None, None),
        (1, "tool-arguments", ": 1}", "c1", "nope", None, None),
        (2, "text", "half a rep", None, None, None, None),
    ]
    close = events_of(agent, "turn/close")[-1]
    assert close.data.stopReason == "model-error"
    assert (close.data.error.kind, close.data.error.message) == ("connection", "the connection dropped mid-reply: check baseUrl")
    # Nothing of the broken step reached the log: its half reply is not an assistant/message.
    assert [e.data.text for e in events_of(agent, "assistant/message")] == ["ok "]
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()
