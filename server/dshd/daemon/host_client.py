"""A dsh connection as the host's client (dshd.api.host.Client).

:class:`HostClient` is mixed into the daemon (one per connection): it answers the host's
calls with this connection's seams and notifications.

- ``follow``/``unfollow``: the connection's hub follows the agent (its events, deltas,
  plan and goal changes, chat items) or stops.
- ``clients_changed``: ``dsh/session/clients {agentId, sessionId, clients}``.
- ``question_resolved``: ``dsh/question/resolved {agentId, sessionId, questionId, kind,
  outcome, by: {clientName}}``; the host then withdraws this connection's own ask, if it
  was still open (``$/cancelRequest``).
- ``late_answer``: a reply to an ask that was withdrawn (answered elsewhere, or the turn
  ended) gets a ``window/showMessage`` saying it changed nothing, and who answered
  ("answered in Neovim 2 first"): once per question, however the lateness was seen.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from dshd.api import words
from dshd.api.host import AttachedClient, Resolution

logger = logging.getLogger("dshd.daemon")

KEPT_RESOLUTIONS = 64  # resolutions remembered to name who answered in a late-answer message
SHOW_INFO = 3  # LSP MessageType.Info


class HostClient:
    client_id: str
    client_name: str

    def _init_host_client(self) -> None:
        self._resolutions: OrderedDict[tuple[str, str], Resolution] = OrderedDict()
        self._told_late: OrderedDict[tuple[Any, Any], None] = OrderedDict()  # questions this client was told it lost

    # ---- the host's calls ------------------------------------------------------------

    def can_answer(self, kind: str) -> bool:
        seam = self.questions if kind == "plan-review" else self.approvals
        return seam.client_can_answer

    async def ask_questions(self, agent: Any, questions: list[dict[str, Any]]) -> list[Any]:
        return await self.questions.ask(agent, questions)

    async def ask_approval(self, request: Any) -> Any:
        return await self.approvals.ask(request)

    def follow(self, agent: Any, running: list[Any]) -> None:
        self.follow_agent(agent, running)

    def unfollow(self, agent: Any) -> None:
        self.hub.detach(agent.agent_id)

    def clients_changed(self, agent: Any, clients: list[AttachedClient]) -> None:
        listing = [{"clientId": c.client_id, "clientName": c.client_name, "you": c.you} for c in clients]
        self._host_notify("dsh/session/clients", {"agentId": agent.agent_id, "sessionId": agent.session_id, "clients": listing})

    def question_resolved(self, resolution: Resolution) -> None:
        key = (resolution.agent_id, resolution.question_id)
        self._resolutions[key] = resolution
        while len(self._resolutions) > KEPT_RESOLUTIONS:
            self._resolutions.popitem(last=False)
        self._host_notify(
            "dsh/question/resolved",
            {
                "agentId": resolution.agent_id,
                "sessionId": resolution.session_id,
                "questionId": resolution.question_id,
                "kind": resolution.kind,
                "outcome": resolution.outcome,
                "by": {"clientName": resolution.by_client_name},
            },
        )

    # ---- from the asks ---------------------------------------------------------------

    def late_answer(self, method: str, params: dict[str, Any]) -> None:
        """A reply came to an ask this connection had withdrawn: it changed nothing."""
        if method == "dsh/permission/ask":
            question_id, what = params.get("callId"), f"approval of {params.get('tool', 'a tool call')}"
        else:
            questions = params.get("questions") or [{}]
            question_id, what = questions[0].get("id"), "plan review"
        resolution = self._resolutions.get((params.get("agentId"), question_id))
        self._tell_too_late((params.get("agentId"), question_id), what, resolution)

    def answer_too_late(self, resolution: Resolution) -> None:
        """This connection answered after the winner, before its ask was withdrawn."""
        what = "plan review" if resolution.kind == "plan-review" else "approval"
        self._tell_too_late((resolution.agent_id, resolution.question_id), what, resolution)

    def _tell_too_late(self, key: tuple[Any, Any], what: str, resolution: Resolution | None) -> None:
        if key in self._told_late:
            return  # said once (the late reply and the withdrawn ask are one answer)
        self._told_late[key] = None
        while len(self._told_late) > KEPT_RESOLUTIONS:
            self._told_late.popitem(last=False)
        message = words.late_answer_text(
            what, resolution.by_client_name if resolution else None, resolution.outcome if resolution else None
        )
        logger.info("%s", message)
        self._host_notify("window/showMessage", {"type": SHOW_INFO, "message": message})

    def _host_notify(self, method: str, params: dict[str, Any]) -> None:
        try:
            self.protocol.send_notification(method, params)
        except Exception:
            logger.exception("could not send %s", method)
