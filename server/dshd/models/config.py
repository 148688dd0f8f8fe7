"""The ``[model]`` table: which model answers, and the scripted model's script.

Keys (defaults below)::

    [model]  provider = "scripted"   # "scripted" | "openai" | "anthropic"
             script = "<path>"       # scripted: relative to the workspace; no script:
                                     #   every request gets "(script exhausted)"
             model, baseUrl, apiKeyEnv, maxOutputTokens, contextWindow, timeoutS = 120,
             maxRetries = 2          # real providers

The script is read and checked at load time (the composed config's ``scriptReplies``,
not a key), so that a malformed script fails start-up naming ``model.script``.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from dshd.config_tables import ConfigTable, Derived, Table, config_error
from dshd.tools import safepath
from dshd.tools.paths import PathRefused

Provider = Literal["scripted", "openai", "anthropic"]


class ModelConfig(Table):
    provider: Provider = "scripted"
    script: str | None = None  # scripted only
    # Real providers (openai, anthropic). The key itself never appears in config: only the
    # name of the environment variable that holds it.
    model: str | None = None
    baseUrl: str | None = None
    apiKeyEnv: str | None = None  # default OPENAI_API_KEY / ANTHROPIC_API_KEY
    maxOutputTokens: int | None = None
    contextWindow: int | None = None  # tokens
    timeoutS: float = 120.0
    maxRetries: int = 2


class ScriptToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    arguments: dict[str, Any] = {}


class ScriptUsage(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    inputTokens: int
    outputTokens: int
    cachedInputTokens: int | None = None  # the part of inputTokens "read from a prompt cache"


class ScriptReply(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    text: str | None = None
    toolCalls: list[ScriptToolCall] = []
    delayMs: int = 0
    usage: ScriptUsage | None = None  # reported as the provider's usage of that request


class Script(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    replies: list[ScriptReply]


class ModelSettings(Protocol):
    """What the model registry and the doctor read of the composed config."""

    model: ModelConfig
    scriptReplies: list[ScriptReply]


def check_model(model: ModelConfig) -> None:
    if model.provider != "scripted" and not (model.model or "").strip():
        raise config_error("model.model", f"provider {model.provider!r} needs a model name")
    if model.provider != "scripted" and model.script is not None:
        raise config_error("model.script", "only the scripted provider reads a script")
    for key in ("maxOutputTokens", "contextWindow"):
        value = getattr(model, key)
        if value is not None and value < 1:
            raise config_error(f"model.{key}", "must be at least 1")
    if not model.timeoutS > 0:
        raise config_error("model.timeoutS", "must be more than 0 seconds")
    if model.maxRetries < 0:
        raise config_error("model.maxRetries", "must be 0 or more")


SCRIPT_CAP = 16 * 1024 * 1024  # bytes of a scripted model's script


def load_script(path: Path, inside: Path | None = None) -> list[ScriptReply]:
    """Read and check a scripted-model file; any fault is invalid-config ``model.script``.
    ``inside``: the workspace the file must be in (a relative path, or one the workspace's
    own config names); it is then read through directory handles. Either way it must be a
    regular file of at most :data:`SCRIPT_CAP` bytes, and no more than that is read."""
    try:
        raw = safepath.read_by_name(path, SCRIPT_CAP) if inside is None else safepath.read_inside(inside, path, SCRIPT_CAP)
    except PathRefused as exc:
        where = " inside the workspace" if inside is not None else ""
        raise config_error(
            "model.script",
            f"{path} was not read: {exc} (a script must be a regular file{where} of at most {safepath.human(SCRIPT_CAP)})",
        ) from None
    except OSError as exc:
        raise config_error("model.script", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        script = msgspec.json.decode(raw, type=Script, strict=True)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise config_error("model.script", f"{path}: {exc}") from exc
    for index, reply in enumerate(script.replies):
        if reply.delayMs < 0:
            raise config_error("model.script", f"{path}: replies[{index}].delayMs is negative")
        if reply.usage is not None and min(reply.usage.inputTokens, reply.usage.outputTokens, reply.usage.cachedInputTokens or 0) < 0:
            raise config_error("model.script", f"{path}: replies[{index}].usage has a negative count")
    return list(script.replies)


def _script_replies(model: ModelConfig, workspace: Path | None, workspace_keys: Collection[str]) -> list[ScriptReply]:
    """The script's replies; a script the workspace's own config names must be inside the
    workspace even when the path is absolute (a relative one always is)."""
    if model.script is None:
        return []
    if not model.script.strip():
        raise config_error("model.script", "must be a non-blank path")
    script_path = Path(model.script)
    inside = None
    if not script_path.is_absolute():
        if workspace is None:
            raise config_error("model.script", "a relative path needs a workspace")
        inside = workspace
    elif "model.script" in workspace_keys and workspace is not None:
        inside = workspace
    return load_script(script_path, inside)


TABLE = ConfigTable(
    "model",
    ModelConfig,
    check=check_model,
    derived=(Derived("scriptReplies", list[ScriptReply], [], _script_replies),),
)
