"""Replies that look like a tool call the model wrote as text instead of making it.

Small local coder models often answer with a fenced or bare JSON object such as
``{"name": "read_file", "arguments": {"path": "a.py"}}`` (or inside ``<tool_call>`` tags)
where a native tool call belongs; nothing runs, and the text reads as the answer. The chat
says so (a ``notice`` item), so the person knows to pick a model that makes native calls.

Only an object that names one of the tools the model was offered counts, with its
arguments as an object beside the name: a reply that merely shows some JSON is no call.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

# How far a reply is looked at: a written call comes whole in a short reply; a long reply
# that quotes JSON is not worth a scan of every brace.
MAX_TEXT = 64 * 1024
MAX_OBJECTS = 64

_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")

_decoder = json.JSONDecoder()


def written_tool_call(text: str, tool_names: Collection[str]) -> str | None:
    """The name of the offered tool ``text`` seems to call in writing, or None."""
    if not tool_names or "{" not in text:
        return None
    text = text[:MAX_TEXT]
    start, tried = text.find("{"), 0
    while start >= 0 and tried < MAX_OBJECTS:
        tried += 1
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        name = _called(value, tool_names)
        if name is not None:
            return name
        start = text.find("{", end)
    return None


def _called(value: Any, tool_names: Collection[str]) -> str | None:
    """The tool a decoded value calls: ``{name, arguments}`` (any of the usual spellings),
    OpenAI's ``{"type": "function", "function": {...}}``, or a list of such objects."""
    if isinstance(value, list):
        for entry in value[:8]:
            name = _called(entry, tool_names)
            if name is not None:
                return name
        return None
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict):
        return _called(inner, tool_names)
    for key in _NAME_KEYS:
        name = value.get(key)
        if isinstance(name, str) and name in tool_names:
            if any(isinstance(value.get(arg), (dict, str)) for arg in _ARGUMENT_KEYS) or len(value) == 1:
                return name
    return None


def notice_text(tool: str) -> str:
    """What the chat says about a reply that wrote a call of ``tool`` instead of making it."""
    return (
        f"This reply looks like a call of the {tool} tool written as text: the model did not "
        "make the call, so nothing ran. Models that make native tool calls avoid this "
        "(dshd's docs/models.md lists which local models do)."
    )
