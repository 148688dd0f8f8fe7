"""The goals plugin's ``[goals]`` table: the budgets of a new goal (G-9).

Keys::

    [goals]  maxRounds = 256         # default round budget of a new goal
             maxTokens               # default token budget of a new goal (optional)
             check                   # a shell command the model's goal_complete runs first (optional):
                                     #   exit 0 completes the goal, anything else keeps it active

Light on purpose: the composer imports it without the plugin.
"""

from __future__ import annotations

from dshd.config_tables import ConfigTable, Table, config_error


class GoalsConfig(Table):
    maxRounds: int = 256
    maxTokens: int | None = None  # default token budget of a new goal (none: unlimited)
    check: str | None = None  # run in the sandbox by the model's goal_complete (G-23); none: unchecked


def check_goals(goals: GoalsConfig) -> None:
    if goals.maxRounds < 1:
        raise config_error("goals.maxRounds", "must be at least 1")
    if goals.maxTokens is not None and goals.maxTokens < 1:
        raise config_error("goals.maxTokens", "must be at least 1 (leave it out for no token budget)")
    if goals.check is not None and not goals.check.strip():
        raise config_error("goals.check", "must be a command (leave it out for no check)")


TABLE = ConfigTable("goals", GoalsConfig, check=check_goals)
