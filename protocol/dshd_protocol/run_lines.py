"""The lines `dshd run --json` prints, and their JSON Schema (draft 2020-12).

    python -m dshd_protocol.run_lines           # rewrite the checked-in dshd-run.schema.json
    python -m dshd_protocol.run_lines --check   # exit 1 when the checked-in file is stale

One JSON object a line on stdout: a ``session`` line first, then every chat item as the
``dsh/chat/item`` notification carries it (under ``type: "item"``), then one ``result``
line last. The chat items and the goal are the wire types editors get, so the
schema reuses their definitions (:mod:`dshd_protocol.schema` builds both documents).
"""

# No `from __future__ import annotations`: the schema builder reads real type objects.
import json
from pathlib import Path
from typing import Any, Literal

import attrs

from .schema import DIALECT, _Builder, write_or_check
from .types import AgentId, ChatItem, GoalView, NonBlankText, NonNegativeInt, SessionId

RUN_SCHEMA_PATH = Path(__file__).with_name("dshd-run.schema.json")
REGENERATE = "./run protocol"  # also python -m dshd_protocol.run_lines


@attrs.frozen(kw_only=True)
class RunSessionLine:
    """The first line: the session the run works in, and where the run goes: ``daemon``
    (the workspace's shared daemon: attached editors watch it) or ``in-process``."""

    type: Literal["session"]
    session_id: SessionId
    agent_id: AgentId
    workspace: str
    via: Literal["in-process", "daemon"]


@attrs.frozen(kw_only=True)
class RunItemLine:
    """One chat item as ``dsh/chat/item`` carries it: a streaming item comes again, with
    the same ``id``, each time it grows, until it is no longer ``partial``."""

    type: Literal["item"]
    item: ChatItem


@attrs.frozen(kw_only=True)
class RunUsage:
    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cached_input_tokens: NonNegativeInt | None = None  # of inputTokens, read from a prompt cache (when any)
    estimated: bool | None = None  # only ever true when present: some counts are characters/4


@attrs.frozen(kw_only=True)
class RunError:
    """Why the run failed (exit 1): an error kind (the wire's, ``timeout``, or a model
    error's: ``auth``, ``rate-limit``, ...), what to do, and the error's data."""

    __dsh_open__ = True  # the error's data fields ride beside kind and message
    kind: NonBlankText
    message: str


@attrs.frozen(kw_only=True)
class RunPersonNeeded:
    """Something only a person could have done: a ``permission`` refused for want of one
    (``callId``, ``tool``), or a ``plan-review`` nobody gave (``questionId``, ``title``)."""

    kind: Literal["permission", "plan-review"]
    call_id: str | None = None
    tool: str | None = None
    question_id: str | None = None
    title: str | None = None


@attrs.frozen(kw_only=True)
class RunResultLine:
    """The last line. ``exitCode`` is the process's exit status; ``stopReason`` the last
    turn's (null when no turn ran); ``goal`` the session's goal at the end; ``plan`` the
    plan that waits for a person's review. ``sessionId`` is null only when the run failed
    before it had a session (then this is the only line)."""

    type: Literal["result"]
    stop_reason: str | None
    goal: GoalView | None = None
    usage: RunUsage
    duration_ms: NonNegativeInt
    session_id: SessionId | None
    exit_code: Literal[0, 1, 2, 3, 4, 130]
    error: RunError | None = None
    person_needed: list[RunPersonNeeded] | None = None
    plan: str | None = None


LINE_TYPES = (RunSessionLine, RunItemLine, RunResultLine)


class _RunBuilder(_Builder):
    def of(self, tp: Any) -> dict[str, Any]:
        # The base builder knows string literals only; the exit code is a literal of ints.
        args = getattr(tp, "__args__", ())
        if getattr(tp, "__origin__", None) is Literal and args and all(isinstance(a, int) for a in args):
            return {"type": "integer", "enum": list(args)}
        return super().of(tp)


def build_run_schema() -> dict[str, Any]:
    builder = _RunBuilder()
    lines = [builder.ref(cls) for cls in LINE_TYPES]
    return {
        "$schema": DIALECT,
        "$id": "urn:dshd:run-lines:v1",
        "title": "dshd run --json: one line",
        "description": f"Generated from dshd_protocol.run_lines; regenerate with `{REGENERATE}`. "
        "Every line of stdout is one of these; the first is a session line, the last a result line.",
        "oneOf": lines,
        "$defs": dict(sorted(builder.defs.items())),
    }


def render_run_schema() -> str:
    return json.dumps(build_run_schema(), indent=2, ensure_ascii=False) + "\n"


def load_run_schema() -> dict[str, Any]:
    return json.loads(RUN_SCHEMA_PATH.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    return write_or_check(RUN_SCHEMA_PATH, render_run_schema(), "dshd_protocol.run_lines", argv)


if __name__ == "__main__":
    raise SystemExit(main())
