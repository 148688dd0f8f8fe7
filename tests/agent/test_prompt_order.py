"""G-24: volatile sections render apart from the system text (for after the history)."""

from __future__ import annotations

from dshd.agent.prompt import BASE_SYSTEM_TEXT, PromptContext, Section, SectionRegistry


def test_volatile_sections_render_apart_in_order_and_are_listed_with_the_rest():
    registry = SectionRegistry()
    registry.add(Section("b:stable", 20, lambda ctx: "stable two"))
    registry.add(Section("a:counts", 10, lambda ctx: f"round {ctx.turn}", volatile=True))
    registry.add(Section("c:also", 30, lambda ctx: "more counts", volatile=True))
    registry.add(Section("d:off", 5, lambda ctx: None, volatile=True))
    registry.add(Section("e:first", 1, lambda ctx: "stable one"))
    one = registry.render(PromptContext(state=None, turn=1, step=1))  # type: ignore[arg-type]
    two = registry.render(PromptContext(state=None, turn=2, step=1))  # type: ignore[arg-type]
    assert one.system == f"{BASE_SYSTEM_TEXT}\n\nstable one\n\nstable two" == two.system
    assert (one.volatile, two.volatile) == ("round 1\n\nmore counts", "round 2\n\nmore counts")
    assert one.section_ids == ("e:first", "a:counts", "b:stable", "c:also")
    assert one.all_text == one.system + "\n\n" + one.volatile


def test_without_volatile_sections_nothing_is_kept_apart():
    registry = SectionRegistry()
    registry.add(Section("x", 1, lambda ctx: "only"))
    rendered = registry.render(PromptContext(state=None, turn=1, step=1))  # type: ignore[arg-type]
    assert rendered.volatile == "" and rendered.all_text == rendered.system == f"{BASE_SYSTEM_TEXT}\n\nonly"
