"""The tools plugin: the workspace tools of ``dshd.tools`` in the agent's catalogue.

On by default (``plugins`` lists it). It adds tools and nothing else: no section, no
command, no listener. The runner enforces the approvals from each tool's mutability
(``agent/approvals.py``); the tools read the live sandbox policy from their context.
Plan mode is not consulted: it stays soft guidance.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from dshd.agent.config import Config
from dshd.agent.tools import Tool
from dshd.tools import files, run, search

if TYPE_CHECKING:
    from dshd.agent.loop import Agent


def tools(config: Config) -> list[Tool]:
    """The workspace tools, each with its run, preview and description from its own file."""
    max_write = {"max_write_bytes": config.tools.maxWriteBytes}  # the write tools' cap
    return [
        Tool(
            "read_file",
            "Read a text file of the workspace as numbered lines (offset/limit to page through it).",
            files.READ_PARAMETERS,
            files.read_file,
            describe=files.describe_read_file,
        ),
        Tool(
            "list_files",
            "List the files under a workspace folder (gitignored files left out), optionally matching a glob.",
            search.LIST_PARAMETERS,
            search.list_files,
            describe=search.describe_list_files,
        ),
        Tool(
            "search",
            "Search workspace files for a regular expression; answers path:line:text lines.",
            search.SEARCH_PARAMETERS,
            search.search,
            describe=search.describe_search,
        ),
        Tool(
            "write_file",
            "Create or replace a whole text file in the workspace.",
            files.WRITE_PARAMETERS,
            functools.partial(files.write_file, **max_write),
            mutability="write",
            preview=functools.partial(files.write_file_preview, **max_write),
            describe=files.describe_write_file,
        ),
        Tool(
            "edit_file",
            "Replace exact text in a workspace file (oldText must match once unless replaceAll); returns the diff.",
            files.EDIT_PARAMETERS,
            functools.partial(files.edit_file, **max_write),
            mutability="write",
            preview=functools.partial(files.edit_file_preview, **max_write),
            describe=files.describe_edit_file,
        ),
        Tool(
            "run_command",
            "Run a shell command in the workspace, in the sandbox; answers its exit code and output.",
            run.PARAMETERS,
            run.RunCommand(config.tools.env, config.tools.unixSockets),
            mutability="exec",
            preview=run.run_command_preview,
            describe=run.describe_run_command,
        ),
    ]


class ToolsPlugin:
    def __init__(self, agent: "Agent", config: Config) -> None:
        self.tools = tools(config)
        for tool in self.tools:
            agent.tools.add(tool)


def attach(agent: "Agent", config: Config) -> ToolsPlugin:
    return ToolsPlugin(agent, config)
