"""Prompt assembly from ordered sections.

A section is ``(id, order, render(ctx) -> str | None)``. Each step renders every section
in (order, id) order; ``None`` means "not this time" and the section is left out of the
request and of its ``request/header.sections``. Sections never touch the tool catalogue
(PM-4): modes change what the model is told, not what it can call.

A section marked ``volatile`` changes from one round to the next (a goal's round and token
counts). Its text is kept apart from the system text and sent after the history (G-24), so
the request's prefix (tools, the unchanging sections, the history) stays byte for byte what
the last request sent and a provider's prompt cache can reuse all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from dshd.errors import DshError

if TYPE_CHECKING:
    from dshd.folds import SessionState

BASE_SYSTEM_TEXT = "You are a coding agent working in the person's workspace through dshd."


@attrs.frozen
class PromptContext:
    """What a section may look at: the folded session state the step is built from."""

    state: "SessionState"
    turn: int
    step: int


@attrs.frozen
class Section:
    id: str
    order: int
    render: Callable[[PromptContext], str | None]
    volatile: bool = False


@attrs.frozen
class RenderedPrompt:
    system: str
    section_ids: tuple[str, ...]
    # The volatile sections' text, for after the history ("" when none rendered).
    volatile: str = ""

    @property
    def all_text(self) -> str:
        """Every rendered section's text, wherever in the request it goes (for estimates)."""
        return f"{self.system}\n\n{self.volatile}" if self.volatile else self.system


class SectionRegistry:
    def __init__(self) -> None:
        self._sections: dict[str, Section] = {}

    def add(self, section: Section) -> Callable[[], None]:
        if section.id in self._sections:
            raise ValueError(f"prompt section {section.id!r} registered twice")
        self._sections[section.id] = section

        def remove() -> None:
            self._sections.pop(section.id, None)

        return remove

    def get(self, section_id: str) -> Section | None:
        return self._sections.get(section_id)

    def replace(self, section: Section) -> None:
        """Put ``section`` in place of the registered one with its id (bench/cache.py
        renders the goal's sections in the system text, the order before G-24)."""
        if section.id not in self._sections:
            raise ValueError(f"no prompt section {section.id!r} to replace")
        self._sections[section.id] = section

    def ids(self) -> list[str]:
        return [s.id for s in self._ordered()]

    def _ordered(self) -> list[Section]:
        return sorted(self._sections.values(), key=lambda s: (s.order, s.id))

    def render(self, ctx: PromptContext) -> RenderedPrompt:
        parts = [BASE_SYSTEM_TEXT]
        volatile_parts = []
        ids = []
        for section in self._ordered():
            text = section.render(ctx)
            if text is None:
                continue
            if not isinstance(text, str):
                raise DshError("invalid-params", f"section {section.id} rendered {type(text).__name__}", field="section")
            (volatile_parts if section.volatile else parts).append(text)
            ids.append(section.id)
        return RenderedPrompt("\n\n".join(parts), tuple(ids), "\n\n".join(volatile_parts))
