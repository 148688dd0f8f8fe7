"""Hypothesis strategies for wire values: valid ones, and ones with exactly one known fault.

Test-only (needs ``hypothesis``). Built from the same types as the codec and the schema,
so a new field is fuzzed without touching any test:

    valid_wire(GoalEditParams)                  # a dict the daemon must accept
    malformed_wire(GoalEditParams)              # (dict, Fault(field="ref.revision", ...))

Each malformed value carries one fault (wrong JSON type, unknown key, missing required
key, null for an optional field, or a broken value rule), and ``Fault.field`` is the
path the daemon must name in its ``invalid-params`` error. The daemon's tests can send
them over the wire as they are.
"""

from __future__ import annotations

import copy
import re
import types as pytypes
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs
from hypothesis import strategies as st

from .codec import tagged_union, wire_name
from .types import Rule

JSON_SAMPLES: dict[str, list[Any]] = {
    "null": [None],
    "boolean": [True, False],
    "integer": [0, 1, 7, -3],
    "number": [0.5, 7.0, -1e3],  # 7.0 is still not an integer to the daemon
    "string": ["", "7", "true", "null", "x"],
    "array": [[], [1], ["x"]],
    "object": [{}, {"x": 1}],
}

# Strings that break a value rule: the first that fails the pattern is used.
RULE_BREAKERS = ["", " ", "\t\n", "../x", "/etc", "Bad_Code", "a b", "s-", "s-" + "I" * 26, "x\n"]


@attrs.frozen
class Fault:
    kind: Literal["wrong-type", "unknown-key", "missing-key", "null-optional", "rule"]
    field: str  # the path the error must name ("" for the whole value)
    value: Any = None  # the wrong value put there (unknown-key: the extra key's value)


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (Union, pytypes.UnionType) and type(None) in get_args(tp)


def _strip_none(tp: Any) -> Any:
    (rest,) = [a for a in get_args(tp) if a is not type(None)]
    return rest


def _unwrap(tp: Any) -> tuple[Any, Rule | None]:
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        rules = [m for m in meta if isinstance(m, Rule)]
        return base, (rules[0] if rules else None)
    return tp, None


def _full_pattern(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _json_scalars() -> st.SearchStrategy[Any]:
    return st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=8)


def valid_wire(tp: Any) -> st.SearchStrategy[Any]:
    """Wire values that must parse as ``tp``."""
    tagged = tagged_union(tp)
    if tagged is not None:
        return st.one_of([valid_wire(cls) for cls in tagged[1].values()])
    base, rule = _unwrap(tp)
    if _is_optional(base):
        return st.none() | valid_wire(_strip_none(base))
    if base is str:
        if rule is not None and rule.pattern is not None:
            pattern = rule.pattern
            if pattern.startswith("^"):
                return st.from_regex(_full_pattern(pattern), fullmatch=True)
            return st.text(max_size=12).map(lambda s: s + "x")  # non-blank
        return st.text(max_size=12)
    if base is bool:
        return st.booleans()
    if base is int:
        low = rule.minimum if rule is not None and rule.minimum is not None else -(2**31)
        high = rule.maximum if rule is not None and rule.maximum is not None else 2**53
        return st.integers(min_value=low, max_value=high)
    if get_origin(base) is Literal:
        return st.sampled_from(get_args(base))
    if get_origin(base) is list:
        (item,) = get_args(base)
        min_size = rule.min_items if rule is not None and rule.min_items is not None else 0
        unique = rule is not None and rule.unique_items
        return st.lists(valid_wire(item), min_size=min_size, max_size=3, unique_by=repr if unique else None)
    if get_origin(base) is dict:
        return st.dictionaries(st.text(max_size=6), _json_scalars(), max_size=3)
    if base is Any:
        return _json_scalars()
    if attrs.has(base):
        required: dict[str, Any] = {}
        optional: dict[str, Any] = {}
        for field in attrs.fields(base):
            name = wire_name(field.name)
            if field.default is attrs.NOTHING:
                required[name] = valid_wire(field.type)
            else:
                inner = _strip_none(field.type) if _is_optional(field.type) else field.type
                optional[name] = valid_wire(inner)
        strategy = st.fixed_dictionaries(required, optional=optional)
        any_of = [wire_name(n) for n in getattr(base, "__dsh_any_of__", ())]
        if any_of:
            strategy = strategy.filter(lambda d: any(k in d for k in any_of))
        return strategy
    raise TypeError(f"no strategy for {tp!r}")


def _allowed_kinds(tp: Any) -> set[str] | None:
    """JSON kinds a value of ``tp`` may have; None: any (nothing to break)."""
    if tagged_union(tp) is not None:
        return {"object"}
    base, _rule = _unwrap(tp)
    if _is_optional(base):
        inner = _allowed_kinds(_strip_none(base))
        return None if inner is None else inner | {"null"}
    if base is str or get_origin(base) is Literal:
        return {"string"}
    if base is bool:
        return {"boolean"}
    if base is int:
        return {"integer"}
    if get_origin(base) is list:
        return {"array"}
    if get_origin(base) is dict or attrs.has(base):
        return {"object"}
    if base is Any:
        return None
    raise TypeError(f"no kinds for {tp!r}")


def path_text(path: tuple[str | int, ...]) -> str:
    out = ""
    for step in path:
        out = f"{out}[{step}]" if isinstance(step, int) else (f"{out}.{step}" if out else step)
    return out


def _sites(tp: Any, value: Any, path: tuple) -> list[tuple[str, tuple, Any]]:
    """Every (fault kind, path, type) this value could be broken at."""
    out: list[tuple[str, tuple, Any]] = []
    if _allowed_kinds(tp) is not None:
        out.append(("wrong-type", path, tp))
    tagged = tagged_union(tp)
    if tagged is not None:  # the member the tag names (its own sites include the tag)
        return out + [s for s in _sites(tagged[1][value[tagged[0].tag]], value, path) if s[:2] != ("wrong-type", path)]
    base, rule = _unwrap(tp)
    if rule is not None and (
        rule.minimum is not None or rule.pattern is not None or rule.min_items is not None or rule.unique_items
    ):
        out.append(("rule", path, tp))
    if _is_optional(base):
        if value is not None:  # null is fine here: only the outer wrong-type site stands
            out.extend(s for s in _sites(_strip_none(base), value, path) if s[:2] != ("wrong-type", path))
        return out
    if get_origin(base) is Literal:
        out.append(("rule", path, tp))
    if get_origin(base) is list:
        (item,) = get_args(base)
        for i, element in enumerate(value):
            out.extend(_sites(item, element, (*path, i)))
    if attrs.has(base):
        if not getattr(base, "__dsh_open__", False):
            out.append(("unknown-key", path, base))
        for field in attrs.fields(base):
            name = wire_name(field.name)
            if field.default is attrs.NOTHING:
                out.append(("missing-key", (*path, name), base))
                out.extend(_sites(field.type, value[name], (*path, name)))
            elif name in value:
                inner = _strip_none(field.type) if _is_optional(field.type) else field.type
                out.append(("null-optional", (*path, name), inner))
                out.extend(_sites(inner, value[name], (*path, name)))
    return out


def _get(root: Any, path: tuple) -> Any:
    for step in path:
        root = root[step]
    return root


def _set(root: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    _get(root, path[:-1])[path[-1]] = new
    return root


def _wrong_values(tp: Any) -> list[Any]:
    allowed = _allowed_kinds(tp) or set()
    return [v for kind, samples in JSON_SAMPLES.items() if kind not in allowed for v in samples]


def _rule_breakers(tp: Any) -> list[Any]:
    base, rule = _unwrap(tp)
    if get_origin(base) is Literal:
        return ["not-a-choice", get_args(base)[0].upper()]
    if rule is None:
        return []
    if rule.minimum is not None:
        too_big = [rule.maximum + 1, 2**70] if rule.maximum is not None else []
        return [rule.minimum - 1, rule.minimum - 100, *too_big]
    if rule.min_items is not None:
        return [[]] if rule.min_items > 0 else []
    if rule.unique_items:
        (item,) = get_args(base)
        return [[get_args(item)[0]] * 2] if get_origin(item) is Literal else []
    if rule.pattern is not None:
        pattern = _full_pattern(rule.pattern)
        return [s for s in RULE_BREAKERS if pattern.search(s) is None]
    return []


@st.composite
def malformed_wire(draw: st.DrawFn, tp: Any) -> tuple[Any, Fault]:
    """A wire value for ``tp`` with exactly one fault, and the fault."""
    value = draw(valid_wire(tp))
    sites = _sites(tp, value, ())
    kind, path, site_type = draw(st.sampled_from(sites))
    value = copy.deepcopy(value)
    field = path_text(path)
    breakers = _rule_breakers(site_type) if kind == "rule" else []
    if kind == "wrong-type" or (kind == "rule" and not breakers):
        wrong = _wrong_values(site_type)
        if not path or kind == "rule":  # root: absent params (null) read as {}
            wrong = [v for v in wrong if v is not None]
        bad = draw(st.sampled_from(wrong))
        return _set(value, path, bad), Fault("wrong-type", field, bad)
    if kind == "rule":
        bad = draw(st.sampled_from(breakers))
        return _set(value, path, bad), Fault(kind, field, bad)
    if kind == "null-optional":
        return _set(value, path, None), Fault(kind, field)
    if kind == "missing-key":
        del _get(value, path[:-1])[path[-1]]
        return value, Fault(kind, field)
    # unknown-key: a name the class does not have (snake_case twins included)
    known = {wire_name(f.name) for f in attrs.fields(site_type)}
    key = draw(
        st.sampled_from(["extra", "agent_id", "max_rounds", "AgentId", "id ", "__proto__"])
        | st.text(min_size=1, max_size=8)
    ).strip() or "extra"
    if key in known:
        key = key + "_"
    extra = draw(_json_scalars())
    _get(value, path)[key] = extra
    return value, Fault("unknown-key", path_text((*path, key)), extra)
