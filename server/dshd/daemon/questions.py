"""The user-questions seam on the wire: ``dsh/questions/ask`` sent to the editor.

Fail-closed on every path (see asking.py): no capability, a lost connection, a timeout,
the turn cancelled (withdrawn with ``$/cancelRequest``), an error reply, or a reply that
is not ``{"answers": [...]}`` all raise ``QuestionsUnavailable``; the plan tool turns
that into "keep planning".
"""

from __future__ import annotations

from typing import Any

from dshd.agent.questions import QuestionsUnavailable
from dshd.api.escape import shown, shown_lines
from dshd.daemon.asking import ClientAsk

ASK_METHOD = "dsh/questions/ask"

__all__ = ["ASK_METHOD", "WireQuestions"]


def _shown(question: dict[str, Any]) -> dict[str, Any]:
    """A question as the person reads it: a plan review's title and plan escaped (the plan
    keeps its lines, so a comment's line number still names the plan's line)."""
    out = dict(question)
    if isinstance(out.get("title"), str):
        out["title"] = shown(out["title"])
    if isinstance(out.get("plan"), str):
        out["plan"] = shown_lines(out["plan"])
    previous = out.get("previous")
    if isinstance(previous, dict):  # P-23: the plan sent back before this one, as read
        shown_previous = dict(previous)
        for key, escape in (("title", shown), ("markdown", shown_lines), ("feedback", shown_lines)):
            if isinstance(previous.get(key), str):
                shown_previous[key] = escape(previous[key])
        if isinstance(previous.get("comments"), list):
            shown_previous["comments"] = [{**c, "text": shown_lines(c["text"])} for c in previous["comments"]]
        out["previous"] = shown_previous
    return out


class WireQuestions(ClientAsk):
    def __init__(self, server) -> None:
        super().__init__(server, ASK_METHOD, "questions", QuestionsUnavailable, "q")

    async def ask(self, agent, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        params = {"agentId": agent.agent_id, "sessionId": agent.session_id, "questions": [_shown(q) for q in questions]}
        reply = await self.request(params)
        if not isinstance(reply, dict) or not isinstance(reply.get("answers"), list):
            raise QuestionsUnavailable("the editor sent a malformed reply: expected {\"answers\": [...]}")
        return reply["answers"]
