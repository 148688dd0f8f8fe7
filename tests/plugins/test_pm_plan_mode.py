"""PM-1..PM-23: plan mode, proved on real sessions (SessionStore on tmp dirs, folds,
the scripted model, the in-process questions answerer)."""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_support import in_model_call, PLAN, TAGS, events_of, make_workspace, replay_strict, types_of, goals_of, plan_of

from dshd.agent import Decision, PromptContext, load_config
from dshd.models.scripted import ScriptedModel
from dshd.errors import DshError
from dshd.folds.events import PlanMode, RequestHeader, UserMessage
from dshd.services.plan_mode import PlanModeController, PlanView
from dshd.agent.turn_end import TurnEnd

POLICY = "PLAN FIRST. Do not edit files. (deployment text, verbatim)"


def approve(questions):
    return [{"id": questions[0]["id"], "choice": "approve"}]


def exit_call(plan=PLAN):
    return {"name": "exit_plan_mode", "arguments": {"plan": plan}}


def tool_results(agent):
    return [e.data for e in events_of(agent, "tool/result")]


# ---- PM-1: exactly a section, a tool, a command ---------------------------------------


async def test_pm_01_plugin_contributes_exactly_section_tool_command(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bare = make_workspace(tmp_path / "a", plugins=[])
    with_plan = make_workspace(tmp_path / "b", plugins=["plan"])
    a, b = bare.create_session(), with_plan.create_session()
    assert plan_of(a) is None and isinstance(plan_of(b), PlanModeController)
    # plan:approved (P-22): the approved plan once a compaction summarized it away.
    assert set(b.sections.ids()) - set(a.sections.ids()) == {"plan:policy", "plan:approved"}
    assert set(b.tools.names()) - set(a.tools.names()) == {"exit_plan_mode"}
    assert set(b.commands.names()) - set(a.commands.names()) == {"plan"}
    await bare.shutdown()
    await with_plan.shutdown()


# ---- PM-2: renders only while active, at order 50, verbatim ---------------------------------


async def test_pm_02_policy_renders_only_while_active_order_50_verbatim(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "a"}, {"text": "b"}], config={"plan": {"section": POLICY}})
    agent = ws.create_session()
    assert agent.sections.get("plan:policy").order == 50
    await agent.prompt("first")  # plan off
    plan_of(agent).set(True)
    await agent.prompt("second")  # plan on
    model: ScriptedModel = ws.model
    assert POLICY not in model.requests[0].system
    assert POLICY in model.requests[1].system  # verbatim
    headers = [e.data for e in events_of(agent, "request/header")]
    assert [h.sections for h in headers] == [[], ["plan:policy"]]
    # Sections are ordered by order: the goal's sections (60) come after the policy (50);
    # goal:status is volatile (G-24): its text is kept apart, for after the history.
    goals_of(agent).create("g")
    goals_of(agent).disarm()
    rendered = agent.sections.render(PromptContext(agent.store.state, 1, 1))
    assert rendered.section_ids == ("plan:policy", "goal:objective", "goal:status")
    assert rendered.system.index(POLICY) < rendered.system.index("Current goal")
    assert "Rounds:" not in rendered.system and rendered.volatile.startswith("Goal g-")
    await ws.shutdown()


# ---- PM-3: strict config -------------------------------------------------------------


@pytest.mark.parametrize(
    "plan_table, key",
    [
        ({}, "plan.section"),  # missing
        ({"section": "   \n"}, "plan.section"),  # blank
        ({"section": 42}, "plan.section"),  # not a string
        ({"section": True}, "plan.section"),
        ({"section": "ok", "mode": "strict"}, "plan.mode"),  # unknown key
    ],
)
def test_pm_03_plan_config_is_strict_and_names_the_key(tmp_path, plan_table, key):
    with pytest.raises(DshError) as caught:
        load_config(tmp_path, {"plan": plan_table})
    assert caught.value.kind == "invalid-config"
    assert caught.value.data["key"] == key


def test_pm_03_plan_config_from_toml_file_is_strict(tmp_path):
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / "config.toml").write_text('[plan]\nsectoin = "typo"\n')
    with pytest.raises(DshError) as caught:
        load_config(tmp_path)
    assert caught.value.data["key"] == "plan.sectoin"
    (tmp_path / ".dsh" / "config.toml").write_text('[plan]\nsection = "Plan well."\n')
    assert load_config(tmp_path).plan.section == "Plan well."


# ---- PM-4, PM-16: the catalogue never changes; PM-23: no shared mode registry ---------------


async def test_pm_04_and_pm_16_tool_catalogue_is_the_same_in_and_out_of_plan_mode(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "x"}, {"text": "y"}, {"text": "z"}])
    agent = ws.create_session()
    await agent.prompt("off")
    plan_of(agent).set(True)
    await agent.prompt("on")
    plan_of(agent).set(False)
    await agent.prompt("off again")
    headers = [e.data for e in events_of(agent, "request/header")]
    assert [h.planActive for h in headers] == [False, True, False]
    assert len({tuple(h.tools) for h in headers}) == 1
    assert "exit_plan_mode" in headers[0].tools
    await ws.shutdown()


def test_pm_23_plan_mode_shares_no_mode_registry():
    """The controller is a plain class of its own: no mode base class, no registry,
    and it imports nothing but the store's types."""
    import ast

    import dshd.services.plan_mode as plan_mode

    assert PlanModeController.__mro__ == (PlanModeController, object)
    tree = ast.parse(open(plan_mode.__file__).read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert {m for m in imported if m and m.startswith("dshd")} == {"dshd.errors", "dshd.services.store"}


# ---- PM-5, PM-6, PM-7 -----------------------------------------------------------------


async def test_pm_05_plan_mode_event_is_active_only_and_never_in_transcript(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "x"}])
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("go")
    line = next(l for l in agent.store.path.read_text().splitlines() if '"plan/mode"' in l)
    assert json.loads(line)["data"] == {"active": True}
    request = ws.model.requests[0]
    assert all("plan/mode" not in m.text and m.text != "True" for m in request.messages)
    assert [m.text for m in request.messages] == ["go"]
    await ws.shutdown()


async def test_pm_06_state_is_the_last_plan_mode_in_the_prefix(tmp_path):
    ws = make_workspace(tmp_path)
    agent = ws.create_session()
    assert plan_of(agent).get() == PlanView(False)  # no plan/mode: false
    plan_of(agent).set(True)
    plan_of(agent).set(False)
    plan_of(agent).set(True)
    assert replay_strict(agent.store.path).plan.active is True
    assert plan_of(agent).get().active is agent.store.state.plan.active is True
    # No second copy: the controller keeps no recorded state of its own.
    assert "active" not in vars(plan_of(agent))
    await ws.shutdown()


async def test_pm_07_resume_and_fork_get_plan_state_from_the_log(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "x"}])
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("go")
    forked = ws.fork(agent.agent_id)
    assert plan_of(forked).get() == PlanView(True)
    reopened = ws.open_session(agent.session_id, reload=True)
    assert plan_of(reopened).get() == PlanView(True)
    await ws.shutdown()
    # A fresh daemon (new Workspace) over the same files.
    again = make_workspace(tmp_path)
    assert plan_of(again.open_session(agent.session_id)).get() == PlanView(True)
    assert plan_of(again.open_session(forked.session_id)).get() == PlanView(True)
    await again.shutdown()


# ---- PM-8, PM-9, PM-13 ------------------------------------------------------------------


async def test_pm_08_set_outcomes_committed_queued_cancelled_noop(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 300}])
    agent = ws.create_session()
    plan = plan_of(agent)
    # No turn open: committed at once; again: noop.
    assert plan.set(True) == "committed"
    assert plan.set(True) == "noop"
    assert plan.get() == PlanView(True)
    turn = asyncio.ensure_future(agent.prompt("work"))
    await in_model_call(agent)  # the turn is open, its model call is running
    assert agent.store.state.turn.open
    assert plan.set(False) == "queued"
    assert plan.get() == PlanView(True, False)
    assert plan.set(False) == "noop"  # already pending to it
    assert plan.set(True) == "cancelled"  # opposite pending dropped; recorded is already True
    assert plan.get() == PlanView(True)
    assert plan.set(True) == "noop"
    await turn
    assert [e.data.active for e in events_of(agent, "plan/mode")] == [True]
    await ws.shutdown()


async def test_pm_09_get_is_recorded_state_plus_pending(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 200}])
    agent = ws.create_session()
    turn = asyncio.ensure_future(agent.prompt("work"))
    await in_model_call(agent)
    plan_of(agent).set(True)
    view = plan_of(agent).get()
    assert view == PlanView(active=False, pending=True)
    assert view == PlanView(active=False, pending=True)
    await turn
    # The turn ended with no further step: still pending, never appended by itself (PM-11).
    assert plan_of(agent).get() == PlanView(active=False, pending=True)
    assert events_of(agent, "plan/mode") == []
    await ws.shutdown()


async def test_pm_13_turn_open_comes_from_the_fold_not_a_task_flag(tmp_path):
    """After turn/close is committed (the fold says closed) the turn task may still be
    finishing; set must already commit, not queue."""
    ws = make_workspace(tmp_path, [{"text": "x"}], plugins=["plan"])
    agent = ws.create_session()
    outcomes = []

    def on_event(event):
        if TAGS[type(event)] == "turn/close":
            outcomes.append((agent.turn_running, plan_of(agent).set(True)))

    agent.add_event_listener(on_event)
    await agent.prompt("go")
    assert outcomes == [(True, "committed")]
    await ws.shutdown()


# ---- PM-10, PM-11, PM-12 ---------------------------------------------------------------


async def test_pm_10_pending_choice_is_appended_after_downstream_accepts_before_the_header(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "step 1", "toolCalls": [{"name": "noop", "arguments": {}}], "delayMs": 150}, {"text": "step 2"}])
    agent = ws.create_session()
    seen = []

    def downstream(proposal, rest):
        # Runs after the plan listener was entered but before it appends (it is first).
        seen.append((proposal.step, agent.store.state.plan.active))
        return rest(proposal)

    agent.pre_step.add(downstream)
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    assert plan_of(agent).set(True) == "queued"
    await turn
    types = types_of(agent)
    assert types.index("plan/mode") < [i for i, t in enumerate(types) if t == "request/header"][1]
    assert seen == [(1, False), (2, False)]  # downstream saw the old state both times
    headers = [e.data.planActive for e in events_of(agent, "request/header")]
    assert headers == [False, True]
    assert agent.pre_step._listeners[0] == plan_of(agent).pre_step  # placed first
    await ws.shutdown()


async def test_pm_11_prompt_time_choice_is_appended_by_the_turns_first_accepted_pre_step(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 150}, {"text": "next"}])
    agent = ws.create_session()
    first = asyncio.ensure_future(agent.prompt("one"))
    await in_model_call(agent)
    plan_of(agent).set(True)  # queued; turn 1 takes no further step
    await first
    count = len(agent.store.events())
    assert types_of(agent, count - 1) == ["turn/close"]  # the choice started nothing
    await agent.prompt("two")
    # plan/mode, then the narration (the last header said off: PM-14), then the header.
    assert types_of(agent, count) == [
        "turn/open", "user/message", "plan/mode", "user/message", "request/header", "assistant/message", "turn/close"
    ]
    assert events_of(agent, "request/header")[-1].data.planActive is True
    await ws.shutdown()


async def test_pm_12_rejection_keeps_the_choice_pending_and_the_turn_goes_on(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "toolCalls": [{"name": "noop", "arguments": {}}], "delayMs": 150}, {"text": "b"}])
    agent = ws.create_session()
    verdicts = iter([Decision.accept(), Decision.reject("busy"), Decision.accept()])
    agent.pre_step.add(lambda proposal, rest: next(verdicts))
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    plan_of(agent).set(True)
    result = await turn
    assert result.stop_reason == "end-turn"
    types = types_of(agent)
    # Step 2 was rejected once (no append), then accepted on retry (append, then header).
    assert types.count("plan/mode") == 1
    # plan/mode, its narration, header, assistant, close
    assert types[types.index("plan/mode") :] == [
        "plan/mode", "user/message", "request/header", "assistant/message", "turn/close"
    ]
    assert replay_strict(agent.store.path).plan.active is True
    await ws.shutdown()


async def test_pm_12_failed_append_keeps_the_choice_pending_and_leaves_no_half_state(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "a", "toolCalls": [{"name": "noop", "arguments": {}}], "delayMs": 150}, {"text": "b", "toolCalls": [{"name": "noop", "arguments": {}}]}, {"text": "c"}])
    agent = ws.create_session()
    real_commit = agent.store.commit
    failures = []

    def failing_once(type_, data, **kw):
        if type_ == "plan/mode" and not failures:
            failures.append(type_)
            raise OSError("disk full")
        return real_commit(type_, data, **kw)

    agent.store.commit = failing_once
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    plan_of(agent).set(True)
    assert (await turn).stop_reason == "end-turn"
    assert failures == ["plan/mode"]
    headers = [e.data.planActive for e in events_of(agent, "request/header")]
    assert headers == [False, False, True]  # step 2 ran with the old state, step 3 with the new
    assert plan_of(agent).get() == PlanView(True)
    assert replay_strict(agent.store.path).plan.active is True
    await ws.shutdown()


# ---- PM-14: narration ---------------------------------------------------------------------


async def test_pm_14_narration_only_when_the_last_header_described_the_other_state(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "a"}, {"text": "b"}, {"text": "c"}])
    agent = ws.create_session()
    plan_of(agent).set(True)  # no header yet: nothing to correct, no narration
    assert events_of(agent, "user/message") == []
    await agent.prompt("one")  # header says planActive True
    plan_of(agent).set(False)  # header said True: narrate
    plan_of(agent).set(True)  # last header still said True: no narration
    await agent.prompt("two")
    plugin_messages = [e.data for e in events_of(agent, "user/message") if e.data.source == "plugin"]
    assert len(plugin_messages) == 1
    assert plugin_messages[0].plugin == "plan" and "off" in plugin_messages[0].text
    await ws.shutdown()


# ---- PM-15: pending lives in the process only ---------------------------------------------


async def test_pm_15_pending_choice_is_lost_when_the_process_lets_go(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 150}])
    agent = ws.create_session()
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    plan_of(agent).set(True)
    await turn
    assert plan_of(agent).get() == PlanView(False, True)
    reopened = ws.open_session(agent.session_id, reload=True)
    assert plan_of(reopened).get() == PlanView(False)  # the choice did not survive
    await ws.shutdown()


# ---- PM-16..PM-21: exit_plan_mode ---------------------------------------------------------


async def test_pm_16_exit_plan_mode_fails_while_plan_mode_is_off(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}], answer=approve)
    agent = ws.create_session()
    await agent.prompt("go")
    (result,) = tool_results(agent)
    assert result.ok is False and "off" in result.content
    assert ws.questions.asked == []
    await ws.shutdown()


@pytest.mark.parametrize("plan", ["Plan: no heading\n# later", "", "   ", "#no-space heading", "- a list"])
async def test_pm_17_exit_needs_markdown_plan_with_a_heading_first(tmp_path, plan):
    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call(plan)]}], answer=approve)
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("go")
    (result,) = tool_results(agent)
    assert result.ok is False and "plan" in result.content.lower()
    assert ws.questions.asked == []
    assert plan_of(agent).get() == PlanView(True)
    await ws.shutdown()


async def test_pm_18_one_clean_approval_exits_silently_at_the_next_pre_step(tmp_path):
    ws = make_workspace(
        tmp_path,
        [{"toolCalls": [exit_call(), {"name": "probe", "arguments": {}}]}, {"text": "working"}],
        answer=approve,
    )
    agent = ws.create_session()
    during_batch = []
    from dshd.agent import Tool, ToolOutcome

    async def probe(ctx, args):
        during_batch.append(agent.store.state.plan.active)
        return ToolOutcome.success("ok")

    agent.tools.add(Tool("probe", "test probe", {"type": "object"}, probe))
    plan_of(agent).set(True)
    await agent.prompt("plan it")
    (question,) = ws.questions.asked[0]
    assert question["kind"] == "plan-review" and question["plan"] == PLAN
    assert question["choices"] == ["approve", "revise"] and question["title"] == "Plan: rename the module"
    first, second = tool_results(agent)
    assert first.ok and json.loads(first.content) == {"approved": True}
    assert during_batch == [True]  # the rest of the batch ran under plan guidance
    assert [e.data.planActive for e in events_of(agent, "request/header")] == [True, False]
    assert not [e for e in events_of(agent, "user/message") if e.data.source == "plugin"]  # silent
    types = types_of(agent)
    assert types.index("plan/mode", types.index("tool/result")) < len(types) - 3
    await ws.shutdown()


async def test_pm_19_keep_planning_returns_feedback_with_line_comments(tmp_path):
    def revise(questions):
        return [
            {
                "id": questions[0]["id"],
                "choice": "revise",
                "feedback": "Split step 2.",
                "comments": [{"line": 4, "text": "which imports?"}],
            }
        ]

    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}], answer=revise)
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("plan it")
    (result,) = tool_results(agent)
    assert result.ok is False
    assert "Split step 2." in result.content
    assert "Line 4: 2. Fix imports" in result.content and "which imports?" in result.content
    assert plan_of(agent).get() == PlanView(True)
    await ws.shutdown()


@pytest.mark.parametrize(
    "answers",
    [
        [],
        None,
        "approve",
        [{"choice": "approve"}, {"choice": "approve"}],
        [{"choice": "maybe"}],
        [{"choice": "approve", "extra": 1}],
        [{"choice": "approve", "feedback": "but also fix X"}],
        [{"choice": "revise", "comments": [{"line": "4", "text": "x"}]}],
        [{"id": "another-question", "choice": "approve"}],
    ],
)
async def test_pm_19_anything_but_one_clean_approval_keeps_plan_mode(tmp_path, answers):
    def answer(questions):
        if isinstance(answers, list):
            return [dict(a, id=a.get("id", questions[0]["id"])) for a in answers]
        return answers

    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}, {"text": "x"}], answer=answer)
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("plan it")
    (result,) = tool_results(agent)
    assert result.ok is False and "Plan mode stays on" in result.content
    assert plan_of(agent).get() == PlanView(True)
    assert events_of(agent, "plan/mode")[-1].data.active is True
    await ws.shutdown()


async def test_pm_20_no_channel_timeout_or_unload_fails_closed(tmp_path):
    from dshd.agent import QuestionsUnavailable

    # No channel at all (the default seam).
    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}])
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("plan it")
    (result,) = tool_results(agent)
    assert result.ok is False and "/plan off" in result.content
    await ws.shutdown()

    for error in (QuestionsUnavailable("client gone"), TimeoutError()):
        root = tmp_path / type(error).__name__
        root.mkdir()

        def fail(questions, error=error):
            raise error

        ws = make_workspace(root, [{"toolCalls": [exit_call()]}], answer=fail)
        agent = ws.create_session()
        plan_of(agent).set(True)
        await agent.prompt("plan it")
        (result,) = tool_results(agent)
        assert result.ok is False and "stays on" in result.content
        assert plan_of(agent).get() == PlanView(True)
        await ws.shutdown()


async def test_pm_20_plugin_unloaded_during_review_fails_closed(tmp_path):
    gate = asyncio.Event()

    async def slow_approve(questions):
        await gate.wait()
        return approve(questions)

    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}], answer=slow_approve)
    agent = ws.create_session()
    plan_of(agent).set(True)
    turn = asyncio.ensure_future(agent.prompt("plan it"))
    while not ws.questions.asked:
        await asyncio.sleep(0.01)
    agent.plugins["plan"].detach()  # what closing the agent does to the plugin
    gate.set()
    await turn
    (result,) = tool_results(agent)
    assert result.ok is False and "unloaded" in result.content
    assert agent.store.state.plan.active is True
    with pytest.raises(DshError) as caught:
        plan_of(agent).get()  # a detached controller answers nothing
    assert caught.value.kind == "stale-agent"
    await ws.shutdown()


async def test_pm_20_cancel_during_review_withdraws_the_question_and_fails_closed(tmp_path):
    never = asyncio.Event()

    async def wait_forever(questions):
        await never.wait()

    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}], answer=wait_forever)
    agent = ws.create_session()
    plan_of(agent).set(True)
    turn = asyncio.ensure_future(agent.prompt("plan it"))
    while not ws.questions.asked:
        await asyncio.sleep(0.01)
    await agent.cancel()
    assert (await turn).stop_reason == "cancelled"
    (result,) = tool_results(agent)
    assert result.ok is False
    assert plan_of(agent).get() == PlanView(True)
    await ws.shutdown()


async def test_pm_21_plan_is_kept_only_as_the_tool_call_argument(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}, {"text": "ok"}], answer=approve)
    agent = ws.create_session()
    plan_of(agent).set(True)
    await agent.prompt("plan it")
    lines_with_plan = [l for l in agent.store.path.read_text().splitlines() if "rename the module" in l]
    assert len(lines_with_plan) == 1 and json.loads(lines_with_plan[0])["type"] == "tool/call"
    session_files = {p.name for p in agent.store.path.parent.iterdir()}
    assert session_files <= {"log.jsonl", "log.lock", "projection.json"}
    assert not list(tmp_path.rglob("*plan*.md"))
    await ws.shutdown()


# ---- PM-22: /plan -------------------------------------------------------------------


async def test_pm_22_plan_command_on_off_and_with_message(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "planning"}])
    agent = ws.create_session()
    assert await agent.prompt("/plan") == TurnEnd(None, "command")
    assert plan_of(agent).get() == PlanView(True)
    assert await agent.prompt("/plan off") == TurnEnd(None, "command")
    assert plan_of(agent).get() == PlanView(False)
    result = await agent.prompt("/plan look at the parser first")
    assert result == TurnEnd(1, "end-turn")
    messages = [e for e in events_of(agent, "user/message")]
    assert messages[-1].data.text == "look at the parser first" and messages[-1].data.source == "user"
    assert events_of(agent, "turn/open")[-1].data.cause == "steer"
    assert events_of(agent, "request/header")[-1].data.planActive is True
    await ws.shutdown()


async def test_pm_22_plan_off_drops_a_pending_entry_not_yet_appended(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 200}])
    agent = ws.create_session()
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    await agent.prompt("/plan")
    assert plan_of(agent).get() == PlanView(False, True)
    await agent.prompt("/plan off")
    assert plan_of(agent).get() == PlanView(False)
    await turn
    assert events_of(agent, "plan/mode") == []
    await ws.shutdown()


async def test_pm_22_plan_message_during_a_turn_is_steered_into_the_next_step(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "delayMs": 150}, {"text": "planned"}])
    agent = ws.create_session()
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    assert await agent.prompt("/plan think about tests") == TurnEnd(None, "command")
    await turn
    types = types_of(agent)
    tail = types[types.index("assistant/message") + 1 :]
    # plan/mode, its narration (PM-14), the steered message, then the request.
    assert tail == ["plan/mode", "user/message", "user/message", "request/header", "assistant/message", "turn/close"]
    narration, steered = [e.data for e in events_of(agent, "user/message")][-2:]
    assert narration.source == "plugin" and steered == type(steered)(text="think about tests", source="user")
    await ws.shutdown()


# ---- listeners --------------------------------------------------------------------


async def test_plan_listeners_get_a_view_on_every_change(tmp_path):
    ws = make_workspace(tmp_path, [{"text": "slow", "toolCalls": [{"name": "noop", "arguments": {}}], "delayMs": 150}, {"text": "x"}])
    agent = ws.create_session()
    views = []
    plan_of(agent).add_listener(views.append)
    plan_of(agent).set(True)  # committed
    plan_of(agent).set(True)  # noop: no notice
    turn = asyncio.ensure_future(agent.prompt("go"))
    await in_model_call(agent)
    plan_of(agent).set(False)  # queued
    await turn  # appended at step 2
    assert views == [PlanView(True), PlanView(True, False), PlanView(False)]
    await ws.shutdown()


def test_every_pm_and_g_requirement_has_a_named_test():
    """An index check: a reader finds PM-n as test_pm_NN_* and G-n as test_gNN_*."""
    import re
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    names = set()
    # Plan mode's tests sit with the plugin (tests/plugins), the goal service's with the
    # services (tests/services).
    for path in list((tests / "plugins").glob("test_pm_*.py")) + list((tests / "services").glob("test_goal_*.py")):
        names |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.MULTILINE))
    missing_pm = [n for n in range(1, 24) if not any(f"_pm_{n:02d}_" in t for t in names)]
    missing_g = [n for n in range(1, 13) if not any(t.startswith(f"test_g{n:02d}_") for t in names)]
    assert (missing_pm, missing_g) == ([], [])
