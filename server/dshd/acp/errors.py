"""Errors on the ACP door: every failure a client can act on is a JSON-RPC error whose
``data.kind`` is dshd's stable kind (the same kinds and codes as `dshd serve`).

- bad params: -32602, ``data = {"kind": "invalid-params", "field": "<path>"}`` and a
  message that names the field (from the SDK's pydantic validation or our own checks);
- a :class:`~dshd.errors.DshError`: its kind's code, ``data = {"kind", **data}``
  (``stale-revision`` carries ``current`` and ``goalId``, ``session-locked`` the ``pid``);
- unknown methods are the SDK's -32601 (``data.method``).
"""

from __future__ import annotations

from typing import Any

from acp import RequestError
from pydantic import ValidationError

from dshd.errors import DshError
from dshd_protocol.errors import ERROR_CODES  # the kinds' codes, as on the LSP door: one table
from dshd_protocol.errors import INVALID_PARAMS_CODE as INVALID_PARAMS

INVALID_REQUEST = -32600


def invalid_params(field: str, message: str) -> RequestError:
    """-32602 whose message starts with the field it is about."""
    if not message.startswith(field):
        message = f"{field}: {message}"
    return RequestError(INVALID_PARAMS, message, {"kind": "invalid-params", "field": field})


def from_dsh(exc: DshError) -> RequestError:
    if exc.kind == "invalid-params" and isinstance(exc.data.get("field"), str):
        return invalid_params(exc.data["field"], exc.message)
    return RequestError(ERROR_CODES[exc.kind], exc.message, {"kind": exc.kind, **exc.data})


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("prompt", 0, "text")`` -> ``prompt[0].text``; the whole params -> ``params``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "params"


def from_validation(exc: ValidationError) -> RequestError:
    """The first problem pydantic found, with its field; all of them in ``data.errors``."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    first = errors[0] if errors else {"loc": (), "msg": "invalid params"}
    field = field_path(_without_union_tags(first["loc"]))
    listed = [{"field": field_path(_without_union_tags(e["loc"])), "message": e["msg"]} for e in errors]
    error = invalid_params(field, first["msg"])
    error.data["errors"] = listed
    return error


def _without_union_tags(loc: tuple[Any, ...]) -> list[Any]:
    """pydantic puts the tag of a discriminated union in the path (``prompt.0.text.text``
    for the ``text`` block's ``text``); a client knows the field as ``prompt[0].text``."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if isinstance(part, str) and i > 0 and isinstance(loc[i - 1], int) and i + 1 < len(loc):
            # after a list index comes the variant tag (e.g. "text", "resource") when the
            # list holds a tagged union; drop it when a field name follows it
            if part in _UNION_TAGS:
                continue
        out.append(part)
    return out


# Tags of the tagged unions that appear in agent-side request params (content blocks,
# MCP server kinds).
_UNION_TAGS = {"text", "image", "audio", "resource", "resource_link", "http", "sse", "acp", "stdio", "McpServerStdio"}
