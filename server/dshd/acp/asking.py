"""Asking the person through the ACP client: ``session/request_permission``, failing
closed.

Both seams that wait for a person (plan reviews, questions.py; tool approvals,
permissions.py) ask through :class:`PermissionAsk`: a tool call and the options to choose
from; the answer is the chosen ``optionId``. Every other way it can end raises the seam's
"unavailable" error: a ``cancelled`` outcome (clients send it for open requests on
``session/cancel``), an error reply, a malformed reply, a lost connection, the timeout.
Cancelling the awaiting task (the turn was cancelled, the question was answered in another
client attached to the session, the timeout) stops waiting and cancels the request in the
client with ACP's ``$/cancel_request`` (peer.py); clients also cancel open requests
themselves on ``session/cancel``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from acp import RequestError
from pydantic import ValidationError

if TYPE_CHECKING:
    from dshd.acp.peer import Peer

log = logging.getLogger("dshd.acp")


class PermissionAsk:
    unavailable: type[Exception]  # the seam's error: each subclass names its own

    def __init__(self, peer: "Peer", *, timeout_s: float) -> None:
        self._peer = peer
        self.timeout_s = timeout_s

    async def choose(self, session_id: str, tool_call: Any, options: list[Any], *, what: str) -> str:
        """The optionId the person chose, or the unavailable error saying why not."""
        try:
            response = await asyncio.wait_for(
                self._peer.request_permission(session_id, tool_call, options), timeout=self.timeout_s
            )
        except TimeoutError:
            raise self.unavailable(f"no answer to the {what} within {self.timeout_s:g} s") from None
        except ConnectionError:
            raise self.unavailable("the client went away") from None
        except RequestError as exc:
            raise self.unavailable(f"the client answered the {what} with an error: {exc}") from None
        except ValidationError as exc:
            raise self.unavailable(f"the client's answer to the {what} was malformed ({exc.error_count()} problem(s))") from None
        outcome = response.outcome
        if outcome.outcome != "selected":
            raise self.unavailable(f"the {what} was cancelled")
        log.info("%s in session %s: %s", what, session_id, outcome.option_id)
        return outcome.option_id
