"""Strict wire codec: JSON values <-> the attrs types of :mod:`dshd_protocol.types`.

One cattrs converter with strict hooks does all of it:

* no coercion, ever: a string is never a bool or a number, a bool is not an int, a
  float (even ``7.0``) is not an int, ``null`` is not a string, a string is not a list;
* unknown fields are rejected (``forbid_extra_keys``), missing required ones named;
* the value rules carried by ``Annotated[..., Rule]`` are checked;
* every failure becomes :class:`InvalidParams` / :class:`InvalidMessage` naming the
  path of the first wrong value (``ref.revision``, ``questions[0].choices[1]``).

:func:`to_wire` is the inverse: camelCase keys, optional fields left out when absent.
"""

from __future__ import annotations

import functools
import re
import types as pytypes
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from .errors import InvalidMessage, InvalidParams
from .types import METHODS, Rule, Tagged


def wire_name(python_name: str) -> str:
    """snake_case -> camelCase, as lsprotocol does it (``max_rounds`` -> ``maxRounds``)."""
    head, *rest = python_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class _WrongValue(Exception):
    """Raised by the strict hooks; ``field`` is a path below the current position."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _shown(value: Any, limit: int = 60) -> str:
    """A wrong value as it goes into an error message: repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _strict_scalar(expected: type, name: str):
    def hook(value: Any, _type: Any) -> Any:
        # `type(...) is`, not isinstance: bool is a subclass of int.
        if type(value) is not expected:
            raise _WrongValue(f"expected {name}, got {json_type_name(value)}")
        return value

    return hook


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (Union, pytypes.UnionType) and type(None) in get_args(tp)


def _strip_none(tp: Any) -> Any:
    rest = [a for a in get_args(tp) if a is not type(None)]
    if len(rest) != 1:
        raise TypeError(f"unsupported union {tp!r}")
    return rest[0]


def _rule_of(tp: Any) -> tuple[Any, Rule] | None:
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        rules = [m for m in meta if isinstance(m, Rule)]
        if rules:
            return base, rules[0]
    return None


def tagged_union(tp: Any) -> tuple[Tagged, dict[str, type]] | None:
    """For ``Annotated[Union[...], Tagged(...)]``: the marker and tag value -> class."""
    if get_origin(tp) is not Annotated:
        return None
    base, *meta = get_args(tp)
    marks = [m for m in meta if isinstance(m, Tagged)]
    if not marks:
        return None
    tagged = marks[0]
    by_tag: dict[str, type] = {}
    for cls in get_args(base):
        (value,) = get_args(attrs.fields_dict(cls)[tagged.tag].type)
        by_tag[value] = cls
    return tagged, by_tag


@functools.lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern[str]:
    # The patterns are written for JSON Schema (ECMA 262), where a final "$" is the end
    # of the string; in Python it also matches before a trailing newline, so
    # "s-...\n" would pass. Read a final "$" as "\Z".
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True, omit_if_default=True)

    conv.register_structure_hook(str, _strict_scalar(str, "string"))
    conv.register_structure_hook(int, _strict_scalar(int, "integer"))
    conv.register_structure_hook(bool, _strict_scalar(bool, "boolean"))
    conv.register_structure_hook(float, _strict_scalar(float, "number"))

    def structure_any(value: Any, _type: Any) -> Any:
        return value

    conv.register_structure_hook(Any, structure_any)

    def literal_hook_factory(tp: Any):
        allowed = get_args(tp)
        shown = ", ".join(repr(a) for a in allowed)

        def hook(value: Any, _type: Any) -> Any:
            # Compare type and value: 1 == True, and unhashable values must not blow up.
            if not any(type(value) is type(a) and value == a for a in allowed):
                raise _WrongValue(f"expected one of {shown}, got {_shown(value)}")
            return value

        return hook

    conv.register_structure_hook_factory(lambda t: get_origin(t) is Literal, literal_hook_factory)

    def dict_hook_factory(tp: Any):
        key_type, _value_type = get_args(tp) or (str, Any)
        if key_type is not str or _value_type is not Any:
            raise TypeError(f"only dict[str, Any] is supported, not {tp!r}")

        def hook(value: Any, _type: Any) -> Any:
            if type(value) is not dict:
                raise _WrongValue(f"expected object, got {json_type_name(value)}")
            return value

        return hook

    conv.register_structure_hook_factory(lambda t: get_origin(t) is dict, dict_hook_factory)

    def list_hook_factory(tp: Any):
        items = list_structure_factory(tp, conv)

        def hook(value: Any, _type: Any) -> Any:
            if type(value) is not list:  # cattrs would take any iterable: "ab" -> ["a", "b"]
                raise _WrongValue(f"expected array, got {json_type_name(value)}")
            return items(value, _type)

        return hook

    conv.register_structure_hook_factory(lambda t: get_origin(t) is list, list_hook_factory)

    def ruled_hook_factory(tp: Any):
        base, rule = _rule_of(tp)  # type: ignore[misc]
        base_hook = conv.get_structure_hook(base)
        pattern = _compiled(rule.pattern) if rule.pattern is not None else None

        def hook(value: Any, _type: Any) -> Any:
            result = base_hook(value, base)
            if rule.minimum is not None and result < rule.minimum:
                raise _WrongValue(f"expected {rule.description}, got {_shown(result)}")
            if rule.maximum is not None and result > rule.maximum:
                raise _WrongValue(f"expected {rule.description}, got {_shown(result)}")
            if pattern is not None and pattern.search(result) is None:
                raise _WrongValue(f"expected {rule.description}, got {_shown(result)}")
            if rule.min_items is not None and len(result) < rule.min_items:
                raise _WrongValue(f"expected {rule.description}, got {len(result)} items")
            if rule.unique_items and len(set(map(repr, result))) != len(result):
                raise _WrongValue(f"expected {rule.description}, got a value twice")
            return result

        return hook

    conv.register_structure_hook_factory(lambda t: _rule_of(t) is not None, ruled_hook_factory)

    def optional_hook_factory(tp: Any):
        inner_type = _strip_none(tp)
        inner = conv.get_structure_hook(inner_type)

        def hook(value: Any, _type: Any) -> Any:
            return None if value is None else inner(value, inner_type)

        return hook

    conv.register_structure_hook_factory(_is_optional, optional_hook_factory)

    def attrs_structure_factory(cls: type):
        overrides = {}
        for field in attrs.fields(cls):
            kwargs: dict[str, Any] = {"rename": wire_name(field.name)}
            if field.default is not attrs.NOTHING and _is_optional(field.type):
                # Optional means "may be absent", not "may be null".
                kwargs["struct_hook"] = conv.get_structure_hook(_strip_none(field.type))
            overrides[field.name] = override(**kwargs)
        open_keys = getattr(cls, "__dsh_open__", False)  # capabilities: unknown keys ignored
        generated = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=not open_keys, **overrides)
        any_of = getattr(cls, "__dsh_any_of__", ())

        def hook(value: Any, _type: Any) -> Any:
            if type(value) is not dict:
                raise _WrongValue(f"expected object, got {json_type_name(value)}")
            obj = generated(value, cls)
            if any_of and all(getattr(obj, name) is None for name in any_of):
                names = " or ".join(wire_name(n) for n in any_of)
                raise _WrongValue(f"needs at least one of {names}", field=wire_name(any_of[0]))
            return obj

        return hook

    def attrs_unstructure_factory(cls: type):
        return make_dict_unstructure_fn(
            cls,
            conv,
            _cattrs_omit_if_default=True,  # fields without a default (nullable ones) stay
            **{f.name: override(rename=wire_name(f.name)) for f in attrs.fields(cls)},
        )

    conv.register_structure_hook_factory(attrs.has, attrs_structure_factory)
    conv.register_unstructure_hook_factory(attrs.has, attrs_unstructure_factory)

    def tagged_structure_factory(tp: Any):
        tagged, by_tag = tagged_union(tp)  # type: ignore[misc]
        shown = ", ".join(repr(t) for t in by_tag)

        def hook(value: Any, _type: Any) -> Any:
            if type(value) is not dict:
                raise _WrongValue(f"expected object, got {json_type_name(value)}")
            if tagged.tag not in value:
                raise _WrongValue("missing required field", field=tagged.tag)
            tag = value[tagged.tag]
            cls = by_tag.get(tag) if type(tag) is str else None
            if cls is None:
                raise _WrongValue(f"expected one of {shown}, got {_shown(tag)}", field=tagged.tag)
            return conv.structure(value, cls)

        return hook

    # Registered last: it wins over the Annotated and Union handling above.
    conv.register_structure_hook_factory(lambda t: tagged_union(t) is not None, tagged_structure_factory)
    conv.register_unstructure_hook_factory(
        lambda t: tagged_union(t) is not None, lambda _t: lambda obj: conv.unstructure(obj, obj.__class__)
    )
    return conv


converter = _make_converter()


# ---- error paths --------------------------------------------------------------------


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _step(path: str, exc: BaseException) -> str:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return _join(path, wire_name(note.name))
        if isinstance(note, IterableValidationNote):
            return f"{path}[{note.index}]"
    return path


def _first_error(exc: BaseException, path: str = "") -> tuple[str, str]:
    """(path, message) of the first wrong value inside a cattrs error tree."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        # Field order first; an unknown key (reported after the fields) comes last.
        sub = exc.exceptions[0]
        return _first_error(sub, _step(path, sub))
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = sorted(exc.extra_fields)
        return _join(path, extra[0]), "unknown field" + (f" (also: {', '.join(extra[1:])})" if extra[1:] else "")
    if isinstance(exc, KeyError):
        return path, "missing required field"
    if isinstance(exc, _WrongValue):
        return (_join(path, exc.field) if exc.field else path), exc.message
    return path, str(exc) or type(exc).__name__


def _structure(raw: Any, tp: Any, root: str, error: type[InvalidMessage]) -> Any:
    try:
        return converter.structure(raw, tp)
    except (ClassValidationError, IterableValidationError, _WrongValue) as exc:
        path, message = _first_error(exc)
        raise error(path or root, message) from None


# ---- public API -----------------------------------------------------------------------


def parse_params(method: str, raw: Any) -> Any:
    """The params of ``method`` as its attrs type, or :class:`InvalidParams`.

    Absent params (``None``) read as ``{}``, so a method whose fields are all
    optional may omit them; anything else that is not an object is field ``params``.
    """
    spec = METHODS.get(method)
    if spec is None:
        raise KeyError(f"unknown method {method!r}")
    if raw is None:
        raw = {}
    if type(raw) is not dict:
        raise InvalidParams("params", f"expected object, got {json_type_name(raw)}")
    return _structure(raw, spec.params, "params", InvalidParams)


def from_wire(tp: Any, raw: Any, *, root: str = "result") -> Any:
    """A wire value read strictly as ``tp`` (a class, ``X | None``, or ``None`` for null).

    Raises :class:`InvalidMessage` naming the first wrong field (``root`` for the whole).
    """
    if tp is None or tp is type(None):
        if raw is not None:
            raise InvalidMessage(root, f"expected null, got {json_type_name(raw)}")
        return None
    return _structure(raw, tp, root, InvalidMessage)


def to_wire(obj: Any) -> Any:
    """JSON-ready value of a wire object: camelCase keys, absent optionals left out."""
    return converter.unstructure(obj)


def result_to_wire(method: str, result: Any) -> Any:
    """The JSON result of ``method``; checks that ``result`` has the table's type."""
    spec = METHODS[method]
    if spec.kind == "notification":
        raise ValueError(f"{method} is a notification: it has no result")
    expected = spec.result
    if expected is None and result is not None:
        raise TypeError(f"{method} has a null result, got {type(result).__name__}")
    if result is None:
        if expected is None or _is_optional(expected):
            return None
        raise TypeError(f"{method} needs a {expected.__name__} result, got None")
    cls = _strip_none(expected) if _is_optional(expected) else expected
    if not isinstance(result, cls):
        raise TypeError(f"{method} needs a {cls!r} result, got {type(result).__name__}")
    return to_wire(result)
