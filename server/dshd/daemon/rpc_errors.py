"""The JSON-RPC error answers of the LSP door: a DshError or bad params -> an answer
carrying ``data.kind``. Its own module so that the server (which sends them) and the
handlers (which raise them) both import it and not each other."""

from __future__ import annotations

from typing import Any


class DshRpcError(Exception):
    """A JSON-RPC error answer carrying ``data.kind`` (a DshError or invalid params);
    raised by a handler, sent by the server as it is."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_response_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def rpc_error(exc: Exception) -> DshRpcError:
    """The answer for ``exc``; any other exception is raised again (a fault, not an answer)."""
    from dshd_protocol import InvalidParams, jsonrpc_error

    from dshd.errors import DshError

    if isinstance(exc, InvalidParams):
        err = exc.to_jsonrpc_error()
    elif isinstance(exc, DshError):
        err = jsonrpc_error(exc.kind, exc.message, **exc.data)
    else:
        raise exc
    return DshRpcError(err["code"], err["message"], err["data"])
