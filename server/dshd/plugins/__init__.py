"""The plugins (``plan``, ``goals``, ``tools``): each module has ``attach(agent, config)``
and ``tools(config)``, the tools it adds as a catalogue lists them (with their own
descriptions, agent/tools.py).

Nothing is imported here at module level: ``agent/config.py`` imports the plugins'
``*_config`` tables through this package.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dshd.agent.tools import ToolCatalogue


@functools.cache
def known_tools() -> "ToolCatalogue":
    """Every known plugin's tools with the default config: what reads a log without its
    agent (``dshd log show --chat``, the chat fixtures) describes calls with. Their runs
    are never called from here."""
    from dshd.agent.config import KNOWN_PLUGINS, Config
    from dshd.agent.tools import ToolCatalogue

    catalogue = ToolCatalogue()
    config = Config()
    for name in KNOWN_PLUGINS:
        for tool in importlib.import_module(f"dshd.plugins.{name}").tools(config):
            catalogue.add(tool)
    return catalogue
