"""dshd wire protocol, version 1: types, method table, strict codec, errors, schema.

Shared by the daemon (layer 5) and the tests; imports neither ``dshd`` nor pygls.
"""

from .codec import from_wire, parse_params, result_to_wire, to_wire, wire_name
from .errors import ERROR_CODES, ERROR_KINDS, InvalidMessage, InvalidParams, jsonrpc_error
from .ids import SESSION_ID_PATTERN, is_session_id, new_session_id
from .types import METHODS, PROTOCOL_VERSION, MethodSpec

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
