"""Well-formed requests mutated by hypothesis, for the fuzzes of both doors
(tests/e2e/test_fuzz_serve.py, tests/acp_door/test_fuzz.py): a key dropped, a value of
any JSON type, an unknown key, the whole params replaced, the method renamed, a nested
value changed."""

from __future__ import annotations

import copy
from typing import Any, Callable

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def fuzz_settings(max_examples: int) -> settings:
    """One live process for every example: no deadline (a turn may run), no example
    database (the process's state is not replayable)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


@st.composite
def mutated(
    draw,
    templates: list[tuple[str, Any]],
    renames: Callable[[Callable, str], list[str]],
    counts: st.SearchStrategy[int] = st.integers(1, 3),
) -> tuple[str, Any]:
    """(method, params): a template with ``counts`` mutations; ``renames(draw, method)``
    lists the names a renamed method may take (never one that would end the process)."""
    method, params = draw(st.sampled_from(templates))
    params = copy.deepcopy(params)
    count = draw(counts)
    event(f"mutations: {count}")
    for _ in range(count):
        how = draw(st.sampled_from(["drop", "retype", "add", "replace", "rename", "nested"]))
        event(f"mutation: {how}")
        keys = sorted(params) if isinstance(params, dict) else []
        if how == "drop" and keys:
            params.pop(draw(st.sampled_from(keys)))
        elif how == "retype" and keys:
            params[draw(st.sampled_from(keys))] = draw(json_values)
        elif how == "add" and isinstance(params, dict):
            params[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
        elif how == "replace":
            params = draw(json_values)
        elif how == "rename":
            method = draw(st.sampled_from(renames(draw, method)))
        elif how == "nested" and isinstance(params, dict):
            # an object inside the params, or the first object of a list (ACP's prompt blocks)
            inner = [v[0] if isinstance(v, list) else v for v in params.values() if isinstance(v, (dict, list)) and v]
            inner = [v for v in inner if isinstance(v, dict) and v]
            if inner:
                target = draw(st.sampled_from(inner))
                target[draw(st.sampled_from(sorted(target)))] = draw(json_values)
    return method, params
