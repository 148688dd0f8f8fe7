"""The user-questions seam on the wire: ``dsh/questions/ask`` sent to the editor.

Fail-closed on every path: no capability, a lost connection, a timeout, the turn
cancelled (the request is withdrawn with ``$/cancelRequest``), an error reply, or a
reply that is not ``{"answers": [...]}`` all raise ``QuestionsUnavailable``; the
plan tool turns that into "keep planning". A reply that arrives after we stopped
waiting is dropped by the protocol (see server.DshProtocol._handle_response).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from dshd.agent.questions import QuestionsUnavailable

logger = logging.getLogger("dshd.daemon")

ASK_METHOD = "dsh/questions/ask"
DEFAULT_TIMEOUT_S = 600.0


class WireQuestions:
    def __init__(self, server, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._server = server
        self.timeout_s = timeout_s
        self.client_can_answer = False
        self._pending: set[str] = set()

    async def ask(self, agent, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.client_can_answer:
            raise QuestionsUnavailable("the editor did not declare capabilities.experimental.dsh.questions")
        protocol = self._server.protocol
        msg_id = f"q-{uuid.uuid4().hex[:12]}"
        params = {"agentId": agent.agent_id, "sessionId": agent.session_id, "questions": questions}
        self._pending.add(msg_id)
        try:
            future = protocol.send_request_async(ASK_METHOD, params, msg_id=msg_id)
            reply = await asyncio.wait_for(future, timeout=self.timeout_s)
        except asyncio.TimeoutError:
            protocol.cancel_client_request(msg_id)
            raise QuestionsUnavailable(f"no answer within {self.timeout_s:g} s") from None
        except asyncio.CancelledError:
            protocol.cancel_client_request(msg_id)  # withdrawn: the turn was cancelled
            raise
        except RuntimeError as exc:  # pygls fails pending requests when the connection ends
            raise QuestionsUnavailable(f"the editor went away: {exc}") from None
        except Exception as exc:  # an error reply from the editor
            raise QuestionsUnavailable(f"the editor answered with an error: {exc}") from None
        finally:
            self._pending.discard(msg_id)
        if not isinstance(reply, dict) or not isinstance(reply.get("answers"), list):
            raise QuestionsUnavailable("the editor sent a malformed reply: expected {\"answers\": [...]}")
        return reply["answers"]

    def fail_all(self) -> None:
        """The connection is gone: every open question fails closed."""
        protocol = self._server.protocol
        for msg_id in list(self._pending):
            future = protocol._request_futures.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(RuntimeError("connection lost"))
