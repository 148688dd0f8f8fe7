"""Plain dshd values -> ACP values, and ACP prompt blocks -> the text of a user message.

The ACP door's one converter (as daemon/to_wire.py is the LSP door's): only this package
knows ACP's shapes; the core hands over plan views, goal views and stop reasons with
snake_case names, as it does to the LSP door.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import attrs

from acp.schema import (
    ConfigOptionUpdate,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfoUpdate,
    SessionMode,
    SessionModeState,
    TextContentBlock,
    TextResourceContents,
    Usage,
)

from dshd.agent.config_layers import LoadedConfig
from dshd.api.words import goal_words
from dshd.errors import DshError
from dshd.services.goals import GoalView
from dshd.services.plan_mode import PlanView

# ---- plan mode as ACP session modes (and the `mode` config option kept in step) ------

DEFAULT_MODE = "default"
PLAN_MODE = "plan"
MODE_CONFIG_ID = "mode"
_MODES = (
    (DEFAULT_MODE, "Default", "Work on the task: the agent may change files and run commands."),
    (PLAN_MODE, "Plan", "Plan first: the agent investigates and presents a plan for you to approve before changing files."),
)


def mode_id(active: bool) -> str:
    return PLAN_MODE if active else DEFAULT_MODE


def plan_active(mode: str, field: str) -> bool:
    """The plan-mode choice a mode id stands for; another id is invalid-params."""
    if mode == PLAN_MODE:
        return True
    if mode == DEFAULT_MODE:
        return False
    raise DshError("invalid-params", f"unknown mode {mode!r}: the modes are {DEFAULT_MODE!r} and {PLAN_MODE!r}", field=field)


def mode_state(active: bool) -> SessionModeState:
    return SessionModeState(
        current_mode_id=mode_id(active),
        available_modes=[SessionMode(id=i, name=n, description=d) for i, n, d in _MODES],
    )


def config_options(active: bool) -> list[SessionConfigOptionSelect]:
    return [
        SessionConfigOptionSelect(
            type="select",
            id=MODE_CONFIG_ID,
            name="Mode",
            category="mode",
            description="Plan mode: plan first, change files only after you approve the plan.",
            current_value=mode_id(active),
            options=[SessionConfigSelectOption(value=i, name=n, description=d) for i, n, d in _MODES],
        )
    ]


def mode_updates(active: bool) -> list[Any]:
    """What a client hears when the recorded plan state changes: the mode, then the
    config option that mirrors it."""
    return [
        CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id(active)),
        ConfigOptionUpdate(session_update="config_option_update", config_options=config_options(active)),
    ]


# ---- goals --------------------------------------------------------------------------

GOAL_ACTIONS = ("set", "pause", "resume", "clear", "complete", "block", "edit")
GOAL_CONTROL_METHOD = "_session/goal"


def config_meta(loaded: LoadedConfig) -> dict[str, Any]:
    """``initialize`` result ``_meta.dsh``: trust and the config keys left out (ACP has no
    ``dsh/config/get``), each ignored key as the LSP door lists it."""
    ignored = [{"file": item.file, "key": item.key, "why": item.why} for item in loaded.ignored]
    return {"trusted": loaded.trusted, "ignored": ignored}


def goal_capability() -> dict[str, Any]:
    """``initialize`` result ``_meta.goal``: how a client drives goals."""
    return {"version": 1, "controlMethod": GOAL_CONTROL_METHOD, "actions": list(GOAL_ACTIONS)}


def goal_meta(view: GoalView | None) -> dict[str, Any] | None:
    """The goal as a client sees it (``_meta.goal``): the same fields and words as the LSP
    door's GoalView (id, revision, objective, phase, maxRounds, roundsStarted, roundsLeft,
    tokensUsed, createdAt, updatedAt, activation, blockedReason?, maxTokens?, waitingFor?, tokensEstimated?, then status
    and actions); None when there is none. Built here from the core's GoalView."""
    if view is None:
        return None
    out: dict[str, Any] = {
        "id": view.id,
        "revision": view.revision,
        "objective": view.objective,
        "phase": view.phase,
        "maxRounds": view.max_rounds,
        "roundsStarted": view.rounds_started,
        "roundsLeft": view.rounds_left,
        "tokensUsed": view.tokens_used,
        "createdAt": view.created_at,
        "updatedAt": view.updated_at,
        "activation": view.activation,
    }
    if view.blocked_reason is not None:
        out["blockedReason"] = {"code": view.blocked_reason.code, "message": view.blocked_reason.message}
    if view.max_tokens is not None:
        out["maxTokens"] = view.max_tokens
    if view.waiting_for is not None:
        out["waitingFor"] = view.waiting_for
    if view.tokens_estimated:
        out["tokensEstimated"] = True
    out["status"], out["actions"] = goal_words(view)
    return out


def plan_meta(view: PlanView) -> dict[str, Any]:
    """Plan mode as ``_meta.dsh`` carries it: ``{active, pending?}``."""
    out: dict[str, Any] = {"active": view.active}
    if view.pending is not None:
        out["pending"] = view.pending
    return out


def goal_update(view: Any, op: str | None = None, revision: int | None = None) -> SessionInfoUpdate:
    """``session_info_update`` whose ``_meta.goal`` is the goal now (null after clear);
    ``_meta.goalChange`` says what changed (op, revision) when something did."""
    meta: dict[str, Any] = {"goal": goal_meta(view)}
    if op is not None:
        meta["goalChange"] = {"op": op, "revision": revision}
    return SessionInfoUpdate(session_update="session_info_update", field_meta=meta)


# ---- turns --------------------------------------------------------------------------

# dshd stop reason -> ACP StopReason. "model-error" and "error" are JSON-RPC errors.
STOP_REASONS = {
    "end-turn": "end_turn",
    "command": "end_turn",  # a /command that opened no turn
    "cancelled": "cancelled",
    "max-steps": "max_turn_requests",
    "rejected": "refusal",
}


# A reply cut at ``[model] maxOutputTokens`` (turn/close error kind "output-limit"):
# ACP's own stop reason for it, not an error.
OUTPUT_LIMIT = "output-limit"
OUTPUT_LIMIT_STOP = "max_tokens"


@attrs.define
class TurnUsage:
    """A turn's tokens: its model calls' usage (the log's ``assistant/message.usage``) summed."""

    input: int = 0
    cached_input: int = 0
    output: int = 0
    estimated: bool = False  # some call reported none: counted as characters/4

    def add(self, usage: dict[str, Any]) -> None:
        self.input += _count(usage.get("inputTokens"))
        self.cached_input += _count(usage.get("cachedInputTokens"))
        self.output += _count(usage.get("outputTokens"))
        self.estimated = self.estimated or usage.get("estimated") is True


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def prompt_usage(total: TurnUsage | None) -> Usage | None:
    """``PromptResponse.usage`` for the turn: ACP's token fields, and ``_meta.dsh.estimated``
    when some of it is an estimate (the provider reported no usage)."""
    if total is None:
        return None
    return Usage(
        input_tokens=total.input,
        output_tokens=total.output,
        cached_read_tokens=total.cached_input or None,
        total_tokens=total.input + total.output,
        field_meta={"dsh": {"estimated": True}} if total.estimated else None,
    )


# ---- prompt blocks ------------------------------------------------------------------


def prompt_text(blocks: list[Any], root: Path) -> str:
    """The user message for a prompt: text blocks as they are, a resource link as a
    markdown link, an embedded text resource as a link in place plus its text in a
    ``<context>`` section after the message. Images, audio and binary resources are
    refused (``promptCapabilities`` says so)."""
    parts: list[str] = []
    contexts: list[str] = []
    for i, block in enumerate(blocks):
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name or _display(block.uri, root)}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if not isinstance(resource, TextResourceContents):
                raise DshError(
                    "invalid-params",
                    "binary resources are not supported: send text, or a resource_link",
                    field=f"prompt[{i}].resource",
                )
            parts.append(f"[{_display(resource.uri, root)}]({resource.uri})")
            contexts.append(f'<context uri="{resource.uri}">\n{resource.text}\n</context>')
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise DshError(
                "invalid-params",
                f"{kind} content is not supported (see promptCapabilities): send text or resources",
                field=f"prompt[{i}]",
            )
    text = join_blocks(parts)
    if contexts:
        text = (text + "\n\n" if text.strip() else "") + "\n\n".join(contexts)
    if not text.strip():
        raise DshError("invalid-params", "the prompt has no text", field="prompt")
    return text


def join_blocks(parts: list[str]) -> str:
    """Adjacent blocks joined so their words never run together: a line break between two
    blocks unless one of them already has white space at the seam ("Look at " + a link
    stays one line; a link + "file ..." does not become "...client.pyfile ...")."""
    text = ""
    for part in parts:
        if text and part and not text[-1].isspace() and not part[0].isspace():
            text += "\n"
        text += part
    return text


def _display(uri: str, root: Path) -> str:
    """A file URI inside the workspace as its relative path; anything else as it is."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = Path(unquote(parsed.path))
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
