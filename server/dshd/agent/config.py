"""Configuration (SPEC section 7): built-in defaults <- ``<workspace>/.dsh/config.toml``
<- the client's overrides (``initializationOptions.config``, same shape).

Layers are merged table by table (a key set in a later layer replaces that key only).
The merged result is checked strictly by msgspec against :class:`Config`: an unknown key,
a wrong type (a string is never read as a number or a bool) or a bad value is
``DshError("invalid-config", key="<dotted.key>")``. Nothing is ignored.

Keys (all optional; defaults in :data:`DEFAULTS`)::

    plugins = ["plan", "goals"]      # plugins loaded by name (dshd.plugins.<name>)
    [plan]   section = "<text>"      # the plan:policy prompt text, verbatim (PM-2, PM-3)
    [goals]  maxRounds = 256         # default round budget of a new goal (G-9)
    [model]  provider = "scripted"   # the only provider so far
             script = "<path>"       # relative to the workspace; no script: every
                                     #   request gets "(script exhausted)"
    [agent]  maxSteps = 32           # steps per turn before it closes with "max-steps"
             maxStepRetries = 3      # re-proposals of a rejected step before "rejected"

The built-in defaults carry a plan section text so that a workspace without a config
file works. A deployment that writes a ``[plan]`` table (in the file or the overrides)
owns the text: that table must have ``section``; a missing, blank or non-string
``section`` or an unknown key in ``[plan]`` fails at start-up naming the key (PM-3).
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from dshd.errors import DshError

KNOWN_PLUGINS = ("plan", "goals")

DEFAULT_PLAN_SECTION = (
    "Plan mode is on. Investigate and plan first; do not change files yet. "
    "When the plan is ready, call exit_plan_mode with the full plan in markdown, "
    "starting with a # heading, so the person can review it."
)


class _Table(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class PlanConfig(_Table):
    section: str = DEFAULT_PLAN_SECTION


class GoalsConfig(_Table):
    maxRounds: int = 256


class ModelConfig(_Table):
    provider: Literal["scripted"] = "scripted"
    script: str | None = None


class AgentConfig(_Table):
    maxSteps: int = 32
    maxStepRetries: int = 3


class ScriptToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    arguments: dict[str, Any] = {}


class ScriptReply(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    text: str | None = None
    toolCalls: list[ScriptToolCall] = []
    delayMs: int = 0


class Script(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    replies: list[ScriptReply]


class Config(_Table):
    plugins: list[str] = msgspec.field(default_factory=lambda: ["plan", "goals"])
    plan: PlanConfig = PlanConfig()
    goals: GoalsConfig = GoalsConfig()
    model: ModelConfig = ModelConfig()
    agent: AgentConfig = AgentConfig()
    # Not a config key: the scripted model's replies, read and checked at load time so
    # that a malformed script fails start-up (key "model.script"), not the first turn.
    scriptReplies: list[ScriptReply] = []


DEFAULTS: dict[str, Any] = msgspec.to_builtins(Config())
del DEFAULTS["scriptReplies"]

# msgspec reports where a value failed as "... - at `$.plan.section`" (or `$.plugins[1]`).
_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN_RE = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`")


def _key_of(error: msgspec.ValidationError) -> str:
    message = str(error)
    match = _PATH_RE.search(message)
    path = match.group("path") if match else ""
    path = re.sub(r"\[\d+\]", "", path).lstrip(".")
    unknown = _UNKNOWN_RE.match(message)
    if unknown:
        path = f"{path}.{unknown.group('field')}" if path else unknown.group("field")
    return path or "config"


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _invalid(key: str, message: str) -> DshError:
    return DshError("invalid-config", f"invalid config {key}: {message}", key=key)


def _check_values(config: Config) -> None:
    if not config.plan.section.strip():
        raise _invalid("plan.section", "must be non-blank text")
    if config.goals.maxRounds < 1:
        raise _invalid("goals.maxRounds", "must be at least 1")
    if config.agent.maxSteps < 1:
        raise _invalid("agent.maxSteps", "must be at least 1")
    if config.agent.maxStepRetries < 0:
        raise _invalid("agent.maxStepRetries", "must be 0 or more")
    for name in config.plugins:
        if name not in KNOWN_PLUGINS:
            raise _invalid("plugins", f"unknown plugin {name!r} (known: {', '.join(KNOWN_PLUGINS)})")
    if len(set(config.plugins)) != len(config.plugins):
        raise _invalid("plugins", "a plugin is listed twice")


def load_script(path: Path) -> list[ScriptReply]:
    """Read and check a scripted-model file; any fault is invalid-config ``model.script``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _invalid("model.script", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        script = msgspec.json.decode(raw, type=Script, strict=True)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _invalid("model.script", f"{path}: {exc}") from exc
    for index, reply in enumerate(script.replies):
        if reply.delayMs < 0:
            raise _invalid("model.script", f"{path}: replies[{index}].delayMs is negative")
    return list(script.replies)


def parse_config(data: dict[str, Any], workspace: Path | None = None) -> Config:
    """Check one merged config mapping (defaults already applied or not)."""
    if not isinstance(data, dict):
        raise _invalid("config", "must be a table/object")
    try:
        config = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        key = _key_of(exc)
        raise _invalid(key, str(exc)) from exc
    if "scriptReplies" in data:
        raise _invalid("scriptReplies", "unknown key")
    _check_values(config)
    if config.model.script is not None:
        if not config.model.script.strip():
            raise _invalid("model.script", "must be a non-blank path")
        script_path = Path(config.model.script)
        if not script_path.is_absolute():
            if workspace is None:
                raise _invalid("model.script", "a relative path needs a workspace")
            script_path = workspace / script_path
        config = msgspec.structs.replace(config, scriptReplies=load_script(script_path))
    return config


def _check_plan_table(layer: dict[str, Any]) -> None:
    plan = layer.get("plan")
    # An unknown key is reported by the strict check instead (it names that key).
    if isinstance(plan, dict) and "section" not in plan and set(plan) <= {"section"}:
        raise _invalid("plan.section", "a [plan] table must set section (the plan:policy text)")


def load_config(workspace: Path, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults <- ``<workspace>/.dsh/config.toml`` <- ``overrides``; strict."""
    merged = copy.deepcopy(DEFAULTS)
    config_file = workspace / ".dsh" / "config.toml"
    if config_file.exists():
        try:
            from_file = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise _invalid("config.toml", f"{config_file}: {exc}") from exc
        _check_plan_table(from_file)
        merged = _merge(merged, from_file)
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise _invalid("config", "client overrides must be an object")
        _check_plan_table(overrides)
        merged = _merge(merged, overrides)
    return parse_config(merged, workspace)
