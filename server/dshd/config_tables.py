"""What a config table is, and the errors every table reports (layer 0: knows no key).

Each feature owns its table in its own ``config.py``-style module (``models/config.py``
owns ``[model]``, ``tools/config.py`` owns ``[tools]``, ``plugins/plan_config.py`` owns
``[plan]`` ...): a frozen msgspec :class:`Table` with the keys and defaults, and a
:class:`ConfigTable` saying how to check it. :mod:`dshd.agent.config` composes them into
one ``Config``; :mod:`dshd.agent.config_layers` reads and merges the files.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from dshd.errors import DshError


class Table(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A config table: an unknown key or a wrong type fails the strict check."""


@dataclass(frozen=True)
class Derived:
    """A value that is not a key but that a feature reads at load time from its table,
    so that a fault fails start-up naming the key (the scripted model's replies)."""

    name: str  # the attribute of the composed Config; never accepted as a key
    type: Any
    default: Any
    # (the checked table, the workspace or None, the dotted keys the workspace file set)
    load: Callable[[Any, Path | None, Collection[str]], Any]


@dataclass(frozen=True)
class ConfigTable:
    """A feature's table as the composer sees it."""

    name: str  # the TOML table, e.g. "model"
    type: type[Table]
    # Value rules on the merged table (a later layer may replace a value): raise config_error.
    check: Callable[[Any], None] | None = None
    # Rules on the table as one layer wrote it (a dict), before the strict type check.
    check_layer: Callable[[Any, str], None] | None = None
    derived: tuple[Derived, ...] = ()


def config_error(key: str, message: str, file: str | None = None) -> DshError:
    """``invalid-config`` naming the dotted ``key`` and, when known, the ``file`` that set it
    (in ``data``: editors say where in their own words, and open the file at the key)."""
    data = {"key": key, "file": file} if file else {"key": key}
    error = DshError("invalid-config", f"invalid config {key}: {message}", **data)
    error.detail = message  # type: ignore[attr-defined]  # the message without key and file
    return error


def merge_tables(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``, table by table (a later layer wins key by key)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_tables(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# msgspec reports where a value failed as "... - at `$.plan.section`" (or `$.plugins[1]`).
_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN_RE = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`")


def key_of(error: msgspec.ValidationError) -> str:
    """The dotted key a msgspec validation error is about ("config" when none)."""
    message = str(error)
    match = _PATH_RE.search(message)
    path = match.group("path") if match else ""
    path = re.sub(r"\[\d+\]", "", path).lstrip(".")
    unknown = _UNKNOWN_RE.match(message)
    if unknown:
        path = f"{path}.{unknown.group('field')}" if path else unknown.group("field")
    return path or "config"
