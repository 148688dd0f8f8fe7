"""dshd wire protocol, version 1: types, method table, strict codec, errors, schema.

Shared by the daemon (layer 5) and the tests; imports neither ``dshd`` nor pygls.

Two modules are vocabulary, standard library only: ``errors`` (the error kinds and their
codes) and ``ids`` (session ids, kebab-case codes). dshd's core imports those and nothing
else of this package, so importing the package loads only them; the types and the codec
(attrs, cattrs) load on first use of one of their names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ERROR_CODES, ERROR_KINDS, InvalidMessage, InvalidParams, jsonrpc_error
from .ids import SESSION_ID_PATTERN, is_session_id, new_session_id

if TYPE_CHECKING:
    from .codec import from_wire, parse_params, result_to_wire, to_wire, wire_name
    from .types import METHODS, PROTOCOL_VERSION, MethodSpec

_LATER = {
    "from_wire": "codec",
    "parse_params": "codec",
    "result_to_wire": "codec",
    "to_wire": "codec",
    "wire_name": "codec",
    "METHODS": "types",
    "PROTOCOL_VERSION": "types",
    "MethodSpec": "types",
}
_SUBMODULES = ("codec", "types", "schema", "strategies")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ERROR_CODES",
    "ERROR_KINDS",
    "METHODS",
    "PROTOCOL_VERSION",
    "SESSION_ID_PATTERN",
    "InvalidMessage",
    "InvalidParams",
    "MethodSpec",
    "from_wire",
    "is_session_id",
    "jsonrpc_error",
    "new_session_id",
    "parse_params",
    "result_to_wire",
    "to_wire",
    "wire_name",
]
