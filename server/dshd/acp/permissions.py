"""The approvals seam on the ACP door: a tool call that needs the person's yes is a
``session/request_permission`` on that call (its ``tool_call`` update, with the diff or
the command, was sent when the call was committed), with three options:

    Allow                   (optionId "allow-once", kind allow_once)       -> allow-once
    Allow for this session  (optionId "allow-session", kind allow_always)  -> allow-session
    Reject                  (optionId "reject", kind reject_once)          -> reject

"Allow for this session" covers that tool for this agent, in this process only (a
restart asks again). ACP carries no feedback with a rejection. An option dshd did not
offer, and every way the request can end without a choice (asking.py), reject the call:
it fails closed and changes nothing.
"""

from __future__ import annotations

from acp.schema import PermissionOption, ToolCallUpdate

from dshd.acp.asking import PermissionAsk
from dshd.acp.updates import text
from dshd.agent.approvals import ApprovalAnswer, ApprovalRequest, ApprovalsUnavailable
from dshd.api.escape import shown

APPROVAL_OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow-session", name="Allow for this session", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]
_OUTCOMES = {option.option_id for option in APPROVAL_OPTIONS}


class AcpApprovals(PermissionAsk):
    unavailable = ApprovalsUnavailable

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        tool_call = ToolCallUpdate(
            tool_call_id=request.call_id,
            title=shown(request.title),  # escaped: what the person approves is what runs
            # A command in full (a title may show only its first line), escaped likewise.
            content=[text(shown(request.command))] if request.command is not None else None,
            kind=request.kind,  # the tool's own (Tool.describe)
            status="pending",
        )
        option = await self.choose(request.session_id, tool_call, APPROVAL_OPTIONS, what=f"approval of {request.tool}")
        if option not in _OUTCOMES:
            raise ApprovalsUnavailable(f"the client chose {option!r}, which was not offered")
        return ApprovalAnswer(option)  # type: ignore[arg-type]
