"""Plugins offer what the doors need through one registry (``agent.features``), not
attributes on the Agent: no module of the daemon reaches for ``<agent>.plan`` or
``<agent>.goals``, and an agent without the plugins offers nothing (the doors handle it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent_support import make_workspace
from dshd.agent.features import Features
from dshd.services.goals import GoalService
from dshd.services.plan_mode import PlanModeController

SERVER = Path(__file__).resolve().parents[2] / "server" / "dshd"
FEATURE_ATTRIBUTES = {"plan", "goals"}


def agent_attribute_uses(source: str) -> list[str]:
    """``agent.plan``, ``self.agent.goals``, ``self.goals = ...`` in the Agent, and the like:
    a feature read (or set) as an attribute of something that is an agent."""
    tree = ast.parse(source)
    in_agent = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == "Agent" for n in ast.walk(c)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FEATURE_ATTRIBUTES:
            owner = ast.unparse(node.value)
            if owner.split(".")[-1].endswith("agent") or (owner == "self" and id(node) in in_agent):
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


def test_the_probe_finds_agent_attributes():
    # Positive control: the check sees each shape it forbids, and lets the rest be.
    probe = (
        "agent.plan.get()\nself.agent.goals.create('o')\nif agent.goals is None: pass\n"
        "class Agent:\n    def __init__(self):\n        self.plan = None\n"
    )
    assert len(agent_attribute_uses(probe)) == 4
    assert agent_attribute_uses(
        "state.plan.active\nconfig.goals.maxRounds\nagent.features.get(X)\nclass Row:\n    def f(self):\n        self.plan = 1\n"
    ) == []


def test_no_module_reaches_for_agent_plan_or_goals():
    offenders = {}
    for path in sorted(SERVER.rglob("*.py")):
        found = agent_attribute_uses(path.read_text())
        if found:
            offenders[str(path.relative_to(SERVER))] = found
    assert offenders == {}


def test_features_are_looked_up_by_type():
    features = Features()
    assert features.get(PlanModeController) is None and PlanModeController not in features

    class Offered:
        pass

    offered = Offered()
    remove = features.add(offered)
    assert features.get(Offered) is offered and Offered in features
    with pytest.raises(ValueError):
        features.add(Offered())  # one per type
    remove()
    assert features.get(Offered) is None


@pytest.mark.parametrize(
    "plugins, plan, goals",
    [([], False, False), (["plan"], True, False), (["goals"], False, True), (["plan", "goals"], True, True)],
)
async def test_each_loaded_plugin_offers_its_feature(tmp_path, plugins, plan, goals):
    ws = make_workspace(tmp_path, plugins=plugins)
    agent = ws.create_session()
    assert isinstance(agent.features.get(PlanModeController), PlanModeController) is plan
    assert isinstance(agent.features.get(GoalService), GoalService) is goals
    assert not hasattr(agent, "plan") and not hasattr(agent, "goals")
    await ws.shutdown()
