"""What plugins offer the rest of the daemon, looked up by type.

A plugin that has something the doors or the hub need (the plan plugin's
``PlanModeController``, the goals plugin's ``GoalService``) adds it here when it
attaches; a reader asks ``agent.features.get(PlanModeController)`` and handles None
(the plugin is not loaded). The agent itself never names a feature: adding one touches
the plugin that offers it and the readers that want it, nothing in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Features:
    def __init__(self) -> None:
        self._by_type: dict[type, Any] = {}

    def add(self, feature: object) -> Callable[[], None]:
        """Offer ``feature`` under its own type (one per type); returns a remover."""
        kind = type(feature)
        if kind in self._by_type:
            raise ValueError(f"a {kind.__name__} is already offered")
        self._by_type[kind] = feature

        def remove() -> None:
            if self._by_type.get(kind) is feature:
                del self._by_type[kind]

        return remove

    def get(self, kind: type[T]) -> T | None:
        """The feature of type ``kind``, or None when no loaded plugin offers one."""
        return self._by_type.get(kind)

    def __contains__(self, kind: type) -> bool:
        return kind in self._by_type
