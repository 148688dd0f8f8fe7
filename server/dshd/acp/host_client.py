"""An ACP connection as the host's client (dshd.api.host.Client).

:class:`AcpHostClient` is mixed into the door (one per connection). ACP has a way to ask
(``session/request_permission``, for plan reviews and approvals alike) but no
notification for who else is attached or for a question answered elsewhere: when another
client answers first, this connection's chat gets the word as an agent message ("Answered
in Neovim 2: allowed once"), then the host withdraws its ask and the peer cancels the
client's request with ``$/cancel_request`` (peer.py), which closes its prompt.
"""

from __future__ import annotations

import logging
from typing import Any

from dshd.api import words

log = logging.getLogger("dshd.acp")


class AcpHostClient:
    client_id: str
    client_name: str

    def can_answer(self, kind: str) -> bool:
        # Every ACP client answers session/request_permission (plan reviews ride on it too).
        return self._questions is not None

    async def ask_questions(self, agent: Any, questions: list[dict[str, Any]]) -> list[Any]:
        return await self._questions.ask(agent, questions)

    async def ask_approval(self, request: Any) -> Any:
        return await self._approvals.ask(request)

    def follow(self, agent: Any, running: list[Any]) -> None:
        self.hub.attach(agent)  # ACP shows no chat items: the running turn's deltas are not needed

    def unfollow(self, agent: Any) -> None:
        self.hub.detach(agent.agent_id)

    def clients_changed(self, agent: Any, clients: list[Any]) -> None:
        others = [c.client_name for c in clients if not c.you]
        log.info("session %s: attached with %s", agent.session_id, ", ".join(others) or "no other client")

    def question_resolved(self, resolution: Any) -> None:
        log.info(
            "session %s: %s %s answered %s by %s",
            resolution.session_id, resolution.kind, resolution.question_id, resolution.outcome, resolution.by_client_name,
        )
        if resolution.by_client_name == self.client_name:
            return  # its own answer: its prompt closed on it
        live = self.sessions.get(resolution.session_id)
        if live is not None:  # before its request is withdrawn: the word, then the cancel
            what = "Plan review" if resolution.kind == "plan-review" else "Approval"
            said = words.OUTCOME_WORDS.get(resolution.outcome, resolution.outcome)
            live.send_text(f"\n\n{what} answered in {resolution.by_client_name}: {said}.\n")

    def answer_too_late(self, resolution: Any) -> None:
        # ACP has no message for it: the client's choice simply changed nothing.
        log.info("session %s: a late answer to %s %s changed nothing", resolution.session_id, resolution.kind, resolution.question_id)
