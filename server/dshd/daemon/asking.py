"""Asking the person through the editor: a server request that fails closed.

Both seams that wait for a person (plan reviews: ``dsh/questions/ask``; tool approvals:
``dsh/permission/ask``) send their request through :class:`ClientAsk`. Every path that
is not a reply raises the seam's "unavailable" error: the capability was not declared,
the connection was lost, the timeout passed, the editor answered with an error. When the
daemon stops waiting (timeout, or the awaiting task was cancelled: the turn was cancelled,
the agent closed, the daemon shuts down) the request is withdrawn with ``$/cancelRequest``
so the editor closes its window. A reply that arrives after that is dropped by the
protocol (server.DshProtocol._handle_response).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Any

from dshd.agent.questions import ANSWER_TIMEOUT_S


# What each capability lets the editor answer, as a person reads it.
_ASKS = {"questions": "plan reviews", "permissions": "approvals"}
KEPT_LATE_WATCHERS = 32  # withdrawn asks watched for a late reply, per connection


class ClientAsk:
    def __init__(self, server, method: str, capability: str, unavailable: type[Exception], prefix: str) -> None:
        self._server = server
        self.method = method
        self.capability = capability
        self.unavailable = unavailable
        self._prefix = prefix
        self.timeout_s = ANSWER_TIMEOUT_S
        self.client_can_answer = False
        self._pending: set[str] = set()
        self._watched: OrderedDict[str, asyncio.Future] = OrderedDict()  # withdrawn asks whose reply may still come

    async def request(self, params: dict[str, Any]) -> Any:
        """The editor's raw reply, or ``unavailable`` raised; cancellation withdraws."""
        if not self.client_can_answer:
            # The editor did not declare capabilities.experimental.dsh.<capability>.
            raise self.unavailable(
                f"your editor cannot answer {_ASKS.get(self.capability, self.capability)}: "
                "update its dshd extension, or open the folder in an editor that can"
            )
        protocol = self._server.protocol
        msg_id = f"{self._prefix}-{uuid.uuid4().hex[:12]}"
        self._pending.add(msg_id)
        try:
            future = protocol.send_request_async(self.method, params, msg_id=msg_id)
            return await asyncio.wait_for(future, timeout=self.timeout_s)
        except asyncio.TimeoutError:
            protocol.cancel_client_request(msg_id)
            self._watch_late(msg_id, params)
            raise self.unavailable(f"no answer within {self.timeout_s:g} s") from None
        except asyncio.CancelledError:
            # Withdrawn (answered in another client, or the turn ended): the editor closes its window.
            protocol.cancel_client_request(msg_id)
            self._watch_late(msg_id, params)
            raise
        except RuntimeError as exc:  # the server fails pending requests when the connection ends
            raise self.unavailable(f"the editor went away: {exc}") from None
        except Exception as exc:  # an error reply from the editor
            raise self.unavailable(f"the editor answered with an error: {exc}") from None
        finally:
            self._pending.discard(msg_id)

    def _watch_late(self, msg_id: str, params: dict[str, Any]) -> None:
        """A reply that still comes for a withdrawn ask is told it changed nothing (the
        editor may have sent it before our ``$/cancelRequest`` arrived). An error reply
        (the editor's RequestCancelled) is the editor closing the window: nothing to say."""
        protocol = self._server.protocol
        futures = getattr(protocol, "_request_futures", None)
        late_answer = getattr(self._server, "late_answer", None)
        if futures is None or late_answer is None:
            return
        watcher = asyncio.get_running_loop().create_future()
        futures[msg_id] = watcher
        self._watched[msg_id] = watcher
        while len(self._watched) > KEPT_LATE_WATCHERS:
            _old_id, old = self._watched.popitem(last=False)
            old.cancel()

        def reply_came(done: asyncio.Future) -> None:
            self._watched.pop(msg_id, None)
            futures.pop(msg_id, None)
            if not done.cancelled() and done.exception() is None:
                late_answer(self.method, params)

        watcher.add_done_callback(reply_came)

    def fail_all(self) -> None:
        """The connection is gone: every open request fails closed."""
        protocol = self._server.protocol
        for msg_id in list(self._pending):
            future = protocol._request_futures.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(RuntimeError("connection lost"))
        for watcher in list(self._watched.values()):
            watcher.cancel()
        self._watched.clear()
