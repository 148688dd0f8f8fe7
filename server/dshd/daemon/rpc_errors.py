"""The JSON-RPC error answers of the LSP door: a DshError or bad params -> an answer
carrying ``data.kind``. Its own module so that the server (which sends them) and the
handlers (which raise them) both import it and not each other."""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException

from dshd_protocol import InvalidParams, jsonrpc_error

from dshd.errors import DshError


class DshRpcError(JsonRpcException):
    """A JSON-RPC error answer carrying ``data.kind`` (a DshError or invalid params)."""

    def __init__(self, code: int, message: str, data: dict[str, Any]) -> None:
        super().__init__(message=message, code=code, data=data)


def rpc_error(exc: Exception) -> DshRpcError:
    """The answer for ``exc``; any other exception is raised again (a fault, not an answer)."""
    if isinstance(exc, InvalidParams):
        err = exc.to_jsonrpc_error()
    elif isinstance(exc, DshError):
        err = jsonrpc_error(exc.kind, exc.message, **exc.data)
    else:
        raise exc
    return DshRpcError(err["code"], err["message"], err["data"])
