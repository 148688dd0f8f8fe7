"""A plan review's outcome is data on the ``exit_plan_mode`` result (``review``), and the
chat reads that data, never the text written for the model; logs written before the
field still show as they did (the chat reads the text's opening only for them)."""

from __future__ import annotations

import msgspec
import pytest

from agent_support import PLAN, events_of, make_workspace, plan_of, replay_strict
from dshd.api.chat import ChatProjection, PlanReviewItem
from dshd.plugins import plan as plan_plugin
from dshd.services.plan_mode import PlanView


def exit_call(plan=PLAN):
    return {"name": "exit_plan_mode", "arguments": {"plan": plan}}


def answering(**answer):
    return lambda questions: [dict(answer, id=questions[0]["id"])]


async def reviewed_log(tmp_path, answer, *, plan_on=True):
    """The events (as plain dicts) of one session whose model presents PLAN once."""
    ws = make_workspace(tmp_path, [{"toolCalls": [exit_call()]}, {"text": "ok"}], answer=answer)
    agent = ws.create_session()
    if plan_on:
        plan_of(agent).set(True)
    await agent.prompt("plan it")
    events = [msgspec.to_builtins(e) for e in agent.store.events()]
    active = plan_of(agent).get()
    replay_strict(agent.store.path)  # the field is part of the strict format
    await ws.shutdown()
    return events, active


def review_item(events) -> PlanReviewItem:
    projection = ChatProjection()
    for event in events:
        projection.apply_event(event)
    (item,) = [i for i in projection.items() if isinstance(i, PlanReviewItem)]
    return item


def result_of(events) -> dict:
    (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
    return result


@pytest.mark.parametrize(
    "answer, plan_on, review, still_planning",
    [
        (answering(choice="approve"), True, {"outcome": "approved"}, False),
        (
            answering(choice="revise", feedback="Split step 2.", comments=[{"line": 4, "text": "which imports?"}]),
            True,
            {"outcome": "revise", "feedback": "Split step 2.", "comments": [{"line": 4, "text": "which imports?"}]},
            True,
        ),
        (answering(choice="revise"), True, {"outcome": "revise"}, True),
        # An approval with feedback is no clean approval: plan mode stays on (a send-back).
        (answering(choice="approve", feedback="but also fix X"), True, {"outcome": "revise", "feedback": "but also fix X"}, True),
        (answering(choice="maybe"), True, {"outcome": "failed"}, True),
        (lambda questions: None, True, {"outcome": "failed"}, True),
        (answering(choice="approve"), False, {"outcome": "failed"}, False),  # plan mode off: nothing to review
    ],
)
async def test_p20_every_exit_plan_mode_result_records_its_review(tmp_path, answer, plan_on, review, still_planning):
    events, active = await reviewed_log(tmp_path, answer, plan_on=plan_on)
    result = result_of(events)
    assert result["review"] == review
    assert result["ok"] is (review["outcome"] == "approved")
    assert active == PlanView(still_planning)


async def test_p20_tools_that_ask_no_one_record_no_review(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [{"name": "list_files", "arguments": {}}]}, {"text": "ok"}])
    agent = ws.create_session()
    await agent.prompt("look")
    (result,) = [e.data for e in events_of(agent, "tool/result")]
    assert result.ok and result.review is None
    assert "review" not in msgspec.to_builtins(result)  # absent, not null, in the log
    await ws.shutdown()


async def test_p20_the_chat_takes_the_outcome_from_the_data_not_the_prose(tmp_path):
    answer = answering(choice="revise", feedback="Split step 2.", comments=[{"line": 4, "text": "which imports?"}])
    events, _ = await reviewed_log(tmp_path, answer)
    item = review_item(events)
    assert item.outcome == "sent-back"
    assert item.feedback == "Feedback: Split step 2.\nLine 4: 2. Fix imports\n  Comment: which imports?"

    # The text for the model reworded: the chat shows the same.
    result = result_of(events)
    result["content"] = "Please think again (wording changed in a later release)."
    assert (review_item(events).outcome, review_item(events).feedback) == (item.outcome, item.feedback)

    # Prose that reads as a send-back does not override the recorded outcome.
    result["content"] = plan_plugin.SENT_BACK + "\nFeedback: no\n" + plan_plugin.STILL_PLANNING
    result["review"] = {"outcome": "failed"}
    failed = review_item(events)
    assert failed.outcome == "not-reviewed" and failed.feedback is None and failed.detail == result["content"]


@pytest.mark.parametrize(
    "answer",
    [
        answering(choice="approve"),
        answering(choice="revise", feedback="Split step 2.", comments=[{"line": 4, "text": "which imports?"}]),
        answering(choice="revise"),
        answering(choice="approve", comments=[{"line": 99, "text": "no such line"}]),
        answering(choice="maybe"),
    ],
)
async def test_p20_a_log_written_before_review_data_shows_as_it_did(tmp_path, answer):
    events, _ = await reviewed_log(tmp_path, answer)
    from_data = review_item(events)
    del result_of(events)["review"]  # as an older dshd wrote it
    from_text = review_item(events)
    assert (from_text.outcome, from_text.feedback, from_text.detail) == (
        from_data.outcome,
        from_data.feedback,
        from_data.detail,
    )
