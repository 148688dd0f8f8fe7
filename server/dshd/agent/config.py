"""Configuration: the keys, their defaults, and the strict check of one mapping.

Where the mappings come from (built-in defaults < user config < workspace config <
the editor's settings) and which keys a workspace may set without being trusted is
:mod:`dshd.agent.config_layers`. Here: a mapping is checked strictly by msgspec against
:class:`Config`: an unknown key, a wrong type (a string is never read as a number or a
bool) or a bad value is ``DshError("invalid-config", key="<dotted.key>", file=...)``.
Nothing is ignored.

Keys (all optional; defaults in :data:`DEFAULTS`)::

    plugins = ["plan", "goals", "tools"]  # plugins loaded by name (dshd.plugins.<name>)
    [plan]   section = "<text>"      # the plan:policy prompt text, verbatim (PM-2, PM-3)
    [goals]  maxRounds = 256         # default round budget of a new goal (G-9)
    [model]  provider = "scripted"   # "scripted" | "openai" | "anthropic"
             script = "<path>"       # scripted: relative to the workspace; no script:
                                     #   every request gets "(script exhausted)"
             model, baseUrl, apiKeyEnv, maxOutputTokens, contextWindow, timeoutS = 120,
             maxRetries = 2          # real providers
    [goals]  maxTokens               # default token budget of a new goal (optional)
    [tools]  sandbox = "workspace-write", network = false, approve = ["write", "exec"]
             env = []                # more variables for commands (user config only)
             maxWriteBytes = 8388608 # bytes write_file/edit_file may write at most
    [context] compactAt = 0.8
    [trust]  folders = []            # trusted workspaces (user config)
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
from pathlib import Path
from typing import Any, Literal

import msgspec

from dshd.errors import DshError
from dshd.tools import safepath
from dshd.tools.paths import PathRefused

KNOWN_PLUGINS = ("plan", "goals", "tools")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

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
    maxTokens: int | None = None  # default token budget of a new goal (none: unlimited)


Provider = Literal["scripted", "openai", "anthropic"]


class ModelConfig(_Table):
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


Sandbox = Literal["read-only", "workspace-write", "full-access"]
Mutability = Literal["read", "write", "exec"]


class ToolsConfig(_Table):
    sandbox: Sandbox = "workspace-write"
    network: bool = False
    approve: list[Mutability] = msgspec.field(default_factory=lambda: ["write", "exec"])
    # Names of variables passed on to commands besides the allowlist (user config only).
    env: list[str] = msgspec.field(default_factory=list)
    maxWriteBytes: int = 8 * 1024 * 1024  # what write_file/edit_file may write at most


class ContextConfig(_Table):
    compactAt: float = 0.8  # share of [model] contextWindow that triggers a compaction


class TrustConfig(_Table):
    folders: list[str] = []  # workspaces trusted for guarded keys (user config only)


class AgentConfig(_Table):
    maxSteps: int = 32
    maxStepRetries: int = 3


class ScriptToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    arguments: dict[str, Any] = {}


class ScriptUsage(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    inputTokens: int
    outputTokens: int


class ScriptReply(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    text: str | None = None
    toolCalls: list[ScriptToolCall] = []
    delayMs: int = 0
    usage: ScriptUsage | None = None  # reported as the provider's usage of that request


class Script(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    replies: list[ScriptReply]


class Config(_Table):
    plugins: list[str] = msgspec.field(default_factory=lambda: ["plan", "goals", "tools"])
    plan: PlanConfig = PlanConfig()
    goals: GoalsConfig = GoalsConfig()
    model: ModelConfig = ModelConfig()
    agent: AgentConfig = AgentConfig()
    tools: ToolsConfig = ToolsConfig()
    context: ContextConfig = ContextConfig()
    trust: TrustConfig = TrustConfig()
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


def merge_tables(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_tables(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def config_error(key: str, message: str, file: str | None = None) -> DshError:
    """``invalid-config`` naming the dotted ``key`` and, when known, the ``file`` that set it
    (in ``data``: editors say where in their own words, and open the file at the key)."""
    data = {"key": key, "file": file} if file else {"key": key}
    error = DshError("invalid-config", f"invalid config {key}: {message}", **data)
    error.detail = message  # type: ignore[attr-defined]  # the message without key and file
    return error


def check_layer(layer: Any, file: str) -> None:
    """Check one layer on its own (a config file, or the editor's settings): every key is
    known and every value has the right type. Value rules are checked on the merged
    result (:func:`parse_config`), since a later layer may replace a value."""
    if not isinstance(layer, dict):
        raise config_error("config", "must be a table/object", file)
    if "scriptReplies" in layer:
        raise config_error("scriptReplies", "unknown key", file)
    plan = layer.get("plan")
    # An unknown key in [plan] is reported by the strict check below instead (it names that key).
    if isinstance(plan, dict) and "section" not in plan and set(plan) <= {"section"}:
        raise config_error("plan.section", "a [plan] table must set section (the plan:policy text)", file)
    try:
        msgspec.convert(layer, Config, strict=True)
    except msgspec.ValidationError as exc:
        raise config_error(_key_of(exc), str(exc), file) from exc


def _check_values(config: Config) -> None:
    if not config.plan.section.strip():
        raise config_error("plan.section", "must be non-blank text")
    if config.goals.maxRounds < 1:
        raise config_error("goals.maxRounds", "must be at least 1")
    if config.goals.maxTokens is not None and config.goals.maxTokens < 1:
        raise config_error("goals.maxTokens", "must be at least 1 (leave it out for no token budget)")
    model = config.model
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
    if not 0 < config.context.compactAt <= 1:
        raise config_error("context.compactAt", "must be more than 0 and at most 1")
    if config.tools.maxWriteBytes < 1:
        raise config_error("tools.maxWriteBytes", "must be at least 1 (bytes)")
    if len(set(config.tools.approve)) != len(config.tools.approve):
        raise config_error("tools.approve", "a class is listed twice")
    for name in config.tools.env:
        if not ENV_NAME.fullmatch(name):
            raise config_error("tools.env", f"{name!r} is not an environment variable name (letters, digits, _)")
    if config.agent.maxSteps < 1:
        raise config_error("agent.maxSteps", "must be at least 1")
    if config.agent.maxStepRetries < 0:
        raise config_error("agent.maxStepRetries", "must be 0 or more")
    for name in config.plugins:
        if name not in KNOWN_PLUGINS:
            raise config_error("plugins", f"unknown plugin {name!r} (known: {', '.join(KNOWN_PLUGINS)})")
    if len(set(config.plugins)) != len(config.plugins):
        raise config_error("plugins", "a plugin is listed twice")


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
        if reply.usage is not None and min(reply.usage.inputTokens, reply.usage.outputTokens) < 0:
            raise config_error("model.script", f"{path}: replies[{index}].usage has a negative count")
    return list(script.replies)


def parse_config(data: dict[str, Any], workspace: Path | None = None, *, script_from_workspace: bool = False) -> Config:
    """Check one merged config mapping (defaults already applied or not).
    ``script_from_workspace``: the workspace's own config set ``[model] script``, so the
    file must be inside the workspace even when the path is absolute (a relative one
    always is)."""
    if not isinstance(data, dict):
        raise config_error("config", "must be a table/object")
    try:
        config = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        key = _key_of(exc)
        raise config_error(key, str(exc)) from exc
    if "scriptReplies" in data:
        raise config_error("scriptReplies", "unknown key")
    _check_values(config)
    if config.model.script is not None:
        if not config.model.script.strip():
            raise config_error("model.script", "must be a non-blank path")
        script_path = Path(config.model.script)
        inside = None
        if not script_path.is_absolute():
            if workspace is None:
                raise config_error("model.script", "a relative path needs a workspace")
            inside = workspace
        elif script_from_workspace and workspace is not None:
            inside = workspace
        config = msgspec.structs.replace(config, scriptReplies=load_script(script_path, inside))
    return config
