"""``/goal`` on the ACP door: start a goal, as the person's own act.

A plan review offers one option per kind (questions.py), since clients pick options by
kind without reading them; "approve and start a goal" is therefore not an option there
but a command the person types (clients list it from ``available_commands_update``):

    /goal              a goal that carries out the session's approved plan (the plan of
                       record), its objective the editors' words for it:
                       Carry out the approved plan "<heading>"
    /goal <objective>  a goal with that objective

Either takes the configured ``[goals]`` budgets (``_session/goal`` sets others). The goal
is armed and its rounds start as for ``_session/goal set``; the prompt's answer comes at
once (``end_turn``), and the client hears the goal and its rounds as any goal change.
Goals off, a goal standing, no approved plan: the prompt is an error saying so, and
nothing is created.
"""

from __future__ import annotations

import logging
from typing import Any

from dshd.acp.errors import invalid_params
from dshd.acp.questions import plan_goal_objective
from dshd.api.escape import shown
from dshd.errors import DshError
from dshd.plugins.plan import first_heading
from dshd.services.goals import GoalService
from dshd.services.plan_records import PlanRecords

log = logging.getLogger("dshd.acp")

NAME = "goal"
DESCRIPTION = "/goal [objective]: start a goal that carries out the approved plan (or the objective given)"
GOALS_OFF = 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml'
# Said in the chat after a plan review this client approved, when a goal can start.
HINT = (
    "the plan is approved. To have dshd carry it out as a goal (rounds until it is done, "
    "within the configured budgets), send /goal."
)


def goal_command_rest(text: str) -> str | None:
    """What follows ``/goal`` (``""`` for none), or None when the prompt is not ``/goal``
    (``/goals`` is another word)."""
    if not text.startswith("/" + NAME):
        return None
    rest = text[len(NAME) + 1 :]
    if rest and not rest[0].isspace():
        return None
    return rest.strip()


def offered(agent: Any) -> bool:
    """The command is listed where goals are on."""
    return GoalService in agent.features


def can_start(agent: Any) -> bool:
    """A goal can be created now: goals are on and none stands in the way (none yet, or
    the last one complete)."""
    goals = agent.features.get(GoalService)
    if goals is None:
        return False
    try:
        current = goals.get()
    except DshError:  # the session closed meanwhile
        return False
    return current is None or current.phase == "complete"


def start_goal(agent: Any, rest: str) -> str:
    """Create the goal ``/goal <rest>`` asks for; what the chat says about it."""
    goals = agent.features.get(GoalService)
    if goals is None:
        raise DshError("plugin-not-loaded", GOALS_OFF)
    if rest:
        objective = rest
    else:
        records = agent.features.get(PlanRecords) or PlanRecords(agent.store)
        plan = records.approved()
        if plan is None:
            raise invalid_params(
                "prompt",
                "there is no approved plan in this session to carry out: approve one first, "
                "or say what the goal is (/goal <objective>)",
            )
        objective = plan_goal_objective(first_heading(plan.markdown) or plan.title)
    view = goals.create(objective)  # a goal standing: invalid-transition, saying which
    log.info("/goal in session %s: goal %s created", agent.session_id, view.id)
    rounds = f"at most {view.max_rounds} rounds"
    return f"Goal started ({rounds}): {shown(view.objective)}"
