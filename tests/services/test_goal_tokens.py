"""Token usage and token budgets, on real sessions (SessionStore on tmp dirs, the strict
folds, the scripted model reporting usage): usage reaches the log, counts toward the goal
only in its round turns, and a round that ends at or over ``maxTokens`` blocks the goal
with ``token-budget-exhausted``."""

from __future__ import annotations

import pytest
from agent_support import events_of, make_workspace, replay_strict, settle, goals_of

from dshd.daemon.to_wire import goal_view
from dshd.errors import DshError
from dshd.services.goals import GoalNotice


def usage(inp: int, out: int) -> dict:
    return {"inputTokens": inp, "outputTokens": out}


def kind_of(call) -> DshError:
    with pytest.raises(DshError) as caught:
        call()
    return caught.value


async def test_reported_usage_is_written_on_the_assistant_message(tmp_path):
    replies = [
        {"toolCalls": [{"name": "nothing", "arguments": {}}], "usage": usage(50, 7)},  # tool calls only
        {"text": "done", "usage": usage(80, 12)},
        {"text": "no usage reported"},
    ]
    ws = make_workspace(tmp_path, replies)
    agent = ws.create_session()
    await agent.prompt("go")
    await agent.prompt("again")
    messages = [(e.turn, e.data.text, e.data.usage) for e in events_of(agent, "assistant/message")]
    assert [(t, text) for t, text, _ in messages] == [(1, ""), (1, "done"), (2, "no usage reported")]
    assert [(u.inputTokens, u.outputTokens) if u else None for _, _, u in messages] == [(50, 7), (80, 12), None]
    # The usage-only message comes before the step's tool call, and the model's transcript
    # still reads as one assistant message carrying the call.
    first_call = events_of(agent, "tool/call")[0]
    assert events_of(agent, "assistant/message")[0].seq < first_call.seq
    assert [m.role for m in agent.transcript()][:3] == ["user", "assistant", "tool"]
    assert '"inputTokens"' not in agent.store.path.read_text().splitlines()[-2]  # turn 2's reply
    await ws.shutdown()


async def test_rounds_spend_tokens_and_a_round_over_the_budget_blocks_the_goal(tmp_path):
    replies = [{"text": f"round {n}", "usage": usage(100, 20)} for n in range(1, 4)]
    replies.append({"text": "a person's answer", "usage": usage(5000, 500)})
    ws = make_workspace(tmp_path, replies, config={"goals": {"maxTokens": 250}})
    agent = ws.create_session()
    notices: list[GoalNotice] = []
    goals_of(agent).add_listener(notices.append)
    created = goals_of(agent).create("o")
    assert (created.max_tokens, created.tokens_used) == (250, 0)
    await settle(agent)
    view = goals_of(agent).get()
    # 120 after round 1, 240 after round 2 (still under 250), 360 after round 3: blocked.
    assert (view.phase, view.rounds_started, view.tokens_used) == ("blocked", 3, 360)
    assert view.blocked_reason.code == "token-budget-exhausted"
    assert "360" in view.blocked_reason.message and "250" in view.blocked_reason.message
    assert [n.view.tokens_used for n in notices if n.op == "usage"] == [120, 240, 360]
    await agent.prompt("a person's own question")
    assert goals_of(agent).get().tokens_used == 360  # a person's turn spends no goal tokens
    folded = replay_strict(agent.store.path).goal
    assert (folded.tokens_used, folded.goal.maxTokens) == (360, 250)
    block = [e.data for e in events_of(agent, "goal/change") if e.data.op == "block"][-1]
    assert block.tokensUsed == 360
    await ws.shutdown()


async def test_create_and_edit_take_max_tokens_and_resume_needs_tokens_left(tmp_path):
    replies = [{"text": "r", "usage": usage(60, 40)}] * 3
    ws = make_workspace(tmp_path, replies)
    agent = ws.create_session()
    for bad in (0, -5, True, "100", 1.5):
        assert kind_of(lambda: goals_of(agent).create("o", max_tokens=bad)).data["field"] == "maxTokens"
    assert goals_of(agent).get() is None
    created = goals_of(agent).create("o", max_tokens=100)
    await settle(agent)  # round 1 uses 100 tokens: the budget is spent
    view = goals_of(agent).get()
    assert (view.phase, view.tokens_used, view.blocked_reason.code) == ("blocked", 100, "token-budget-exhausted")
    assert view.revision == created.revision + 1
    error = kind_of(lambda: goals_of(agent).resume(view.ref))
    assert error.kind == "budget-exhausted" and error.data == {"tokensUsed": 100, "maxTokens": 100}
    assert kind_of(lambda: goals_of(agent).edit(view.ref, max_tokens=100)).data["field"] == "maxTokens"
    edited = goals_of(agent).edit(view.ref, max_tokens=150)
    assert (edited.max_tokens, edited.phase) == (150, "blocked")
    goals_of(agent).resume(edited.ref)
    await settle(agent)  # round 2: 200 of 150
    view = goals_of(agent).get()
    assert (view.rounds_started, view.tokens_used, view.phase) == (2, 200, "blocked")
    await ws.shutdown()


async def test_a_goal_without_a_budget_shows_tokens_but_never_blocks_on_them(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "r", "usage": usage(10**6, 10**6)}] * 2)
    agent = ws.create_session()
    created = goals_of(agent).create("o", max_rounds=2)
    assert created.max_tokens is None and "maxTokens" not in goal_view(created)  # the LSP door's converter
    await settle(agent)
    view = goals_of(agent).get()
    assert (view.tokens_used, view.blocked_reason.code) == (4 * 10**6, "round-budget-exhausted")
    await ws.shutdown()


@pytest.mark.slow
async def test_the_goal_section_shows_the_token_budget(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "r", "usage": usage(30, 3)}])
    agent = ws.create_session()
    goals_of(agent).create("o", max_tokens=1000)
    await settle(agent)
    plugin = agent.plugins["goals"]
    from dshd.agent.prompt import PromptContext

    text = plugin.render_status(PromptContext(state=agent.store.state, turn=2, step=1))
    assert "Tokens: 33 of 1000 used by the rounds." in text
    await ws.shutdown()
