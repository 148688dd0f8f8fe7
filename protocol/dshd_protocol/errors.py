"""Error kinds of the wire protocol (SPEC section 6) and their JSON-RPC codes.

Every error the daemon answers with is a JSON-RPC error
``{"code": ERROR_CODES[kind], "message": <for people>, "data": {"kind": kind, ...}}``.
Clients act on ``data.kind`` (stable) and the fields in :data:`ERROR_DATA_FIELDS`;
``code`` only lets generic JSON-RPC clients tell the classes apart.

This is the one list of error kinds: ``dshd.errors`` imports it (standard library only,
so the core may), and it imports nothing of ``dshd``: the protocol package stands alone
for editors' tooling.
"""

from __future__ import annotations

from typing import Any

ERROR_KINDS: tuple[str, ...] = (
    "invalid-params",
    "unknown-agent",
    "stale-agent",
    "stale-revision",
    "invalid-transition",
    "no-goal",
    "budget-exhausted",
    "plugin-not-loaded",
    "invalid-config",
    "replay-failed",
    "session-locked",
    "turn-open",
    "unsafe-path",
    "io-error",
    "person-changed",
)

# JSON-RPC's own code for bad params; the domain errors take -32001, -32002, ... in
# the order above, inside the range JSON-RPC leaves to servers (-32000..-32099).
INVALID_PARAMS_CODE = -32602
ERROR_CODES: dict[str, int] = {"invalid-params": INVALID_PARAMS_CODE} | {
    kind: -32000 - n for n, kind in enumerate(ERROR_KINDS[1:], start=1)
}

# The fields `data` carries besides "kind", with their JSON types. The daemon may add
# fields; clients must ignore the ones they do not know.
ERROR_DATA_FIELDS: dict[str, dict[str, Any]] = {
    "invalid-params": {"field": str},
    "unknown-agent": {},
    "stale-agent": {},
    # current: the goal's revision (SPEC 6); with goalId, the ref to retry with
    "stale-revision": {"current": int, "goalId": str},
    "invalid-transition": {"phase": str},
    "no-goal": {},
    "budget-exhausted": {},
    # plugin: the name to add to `plugins` in .dsh/config.toml ("plan", "goals", "checkpoints", ...)
    "plugin-not-loaded": {"plugin": str},
    "invalid-config": {"key": str, "file": str},  # file: the path, or "initializationOptions.config"
    "replay-failed": {"seq": int | None, "line": int, "reason": str},
    "session-locked": {"pid": int},
    "turn-open": {},
    "unsafe-path": {"path": str, "reason": str},
    "io-error": {"path": str, "errno": str},
    # paths: the workspace files a checkpoint restore would overwrite that the person
    # changed since the agent's last step (restore again with force to overwrite them)
    "person-changed": {"paths": list[str]},
}


def jsonrpc_error(kind: str, message: str, **data: Any) -> dict[str, Any]:
    """The JSON-RPC ``error`` object for a domain error (``DshError`` maps 1:1 onto it)."""
    if kind not in ERROR_CODES:
        raise ValueError(f"unknown error kind {kind!r}")
    return {"code": ERROR_CODES[kind], "message": message, "data": {"kind": kind, **data}}


class InvalidMessage(ValueError):
    """A wire value that does not fit its type. ``field`` is the path of the first wrong
    value (``ref.revision``, ``questions[0].id``; ``params``/``result`` for the whole)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidParams(InvalidMessage):
    """Bad params of a request or notification: JSON-RPC -32602, kind ``invalid-params``."""

    kind = "invalid-params"
    code = INVALID_PARAMS_CODE

    def to_jsonrpc_error(self) -> dict[str, Any]:
        return jsonrpc_error(self.kind, str(self), field=self.field)
