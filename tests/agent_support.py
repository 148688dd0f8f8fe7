"""Shared set-up for the agent, plan-mode and goal tests: a real Workspace on a tmp dir
with the scripted model (no mocks: the store, folds and log are the real ones)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from dshd.agent import InProcessAnswerer, Workspace, load_config
from dshd.folds import replay
from dshd.folds.events import EVENT_CLASSES

TAGS = {cls: tag for tag, cls in EVENT_CLASSES.items()}

PLAN = "# Plan: rename the module\n\n1. Move files\n2. Fix imports\n3. Run the tests\n"


def make_workspace(
    root: Path,
    replies: list[dict[str, Any]] | None = None,
    *,
    plugins: list[str] | None = None,
    answer=None,
    config: dict[str, Any] | None = None,
    approvals=None,
) -> Workspace:
    overrides: dict[str, Any] = dict(config or {})
    if replies is not None:
        (root / "script.json").write_text(json.dumps({"replies": replies}))
        overrides.setdefault("model", {})["script"] = "script.json"
    if plugins is not None:
        overrides["plugins"] = plugins
    questions = InProcessAnswerer(answer) if answer is not None else None
    return Workspace(root, load_config(root, overrides), questions=questions, approvals=approvals)


def plan_of(agent):
    """The agent's plan controller, as the doors find it (None: the plan plugin is off)."""
    from dshd.services.plan_mode import PlanModeController

    return agent.features.get(PlanModeController)


def goals_of(agent):
    """The agent's goal service, as the doors find it (None: the goals plugin is off)."""
    from dshd.services.goals import GoalService

    return agent.features.get(GoalService)


def types_of(agent, after_seq: int = 0) -> list[str]:
    return [TAGS[type(e)] for e in agent.store.events(after_seq)]


def events_of(agent, type_: str) -> list:
    return [e for e in agent.store.events() if TAGS[type(e)] == type_]


def log_path(agent) -> Path:
    return agent.store.path


def replay_strict(path: Path):
    """Full strict replay, checkpoint ignored: the log on disk is sound."""
    return replay(path, use_checkpoint=False).state


async def until(predicate, timeout: float = 10.0) -> None:
    """Wait for a condition instead of guessing a sleep (the machine is shared and slow)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def in_model_call(agent, step: int = 1) -> None:
    """Until the open turn's step ``step`` has its request/header (its model call runs)."""
    await until(lambda: agent.store.state.turn.open and agent.store.state.turn.step >= step)


async def settle(agent) -> None:
    """Until the continuation driver has stopped and no turn runs."""
    goals = agent.plugins.get("goals")
    driver = goals.driver if goals is not None else None
    while True:
        if driver is not None and driver.task is not None and not driver.task.done():
            await asyncio.wait({driver.task})
        await agent.wait_idle()
        if not agent.turn_running and (driver is None or driver.task is None or driver.task.done()):
            return


class ContextModel:
    """A model for the context tests that answers like a real one would: a summary request
    (the compaction system prompt, no tools) gets ``summarize(request)`` (raise to fail it);
    every other request gets the next of ``replies`` (dicts like a script's: text,
    toolCalls), then ``default`` once they are spent. Records every request it gets."""

    def __init__(self, replies=(), *, summarize=None, default: str = "ok", usage=None):
        self.replies = list(replies)
        self.usage = usage  # usage(request) -> (input, output) tokens reported for a work request
        self.summarize = summarize or (lambda request: "Summary: the person asked for things; they were done.")
        self.default = default
        self.requests = []

    @staticmethod
    def is_summary_request(request) -> bool:
        from dshd.agent.compaction import SUMMARY_SYSTEM

        return not request.tools and request.system.startswith(SUMMARY_SYSTEM[:40])

    def summaries(self):
        return [r for r in self.requests if self.is_summary_request(r)]

    def work(self):
        return [r for r in self.requests if not self.is_summary_request(r)]

    async def stream(self, request):
        from dshd.models import Stop, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage

        self.requests.append(request)
        if self.is_summary_request(request):
            text = self.summarize(request)
            yield TextDelta(text)
            yield Stop("end-turn")
            return
        reply = self.replies.pop(0) if self.replies else {"text": self.default}
        if reply.get("text"):
            yield TextDelta(reply["text"])
        calls = reply.get("toolCalls", [])
        for index, call in enumerate(calls):
            yield ToolCallStart(index, f"call-{len(self.requests)}-{index}", call["name"])
            yield ToolCallDelta(index, json.dumps(call.get("arguments", {})))
            yield ToolCallEnd(index)
        reported = Usage(*self.usage(request)) if self.usage is not None else Usage()
        yield Stop("tool-calls" if calls else "end-turn", reported)
