"""Shared set-up for the agent, plan-mode and goal tests: a real Workspace on a tmp dir
with the scripted model (no mocks: the store, folds and log are the real ones)."""

from __future__ import annotations

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
) -> Workspace:
    overrides: dict[str, Any] = dict(config or {})
    if replies is not None:
        (root / "script.json").write_text(json.dumps({"replies": replies}))
        overrides.setdefault("model", {})["script"] = "script.json"
    if plugins is not None:
        overrides["plugins"] = plugins
    questions = InProcessAnswerer(answer) if answer is not None else None
    return Workspace(root, load_config(root, overrides), questions=questions)


def types_of(agent, after_seq: int = 0) -> list[str]:
    return [TAGS[type(e)] for e in agent.store.events(after_seq)]


def events_of(agent, type_: str) -> list:
    return [e for e in agent.store.events() if TAGS[type(e)] == type_]


def log_path(agent) -> Path:
    return agent.store.path


def replay_strict(path: Path):
    """Full strict replay, checkpoint ignored: the log on disk is sound."""
    return replay(path, use_checkpoint=False).state
