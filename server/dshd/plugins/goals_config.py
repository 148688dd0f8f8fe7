"""The goals plugin's ``[goals]`` table: the budgets of a new goal (G-9).

Keys::

    [goals]  maxRounds = 256         # default round budget of a new goal
             maxTokens               # default token budget of a new goal (optional)

Light on purpose: the composer imports it without the plugin.
"""

from __future__ import annotations

from dshd.config_tables import ConfigTable, Table, config_error


class GoalsConfig(Table):
    maxRounds: int = 256
    maxTokens: int | None = None  # default token budget of a new goal (none: unlimited)


def check_goals(goals: GoalsConfig) -> None:
    if goals.maxRounds < 1:
        raise config_error("goals.maxRounds", "must be at least 1")
    if goals.maxTokens is not None and goals.maxTokens < 1:
        raise config_error("goals.maxTokens", "must be at least 1 (leave it out for no token budget)")


TABLE = ConfigTable("goals", GoalsConfig, check=check_goals)
