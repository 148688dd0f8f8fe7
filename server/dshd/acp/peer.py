"""What the ACP door sends to the client: updates, written at once and in order, and
permission requests, answered asynchronously through the SDK's connection."""

from __future__ import annotations

import asyncio
from typing import Any

from acp.connection import Connection
from acp.schema import RequestPermissionRequest, RequestPermissionResponse, SessionNotification
from acp.utils import request_model, serialize_params

from dshd.acp.transport import LineTransport


class Peer:
    def __init__(self, transport: LineTransport, connection: Connection) -> None:
        self._transport = transport
        self._connection = connection

    def update(self, session_id: str, update: Any) -> None:
        params = serialize_params(SessionNotification(session_id=session_id, update=update))
        self._transport.write({"jsonrpc": "2.0", "method": "session/update", "params": params})

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
        request = RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options)
        # The id the connection gives this request (it numbers them in order, and nothing
        # runs between this line and the send): what $/cancel_request names.
        request_id = self._connection._next_request_id
        try:
            return await request_model(self._connection, "session/request_permission", request, RequestPermissionResponse)
        except asyncio.CancelledError:
            # Withdrawn (answered in another client, timed out, the turn ended): the client
            # closes its prompt (ACP's $/cancel_request; its late reply is dropped).
            self._transport.write({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}})
            raise
