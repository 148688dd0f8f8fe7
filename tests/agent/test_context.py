"""Context: compaction (the estimate, the summary step, context/compact, the transcript
built from the last compaction on, /compact, failures) on real sessions, with a model
that answers summary requests as a real one would (tests/agent_support.ContextModel)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from agent_support import ContextModel, events_of, make_workspace, replay_strict, types_of, goals_of, plan_of

from dshd.agent import Tool, ToolOutcome, Workspace, load_config, transcript
from dshd.agent.compaction import (
    COMPACT_SECTION_ID,
    SUMMARY_SYSTEM,
    estimate_request,
    message_chars,
    render_history,
    summary_request,
    text_tokens,
    tools_chars,
)
from dshd.models import Message, ToolCallRequest, ToolSpec
from dshd.agent.transcript import SUMMARY_INTRO, Transcript, summary_message
from dshd.errors import DshError
from dshd.folds import ReplayError, replay
from dshd.agent.turn_end import TurnEnd

WINDOW = 2000  # tokens; compaction at 0.8 of it: 1600 tokens, about 6,400 characters
BIG = "x" * 1200  # a 300-token reply


def context_workspace(tmp_path, model, *, window=WINDOW, plugins=(), config=None) -> Workspace:
    overrides = dict(config or {})
    if window is not None:
        overrides.setdefault("model", {})["contextWindow"] = window
    ws = make_workspace(tmp_path, plugins=list(plugins), config=overrides)
    ws.model = model
    return ws


def request_tokens(request) -> int:
    """Characters/4 of everything a request sends (independent of the loop's estimate)."""
    chars = len(request.system) + sum(len(json.dumps([t.name, t.description, t.parameters])) for t in request.tools)
    for m in request.messages:
        chars += len(m.text) + sum(len(c.name) + len(json.dumps(c.arguments)) for c in m.tool_calls)
    return -(-chars // 4)


def compactions(agent):
    return events_of(agent, "context/compact")


def header_before(agent, event):
    return agent.store.events(after_seq=event.seq - 2, limit=1)[0]


async def compacted_session(tmp_path, turns):
    """A workspace whose agent ran ``turns`` prompts of 300-token replies (compacting)."""
    model = ContextModel(default=BIG)
    ws = context_workspace(tmp_path, model)
    agent = ws.create_session()
    await prompts(agent, turns)
    return model, ws, agent


async def prompts(agent, n, start=1):
    for k in range(start, start + n):
        result = await agent.prompt(f"prompt {k}")
        assert result.stop_reason == "end-turn", result


# ---- the estimate ----------------------------------------------------------------------


def test_estimate_is_characters_over_4_without_usage():
    history = Transcript()
    history.messages = [Message("user", "a" * 10), Message("assistant", "b" * 7, (ToolCallRequest("c1", "read", {"p": 1}),))]
    tools = (ToolSpec("read", "Read a file.", {"type": "object"}),)
    chars = 20 + tools_chars(tools) + 10 + 7 + len("read") + len('{"p": 1}')
    assert estimate_request("s" * 20, tools, history) == text_tokens(chars) == -(-chars // 4)
    assert text_tokens(0) == 0 and text_tokens(1) == 1 and text_tokens(8) == 2 and text_tokens(9) == 3


def test_estimate_is_last_usage_plus_new_text_since():
    history = Transcript()
    history.messages = [Message("user", "a" * 4000), Message("assistant", "b" * 400), Message("user", "c" * 41)]
    history.usage_index, history.usage_tokens = 1, 1234  # the reply at index 1 reported 1234 tokens in all
    # The system prompt, tools and everything up to that reply are in the reported figure.
    assert estimate_request("s" * 9999, (), history) == 1234 + text_tokens(41)


def test_message_chars_count_tool_call_arguments():
    call = ToolCallRequest("c1", "write_file", {"path": "a.py", "content": "é" * 3})
    assert message_chars(Message("assistant", "hi", (call,))) == 2 + len("write_file") + len(
        json.dumps(call.arguments, ensure_ascii=False)
    )


# ---- the summary request ----------------------------------------------------------------


def test_summary_request_has_its_own_prompt_no_tools_and_the_conversation_as_text():
    messages = [
        Message("user", "fix the parser"),
        Message("assistant", "looking", (ToolCallRequest("c1", "read_file", {"path": "p.py"}),)),
        Message("tool", "def parse(): ...", call_id="c1"),
    ]
    request = summary_request(messages, focus="the parser", words=300)
    assert request.system == SUMMARY_SYSTEM.format(words=300) and request.tools == ()
    (only,) = request.messages
    assert only.role == "user"
    for piece in ("[user]\nfix the parser", "[tool call c1: read_file]", '"path": "p.py"', "[tool result c1, ok]",
                  "pay special attention to: the parser"):
        assert piece in only.text
    assert "plan mode" in request.system and "word for word" in request.system


def test_render_history_fits_the_budget_cutting_long_items_then_the_oldest():
    messages = [summary_message("earlier summary " * 20)] + [Message("tool", f"{i}" * 5000, call_id=f"c{i}") for i in range(10)]
    whole = render_history(messages)
    assert len(whole) > 50_000
    clipped = render_history(messages, 20_000)
    assert len(clipped) <= 20_000 and "characters left out" in clipped and "[tool result c9, ok]" in clipped
    tight = render_history(messages, 3000)
    assert len(tight) <= 3000
    assert tight.startswith("[user]\n" + SUMMARY_INTRO)  # an earlier summary is kept
    assert "earlier items left out" in tight and "[tool result c9, ok]" in tight  # the newest stay


# ---- compaction in the loop ----------------------------------------------------------------


async def test_compacts_before_the_step_that_would_pass_compact_at(tmp_path):
    model, ws, agent = await compacted_session(tmp_path, 8)
    found = compactions(agent)
    assert found, "no compaction in 8 turns of 300 tokens with a 2000-token window"
    first = found[0]
    header = header_before(agent, first)
    assert type(header).__name__ == "RequestHeader" and header.turn == first.turn
    assert header.data.sections == [COMPACT_SECTION_ID] and header.data.tools == []
    assert first.data.tokensBefore > 0.8 * WINDOW > first.data.tokensAfter
    # The prompt that opened the turn stays word for word after the summary.
    kept = agent.store.events(after_seq=first.data.throughSeq, limit=1)[0]
    assert type(kept).__name__ == "UserMessage" and kept.turn == first.turn
    after = model.work()[first.turn - 1]  # the first work request after the compaction
    assert [m.role for m in after.messages] == ["user", "user"]
    assert after.messages[0].text == summary_message(model.summarize(None)).text
    assert after.messages[1].text == kept.data.text
    # The summary request saw the conversation before the kept prompt, and not the prompt.
    asked = model.summaries()[0].messages[0].text
    assert "prompt 1" in asked and kept.data.text not in asked
    for request in model.work():
        assert request_tokens(request) <= WINDOW
    for request in model.summaries():
        assert request_tokens(request) <= WINDOW
    assert replay_strict(agent.store.path).context.compact_seq == found[-1].seq
    await ws.shutdown()


async def test_several_compactions_then_reload_fork_and_restart_rebuild_the_same_transcript(tmp_path):
    model, ws, agent = await compacted_session(tmp_path, 24)
    assert len(compactions(agent)) >= 3
    live = agent.transcript()
    assert live[0].text.startswith(SUMMARY_INTRO)
    assert live == Transcript.from_events(agent.store.events()).messages  # from the whole log
    assert live == transcript.build(agent.store).messages  # from the last compaction on
    forked = ws.fork(agent.agent_id)
    assert forked.transcript() == live
    reloaded = ws.open_session(agent.session_id, reload=True)
    assert reloaded.transcript() == live
    await ws.shutdown()
    again = Workspace(tmp_path, load_config(tmp_path, {"plugins": [], "model": {"contextWindow": WINDOW}}))
    restarted = again.open_session(reloaded.session_id)
    assert restarted.transcript() == live
    # And the work goes on from there, compacting again when due.
    restarted.model = again.model = ContextModel(default=BIG)
    before = len(compactions(restarted))
    await prompts(restarted, 6, start=100)
    assert len(compactions(restarted)) > before
    await again.shutdown()


async def test_fork_before_a_compaction_has_the_uncompacted_transcript(tmp_path):
    model, ws, agent = await compacted_session(tmp_path, 8)
    first = compactions(agent)[0]
    forked = ws.fork(agent.agent_id, first.seq - 2)  # cut just before the compaction's header
    messages = forked.transcript()
    assert not any(m.text.startswith(SUMMARY_INTRO) for m in messages)
    assert messages == Transcript.from_events(agent.store.events(limit=first.seq - 2)).messages
    await ws.shutdown()


async def test_cold_path_reads_the_log_only_from_the_last_compaction(tmp_path):
    model, ws, agent = await compacted_session(tmp_path, 12)
    last = compactions(agent)[-1]
    expected = agent.transcript()
    sid, path = agent.session_id, agent.store.path
    await ws.shutdown()
    # Break a line far before the last compaction (same length: the checkpoint still matches).
    lines = path.read_bytes().splitlines(keepends=True)
    assert last.data.throughSeq > 5
    lines[3] = lines[3].replace(b'"type":', b'"type";', 1)
    path.write_bytes(b"".join(lines))
    again = Workspace(tmp_path, load_config(tmp_path, {"plugins": [], "model": {"contextWindow": WINDOW}}))
    opened = again.open_session(sid)
    assert opened.store.checkpoint_status == "used"
    assert opened.transcript() == expected  # built without reading line 4
    with pytest.raises(ReplayError) as info:
        opened.store.events()  # reading the whole history does see it
    assert info.value.line == 4
    await again.shutdown()


async def test_reported_usage_drives_the_estimate(tmp_path):
    # Short texts, but the provider counts far more tokens than characters/4 would (a
    # tokenizer that splits finely): the reported usage is what triggers the compaction.
    model = ContextModel(default="short", usage=lambda request: (1500 + 40 * len(request.messages), 10))
    ws = context_workspace(tmp_path, model)
    agent = ws.create_session()
    await prompts(agent, 3)
    assert len(model.summaries()) == 1
    compact = compactions(agent)[0]
    # Turn 2's reply reported 1500 + 40x3 + 10 tokens; turn 3's first step adds its prompt.
    usage = events_of(agent, "assistant/message")[1].data.usage
    assert (usage.inputTokens, usage.outputTokens) == (1620, 10)
    assert compact.data.tokensBefore == 1630 + text_tokens(len("prompt 3")) > 0.8 * WINDOW
    # After the compaction, the reported usage from before it no longer counts.
    assert compact.data.tokensAfter < 200
    await ws.shutdown()


async def test_no_context_window_means_no_automatic_compaction(tmp_path):
    model = ContextModel(default=BIG * 10)
    ws = context_workspace(tmp_path, model, window=None)
    agent = ws.create_session()
    await prompts(agent, 5)
    assert compactions(agent) == [] and model.summaries() == []
    await ws.shutdown()


async def test_compaction_steps_do_not_count_towards_max_steps(tmp_path):
    async def echo(ctx, arguments):
        return ToolOutcome.success("e" * 1200)

    call = {"text": "again", "toolCalls": [{"name": "echo", "arguments": {}}]}
    model = ContextModel([call] * 12, default="done")
    ws = context_workspace(tmp_path, model, config={"agent": {"maxSteps": 13}})
    agent = ws.create_session()
    agent.tools.add(Tool("echo", "Echo.", {"type": "object"}, echo))
    assert (await agent.prompt("work")).stop_reason == "end-turn"
    assert len(compactions(agent)) >= 2  # mid-turn, between tool batches
    headers = [e.data for e in events_of(agent, "request/header")]
    assert [h.step for h in headers] == list(range(1, len(headers) + 1))
    assert sum(h.sections != [COMPACT_SECTION_ID] for h in headers) == 13
    for event in compactions(agent):  # mid-turn: the last tool result is summarized, nothing kept
        assert event.data.throughSeq == event.seq - 2
    await ws.shutdown()


# ---- /compact ---------------------------------------------------------------------------------


async def test_compact_command_with_no_turn_running_is_a_turn_of_its_own(tmp_path):
    model = ContextModel(default="short reply")
    ws = context_workspace(tmp_path, model, window=None)
    agent = ws.create_session()
    with pytest.raises(DshError) as empty:
        await agent.prompt("/compact")
    assert empty.value.kind == "invalid-params" and empty.value.data == {"field": "text"}
    assert types_of(agent) == ["session/start"]
    await prompts(agent, 2)
    seq = agent.store.state.seq
    result = await agent.prompt("/compact keep the file names")
    assert result == TurnEnd(3, "compacted")
    assert types_of(agent, seq) == ["turn/open", "request/header", "context/compact", "turn/close"]
    opened, header, compact, closed = agent.store.events(after_seq=seq)
    assert opened.data.cause == "compact" and closed.data.stopReason == "compacted"
    assert header.data.sections == [COMPACT_SECTION_ID]
    assert compact.data.throughSeq == opened.seq  # the whole conversation
    assert "pay special attention to: keep the file names" in model.summaries()[0].messages[0].text
    assert agent.transcript() == [summary_message(compact.data.summary)]
    with pytest.raises(DshError) as again:
        await agent.prompt("/compact")  # nothing new since
    assert "nothing to compact" in again.value.message
    await agent.prompt("next")
    assert [m.text for m in model.work()[-1].messages] == [summary_message(compact.data.summary).text, "next"]
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()


async def test_compact_command_during_a_turn_compacts_before_its_next_step(tmp_path):
    release = asyncio.Event()

    async def wait(ctx, arguments):
        await release.wait()
        return ToolOutcome.success("waited")

    model = ContextModel([{"text": "starting", "toolCalls": [{"name": "wait", "arguments": {}}]}], default="finished")
    ws = context_workspace(tmp_path, model, window=None)
    agent = ws.create_session()
    agent.tools.add(Tool("wait", "Wait.", {"type": "object"}, wait))
    turn = asyncio.ensure_future(agent.prompt("go"))
    while not events_of(agent, "tool/call"):
        await asyncio.sleep(0.005)
    assert await agent.prompt("/compact") == TurnEnd(None, "command")
    release.set()
    assert (await turn).stop_reason == "end-turn"
    tail = types_of(agent, events_of(agent, "tool/call")[0].seq)
    assert tail == ["tool/result", "request/header", "context/compact", "request/header", "assistant/message", "turn/close"]
    compact = compactions(agent)[0]
    assert compact.data.throughSeq == compact.seq - 2  # the tool result was the last summarized
    assert model.work()[-1].messages == (summary_message(compact.data.summary),)
    await ws.shutdown()


# ---- failures -------------------------------------------------------------------------------


def _fail(request):
    from dshd.models import ModelError

    raise ModelError("connection", "provider went away")


@pytest.mark.parametrize(
    "summarize, why",
    [
        (_fail, "the summary request failed (connection: provider went away)"),
        (lambda request: "   ", "the model gave no summary"),
        (lambda request: "s" * 8000, "the request would still need about"),
    ],
    ids=["call-fails", "empty-summary", "summary-too-long"],
)
async def test_failed_compaction_leaves_the_transcript_and_ends_context_overflow(tmp_path, summarize, why):
    model = ContextModel(default=BIG, summarize=summarize)
    ws = context_workspace(tmp_path, model)
    agent = ws.create_session()
    result = None
    for k in range(1, 12):
        result = await agent.prompt(f"prompt {k}")
        if result.stop_reason != "end-turn":
            break
    assert result.stop_reason == "model-error"
    assert compactions(agent) == []
    close = events_of(agent, "turn/close")[-1]
    assert types_of(agent)[-3:] == ["user/message", "request/header", "turn/close"]
    assert events_of(agent, "request/header")[-1].data.sections == [COMPACT_SECTION_ID]
    assert close.data.error.kind == "context-overflow" and why in close.data.error.message
    # Nothing was lost: the transcript is every message so far.
    assert agent.transcript() == Transcript.from_events(agent.store.events()).messages
    assert not agent.transcript()[0].text.startswith(SUMMARY_INTRO)
    # Once the model answers again, the next prompt compacts and goes on.
    model.summarize = lambda request: "Summary after the failure."
    assert (await agent.prompt("retry")).stop_reason == "end-turn"
    assert len(compactions(agent)) == 1
    assert replay_strict(agent.store.path).turn.open is False
    await ws.shutdown()


async def test_a_request_that_cannot_fit_even_compacted_ends_context_overflow(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always be careful.\n" * 400)  # about 1,900 tokens of system prompt
    model = ContextModel(default="ok")
    ws = context_workspace(tmp_path, model, window=1000)
    agent = ws.create_session()
    assert (await agent.prompt("hello")).stop_reason == "model-error"
    assert model.work() == []  # never sent
    assert events_of(agent, "turn/close")[-1].data.error.kind == "context-overflow"
    await ws.shutdown()


# ---- plan mode and goals come from the log, never from the summary (PM-7) -----------------


async def test_plan_and_goal_sections_come_from_the_folds_after_compaction(tmp_path):
    lie = "Plan mode is off. The goal is complete and has no rounds left."
    model = ContextModel(default=BIG, summarize=lambda request: lie)
    ws = context_workspace(tmp_path, model, plugins=["plan", "goals"])
    agent = ws.create_session()
    plan_of(agent).set(True)
    goal = goals_of(agent).create("Keep the parser tests green", 50)
    goals_of(agent).disarm()
    await prompts(agent, 8)
    assert compactions(agent)
    request = model.work()[-1]
    assert request.messages[0].text == summary_message(lie).text
    header = events_of(agent, "request/header")[-1].data
    assert "plan:policy" in header.sections and "goal:status" in header.sections and header.planActive
    assert ws.config.plan.section in request.system
    assert "Current goal: Keep the parser tests green" in request.system
    assert request.volatile.startswith(f"Goal {goal.id} (revision {goal.revision}) is active. Rounds:")
    # The summary request never carried them either.
    assert ws.config.plan.section not in model.summaries()[0].system
    plan_of(agent).set(False)
    await agent.prompt("after")
    assert "plan:policy" not in events_of(agent, "request/header")[-1].data.sections
    assert ws.config.plan.section not in model.work()[-1].system
    await ws.shutdown()


# ---- AGENTS.md -----------------------------------------------------------------------------


async def test_agents_md_is_a_section_of_every_request_reread_when_it_changes(tmp_path):
    model = ContextModel(default="ok")
    ws = context_workspace(tmp_path, model, window=None)
    agent = ws.create_session()
    await agent.prompt("no file yet")
    assert "project:instructions" not in events_of(agent, "request/header")[-1].data.sections
    instructions = tmp_path / "AGENTS.md"
    instructions.write_text("Run ./run test before you say you are done.\n")
    for k in range(3):
        await agent.prompt(f"with file {k}")
        assert events_of(agent, "request/header")[-1].data.sections == ["project:instructions"]
        assert "Run ./run test before you say you are done." in model.work()[-1].system
    assert ws.instructions.reads == 1  # stat'ed per request, read once
    instructions.write_text("Use tabs.\n")
    os.utime(instructions, ns=(1, 1))  # even with an old mtime: size and ctime moved
    await agent.prompt("changed")
    assert "Use tabs." in model.work()[-1].system and "./run test" not in model.work()[-1].system
    instructions.unlink()
    await agent.prompt("gone")
    assert "project:instructions" not in events_of(agent, "request/header")[-1].data.sections
    instructions.mkdir()
    await agent.prompt("a directory")
    assert "project:instructions" not in events_of(agent, "request/header")[-1].data.sections
    await ws.shutdown()


async def test_agents_md_over_the_cap_is_cut_with_a_note(tmp_path):
    from dshd.agent.instructions import MAX_BYTES

    line = "- keep functions short and named for what they do\n"
    text = line * (MAX_BYTES // len(line) + 50)
    (tmp_path / "AGENTS.md").write_text(text)
    model = ContextModel(default="ok")
    ws = context_workspace(tmp_path, model, window=None)
    agent = ws.create_session()
    await agent.prompt("hello")
    system = model.work()[-1].system
    shown = system.split("Follow them:\n\n", 1)[1]
    assert f"[AGENTS.md is {len(text.encode())} bytes; only its first 32 KiB are shown here." in shown
    body = shown.split("\n\n[AGENTS.md is", 1)[0]
    assert len(body.encode()) <= MAX_BYTES and body.endswith("what they do")  # whole lines only
    await ws.shutdown()


# ---- transcript building, event by event ----------------------------------------------------


def test_transcript_is_the_last_summary_then_what_follows_its_through_seq_at_every_prefix(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from replay import generate_log

    from dshd.folds.events import ContextCompact, decode_line

    path = tmp_path / "log.jsonl"
    generate_log(path, 600, compact_every=3)
    events = [decode_line(line) for line in path.read_bytes().splitlines()]
    assert sum(isinstance(e, ContextCompact) for e in events) >= 10
    live = Transcript()
    for k, event in enumerate(events, 1):
        live.apply(event)
        prefix = events[:k]
        compacts = [e for e in prefix if isinstance(e, ContextCompact)]
        if compacts:
            last = compacts[-1]
            after = Transcript.from_events(e for e in prefix if e.seq > last.data.throughSeq and e is not last)
            expected = [summary_message(last.data.summary)] + after.messages
        else:
            expected = Transcript.from_events(prefix).messages
        assert live.messages == expected, k
