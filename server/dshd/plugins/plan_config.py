"""The plan plugin's ``[plan]`` table (PM-2, PM-3).

Keys::

    [plan]   section = "<text>"      # the plan:policy prompt text, verbatim

The built-in default carries a plan section text so that a workspace without a config
file works. A deployment that writes a ``[plan]`` table (in a file or the editor's
settings) owns the text: that table must have ``section``; a missing, blank or
non-string ``section`` or an unknown key in ``[plan]`` fails at start-up naming the key.
Light on purpose: the composer imports it without the plugin.
"""

from __future__ import annotations

from typing import Any

from dshd.config_tables import ConfigTable, Table, config_error

DEFAULT_PLAN_SECTION = (
    "Plan mode is on. Investigate and plan first; do not change files yet. "
    "When the plan is ready, call exit_plan_mode with the full plan in markdown, "
    "starting with a # heading, so the person can review it."
)


class PlanConfig(Table):
    section: str = DEFAULT_PLAN_SECTION


def check_plan_layer(plan: Any, file: str) -> None:
    # An unknown key in [plan] is reported by the strict check instead (it names that key).
    if isinstance(plan, dict) and "section" not in plan and set(plan) <= {"section"}:
        raise config_error("plan.section", "a [plan] table must set section (the plan:policy text)", file)


def check_plan(plan: PlanConfig) -> None:
    if not plan.section.strip():
        raise config_error("plan.section", "must be non-blank text")


TABLE = ConfigTable("plan", PlanConfig, check=check_plan, check_layer=check_plan_layer)
