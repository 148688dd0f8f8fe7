"""The approvals seam on the wire: ``dsh/permission/ask`` sent to the editor.

The request carries what the person decides on (the tool, its class, a title, the diff of
an edit, the command and folder of a run). The reply must be exactly
``{"outcome": "allow-once" | "allow-session" | "reject", "feedback"?: string}``; anything
else (and every path of asking.py: no capability, timeout, error reply, lost connection,
withdrawal) raises ``ApprovalsUnavailable`` and the tool call fails closed.
"""

from __future__ import annotations

from typing import Any

from dshd_protocol import InvalidMessage, from_wire, types as t

from dshd.agent.approvals import ApprovalAnswer, ApprovalRequest, ApprovalsUnavailable
from dshd.api.escape import shown, shown_lines
from dshd.daemon.asking import ClientAsk

ASK_METHOD = "dsh/permission/ask"


def request_params(request: ApprovalRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "agentId": request.agent_id,
        "sessionId": request.session_id,
        "callId": request.call_id,
        "tool": request.tool,
        "mutability": request.mutability,
        # What the person reads: escaped, so what they approve is what runs (api/escape.py).
        "title": shown(request.title),
    }
    for key, escape in (("diff", shown_lines), ("command", shown), ("cwd", shown)):
        value = getattr(request, key)
        if value is not None:
            params[key] = escape(value)
    return params


def parse_answer(reply: Any) -> ApprovalAnswer:
    """The reply read as strictly as params, or ApprovalsUnavailable naming what is wrong."""
    try:
        result = from_wire(t.PermissionAskResult, reply)
    except InvalidMessage as exc:
        raise ApprovalsUnavailable(f"the editor sent a malformed reply ({exc})") from None
    return ApprovalAnswer(result.outcome, result.feedback)


class WireApprovals(ClientAsk):
    def __init__(self, server) -> None:
        super().__init__(server, ASK_METHOD, "permissions", ApprovalsUnavailable, "p")

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        return parse_answer(await self.request(request_params(request)))
