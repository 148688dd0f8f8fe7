"""Configuration: the composer of the features' tables, and the strict check of one mapping.

Each feature owns its table (keys, defaults, value rules) in its own module:

    [plan]     dshd.plugins.plan_config     [goals]   dshd.plugins.goals_config
    [model]    dshd.models.config           [tools]   dshd.tools.config
    [agent], [context]  dshd.agent.turn_config  [daemon]  dshd.agent.daemon_config
    [mcp]      dshd.plugins.mcp_config      [checkpoints]  dshd.plugins.checkpoints_config

This module knows none of their keys. It owns only the loader's own keys::

    plugins = ["plan", "goals", "tools", "mcp", "checkpoints"]  # plugins loaded by name (dshd.plugins.<name>)
    [trust]  folders = []            # trusted workspaces (user config)

and composes one msgspec ``Config`` struct from the tables (``config.model``,
``config.tools`` ...). A mapping is checked strictly by msgspec against it: an unknown
key, a wrong type (a string is never read as a number or a bool) or a bad value is
``DshError("invalid-config", key="<dotted.key>", file=...)``. Nothing is ignored.

Where the mappings come from (built-in defaults < user config < workspace config <
the editor's settings) and which keys a workspace may set without being trusted is
:mod:`dshd.agent.config_layers`.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import msgspec

from dshd.agent import daemon_config, turn_config
from dshd.config_tables import ConfigTable, Table, config_error, key_of, merge_tables
from dshd.models import config as model_config
from dshd.tools import config as tools_config

__all__ = ["DEFAULTS", "KNOWN_PLUGINS", "NOT_KEYS", "TABLES", "Config", "check_layer", "config_error", "merge_tables", "parse_config"]

KNOWN_PLUGINS = ("plan", "goals", "tools", "mcp", "checkpoints")


class TrustConfig(Table):
    folders: list[str] = []  # workspaces trusted for guarded keys (user config only)


def _plugin_table(name: str) -> ConfigTable:
    # The loop imports no plugin (docs/architecture.md), so a plugin's table is found by
    # name as the plugin itself is; the *_config module is light and imports no plugin.
    return importlib.import_module(f"dshd.plugins.{name}_config").TABLE


# In the order of the file's tables; their value rules run in this order too.
TABLES: tuple[ConfigTable, ...] = (
    _plugin_table("plan"),
    _plugin_table("goals"),
    model_config.TABLE,
    turn_config.AGENT_TABLE,
    tools_config.TABLE,
    turn_config.CONTEXT_TABLE,
    daemon_config.TABLE,
    _plugin_table("mcp"),
    _plugin_table("checkpoints"),
)

# Values features read at load time: attributes of Config, never keys.
NOT_KEYS: tuple[str, ...] = tuple(derived.name for table in TABLES for derived in table.derived)

Config = msgspec.defstruct(
    "Config",
    [("plugins", list[str], msgspec.field(default_factory=lambda: list(KNOWN_PLUGINS)))]
    + [(table.name, table.type, msgspec.field(default_factory=table.type)) for table in TABLES]
    + [("trust", TrustConfig, msgspec.field(default_factory=TrustConfig))]
    + [(derived.name, derived.type, derived.default) for table in TABLES for derived in table.derived],
    bases=(Table,),
    module=__name__,
)

DEFAULTS: dict[str, Any] = msgspec.to_builtins(Config())
for _name in NOT_KEYS:
    del DEFAULTS[_name]


def _reject_not_keys(data: dict[str, Any], file: str | None = None) -> None:
    for name in NOT_KEYS:
        if name in data:
            raise config_error(name, "unknown key", file)


def check_layer(layer: Any, file: str) -> None:
    """Check one layer on its own (a config file, or the editor's settings): every key is
    known and every value has the right type. Value rules are checked on the merged
    result (:func:`parse_config`), since a later layer may replace a value."""
    if not isinstance(layer, dict):
        raise config_error("config", "must be a table/object", file)
    _reject_not_keys(layer, file)
    for table in TABLES:
        if table.check_layer is not None and table.name in layer:
            table.check_layer(layer[table.name], file)
    try:
        msgspec.convert(layer, Config, strict=True)
    except msgspec.ValidationError as exc:
        raise config_error(key_of(exc), str(exc), file) from exc


def _check_values(config: Any) -> None:
    for table in TABLES:
        if table.check is not None:
            table.check(getattr(config, table.name))
    for name in config.plugins:
        if name not in KNOWN_PLUGINS:
            raise config_error("plugins", f"unknown plugin {name!r} (known: {', '.join(KNOWN_PLUGINS)})")
    if len(set(config.plugins)) != len(config.plugins):
        raise config_error("plugins", "a plugin is listed twice")


def parse_config(data: dict[str, Any], workspace: Path | None = None, *, workspace_keys: Collection[str] = ()) -> Any:
    """Check one merged config mapping (defaults already applied or not) and load what
    the features read at load time. ``workspace_keys``: the dotted keys the workspace's
    own config file set (a file it names must then be inside the workspace)."""
    if not isinstance(data, dict):
        raise config_error("config", "must be a table/object")
    try:
        config = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        raise config_error(key_of(exc), str(exc)) from exc
    _reject_not_keys(data)
    _check_values(config)
    loaded = {
        derived.name: derived.load(getattr(config, table.name), workspace, workspace_keys)
        for table in TABLES
        for derived in table.derived
    }
    return msgspec.structs.replace(config, **loaded) if loaded else config
