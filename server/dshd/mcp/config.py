"""What an MCP server is, wherever it was configured.

Three sources give the same :class:`McpServerSpec`:

- the ``[mcp.servers.<name>]`` tables of the config files (the table itself is
  :mod:`dshd.plugins.mcp_config`): :func:`specs_from_config`;
- ``.mcp.json`` at the workspace root, the shape other agents read
  (``{"mcpServers": {"<name>": {"command", "args", "env"} | {"type": "http", "url",
  "headers"}}}``): :func:`read_mcp_json` turns it into ``[mcp.servers]`` entries, which the
  config layers merge under the workspace's own config file (only in a trusted folder);
  :func:`specs_from_mcp_json` gives its specs directly;
- ACP's per-session ``mcpServers`` list: :func:`specs_from_acp`.

``.mcp.json`` may come from a cloned repository: it is opened without following a link,
must be a regular file of at most :data:`MCP_JSON_CAP` bytes, and a file that cannot be
read or is not JSON is an ``invalid-config`` error naming it. A server entry dshd cannot
run as written (an SSE server, a key it does not know, a bad value, a ``${VAR}`` that is
not set) is left out and named, never half taken.

Its ``command``, ``args``, ``env`` values, ``url`` and ``headers`` values expand
``${VAR}`` and ``${VAR:-default}`` from the daemon's environment, as Claude Code does:
once (a value holding ``${...}`` is not expanded again), capped, as the file is read.
Only the variables the person allowed (``[mcp] expandEnv`` of the user config) are
read, and in ``command``, ``args`` and ``env`` also :data:`HARMLESS_ENV`: trusting a
folder lets its servers start in the sandbox, not send the daemon's secrets anywhere. A
variable not allowed counts as not set. A reason names a variable, never its value.

Light on purpose (no SDK, nothing of the agent): the config layers import it at start-up.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from dshd.config_tables import config_error
from dshd.errors import DshError
from dshd.tools import safepath
from dshd.tools.paths import PathRefused

Transport = Literal["stdio", "http"]
Approve = Literal["auto", "always", "never"]
SandboxChoice = Literal["workspace", "none"]
Source = Literal["user", "workspace", "acp"]

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MCP_JSON = ".mcp.json"
MCP_JSON_CAP = 256 * 1024  # bytes of .mcp.json read at most
DEFAULT_STARTUP_TIMEOUT_S = 10.0
DEFAULT_TOOL_TIMEOUT_S = 60.0
MAX_STARTUP_TIMEOUT_S = 600.0
MAX_TOOL_TIMEOUT_S = 3600.0


@attrs.frozen
class McpServerSpec:
    """One server to start: stdio (``command``, ``args``, ``env``, ``cwd`` relative to the
    workspace root, or absolute from the user config) or streamable HTTP (``url``, ``headers``, ``bearer_token_env``: the
    name of the daemon's environment variable holding the token, never the token)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    # env and headers may hold tokens (expanded from .mcp.json): a repr shows their names only
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=lambda pairs: repr([n for n, _ in pairs]))
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=lambda pairs: repr([n for n, _ in pairs]))
    bearer_token_env: str | None = None
    enabled: bool = True
    tools: tuple[str, ...] = ()  # allow-list of the server's tool names; empty: all
    disabled_tools: tuple[str, ...] = ()
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    approve: Approve = "auto"
    sandbox: SandboxChoice = "workspace"
    source: Source = "user"

    def offers(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` goes into the catalogue (allow- and deny-list)."""
        return (not self.tools or tool in self.tools) and tool not in self.disabled_tools


# ---- checks shared by the config table and the other sources ------------------------------


def server_problem(entry: Mapping[str, Any], *, outside_cwd: bool = True) -> tuple[str, str] | None:
    """``(key, why)`` when a table-shaped server entry (the config file's camelCase keys,
    values already of the right types) cannot be run as written; None when it can.
    ``outside_cwd``: an absolute ``cwd`` may be taken (the config files: only the user
    config's is started there, dshd.mcp.servers); never from ``.mcp.json`` nor ACP."""
    command, url = entry.get("command"), entry.get("url")
    if command is None and url is None:
        return "command", "set command (a stdio server) or url (a streamable HTTP server)"
    if command is not None and url is not None:
        return "url", "set command (a stdio server) or url (a streamable HTTP server), not both"
    if command is not None:
        if not command.strip() or "\0" in command:
            return "command", "must be a non-empty program name or path"
        for key in ("headers", "bearerTokenEnv"):
            if entry.get(key):
                return key, "is for a streamable HTTP server (url), not a stdio one (command)"
        if any("\0" in arg for arg in entry.get("args") or ()):
            return "args", "an argument contains a NUL character"
        for name, value in (entry.get("env") or {}).items():
            if not ENV_NAME.fullmatch(name) or "\0" in value:
                return "env", f"{name!r} is not an environment variable name (letters, digits, _) with a value"
        cwd = entry.get("cwd")
        if cwd is not None:
            normal = os.path.normpath(cwd) if cwd else ""
            if not cwd.strip() or "\0" in cwd:
                return "cwd", "must be a folder relative to the workspace root, inside it"
            if os.path.isabs(cwd) and not outside_cwd:
                return "cwd", "must be a folder relative to the workspace root, inside it (only your user config may name a folder outside it)"
            if not os.path.isabs(cwd) and (normal == ".." or normal.startswith("../")):
                return "cwd", "must be a folder relative to the workspace root, inside it"
    else:
        if not re.match(r"https?://[^/\s]+", url or ""):
            return "url", "must be an http:// or https:// address"
        for key in ("args", "env", "cwd"):
            if entry.get(key):
                return key, "is for a stdio server (command), not a streamable HTTP one (url)"
        for name, value in (entry.get("headers") or {}).items():
            if not name or any(c in name + value for c in "\r\n\0"):
                return "headers", f"{name!r}: header names and values are one line each"
        token_env = entry.get("bearerTokenEnv")
        if token_env is not None and not ENV_NAME.fullmatch(token_env):
            return "bearerTokenEnv", f"{token_env!r} is not an environment variable name"
    for key, most in (("startupTimeoutS", MAX_STARTUP_TIMEOUT_S), ("toolTimeoutS", MAX_TOOL_TIMEOUT_S)):
        value = entry.get(key)
        if value is not None and not 0 < value <= most:
            return key, f"must be more than 0 and at most {most:g} (seconds)"
    return None


def spec_from_table(name: str, entry: Mapping[str, Any], source: Source) -> McpServerSpec:
    """The spec of one table-shaped entry that :func:`server_problem` passed."""
    command = entry.get("command")
    return McpServerSpec(
        name=name,
        transport="stdio" if command is not None else "http",
        command=command,
        args=tuple(entry.get("args") or ()),
        env=tuple(sorted((entry.get("env") or {}).items())),
        cwd=entry.get("cwd"),
        url=entry.get("url"),
        headers=tuple((entry.get("headers") or {}).items()),
        bearer_token_env=entry.get("bearerTokenEnv"),
        enabled=entry.get("enabled", True),
        tools=tuple(entry.get("tools") or ()),
        disabled_tools=tuple(entry.get("disabledTools") or ()),
        startup_timeout_s=float(entry.get("startupTimeoutS", DEFAULT_STARTUP_TIMEOUT_S)),
        tool_timeout_s=float(entry.get("toolTimeoutS", DEFAULT_TOOL_TIMEOUT_S)),
        approve=entry.get("approve", "auto"),
        sandbox=entry.get("sandbox", "workspace"),
        source=source,
    )


def specs_from_config(servers: Mapping[str, Any], workspace_servers: Iterable[str] = ()) -> list[McpServerSpec]:
    """The specs of the merged ``[mcp.servers]`` table (name -> a table struct or a
    mapping), in name order; ``workspace_servers``: the names a workspace file defined or
    changed (their source is "workspace"). A workspace server never runs unsandboxed nor
    unasked, even when the layers below said so for a server of that name: the workspace
    may have changed what it runs."""
    from_workspace = set(workspace_servers)
    specs = []
    for name in sorted(servers):
        entry = servers[name]
        if not isinstance(entry, Mapping):
            entry = {field: getattr(entry, field) for field in entry.__struct_fields__}
        source: Source = "workspace" if name in from_workspace else "user"
        spec = spec_from_table(name, entry, source)
        if source == "workspace":
            spec = attrs.evolve(
                spec,
                approve="auto" if spec.approve == "never" else spec.approve,
                sandbox="workspace",
            )
        specs.append(spec)
    return specs


# ---- .mcp.json -----------------------------------------------------------------------------

_JSON_KEYS = {"type", "command", "args", "env", "cwd", "url", "headers"}
_JSON_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}


@attrs.frozen
class McpJson:
    """``.mcp.json`` as ``[mcp.servers]`` entries: the servers dshd can run as written, and
    ``(name, why)`` for each it left out."""

    path: Path
    servers: dict[str, dict[str, Any]]
    skipped: tuple[tuple[str, str], ...] = ()
    # name -> {field: (expanded, as written)} of each command, args, url that ${...} changed:
    # what a person is shown (env and headers values are never shown at all)
    written: dict[str, dict[str, tuple[Any, Any]]] = attrs.field(factory=dict, repr=False)


# ${NAME} or ${NAME:-default}, the two forms Claude Code documents. The default runs to the
# first "}" (as Claude Code's does): ${A:-${B}} is A's value and a "}", or (A not set) the
# text "${B}", never B's value.
# Anything else is text: $NAME, $$, a "${" never closed, ${a%b} (no variable name).
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})(?::-([^}]*))?\}")
EXPANDED_CAP = 64 * 1024  # characters of one string once expanded
EXPANDED_FILE_CAP = 1024 * 1024  # characters of all of one file's expanded strings
_MISSING_SHOWN = 3  # variables a reason names at most
# Expanded without being listed, in a stdio server's command, args and env only: the
# sandboxed server gets them in its environment anyway (dshd.tools.run.ALLOWED_ENV), and
# none is a secret. Not in url or headers: those the daemon sends off the machine.
HARMLESS_ENV = frozenset({"HOME", "USER", "LOGNAME", "TMPDIR"})


class _Unexpandable(Exception):
    """Why one server's strings cannot be expanded: it names variables, never values."""


class _Expander:
    """One pass of ``${VAR}`` / ``${VAR:-default}`` over a file's strings, from ``environ``
    and only the names of ``allowed`` (others count as not set); what a value holds is
    never looked at again (no ``${...}`` inside it is expanded)."""

    def __init__(self, environ: Mapping[str, str], allowed: Iterable[str]) -> None:
        self.environ = environ
        self.allowed = frozenset(allowed)
        self.left = EXPANDED_FILE_CAP

    def expand(self, text: str, where: str, missing: list[tuple[str, str]], *, harmless: bool = True) -> str:
        if "${" not in text:
            return text
        parts: list[str] = []
        size = 0
        at = 0
        for found in _VARIABLE.finditer(text):
            name, default = found.group(1), found.group(2)
            allowed = name in self.allowed or (harmless and name in HARMLESS_ENV)
            value = self.environ.get(name) if allowed else None
            if value is None:
                if default is None:
                    missing.append((name, where))
                    value = found.group(0)  # kept so the rest is still checked; never used
                else:
                    value = default
            piece = text[at : found.start()] + value
            size += len(piece)
            if size > EXPANDED_CAP:
                raise _Unexpandable(_too_long(where))
            parts.append(piece)
            at = found.end()
        parts.append(text[at:])
        expanded = "".join(parts)
        if len(expanded) > EXPANDED_CAP:
            raise _Unexpandable(_too_long(where))
        self.left -= len(expanded)
        if self.left < 0:
            raise _Unexpandable(
                f"the file's strings pass {EXPANDED_FILE_CAP // (1024 * 1024)} MiB once their ${{...}} are expanded, from this server on"
            )
        return expanded

    def table(self, table: dict[str, Any]) -> dict[str, Any]:
        """``table`` with command, args, env values, url and headers values expanded;
        _Unexpandable naming the variables that are not set and have no default."""
        missing: list[tuple[str, str]] = []
        out = dict(table)
        for key in ("command", "url"):
            if key in out:
                out[key] = self.expand(out[key], key, missing, harmless=key == "command")
        if "args" in out:
            out["args"] = [self.expand(arg, f"args[{i}]", missing) for i, arg in enumerate(out["args"])]
        for key in ("env", "headers"):
            if key in out:
                out[key] = {
                    name: self.expand(value, f"{key} {name!r}", missing, harmless=key == "env")
                    for name, value in out[key].items()
                }
        if missing:
            names = list(dict.fromkeys(name for name, _ in missing))
            shown = ", ".join(names[:_MISSING_SHOWN]) + (f" and {len(names) - _MISSING_SHOWN} more" if len(names) > _MISSING_SHOWN else "")
            first_name, first_where = missing[0]
            one = len(names) == 1
            raise _Unexpandable(
                f"{'variable' if one else 'variables'} {shown} {'is' if one else 'are'} not set in the daemon's "
                f"environment, or not listed in [mcp] expandEnv of your user config, and {'has' if one else 'have'} "
                f"no default (${{{first_name}}} in {_clipped(first_where)}): to pass {'it' if one else 'them'}, "
                f"set {'it' if one else 'them'} where dshd starts and list {'it' if one else 'them'} in [mcp] "
                f"expandEnv of your user config; or give a default (${{{first_name}:-...}})"
            )
        return out


def _too_long(where: str) -> str:
    return f"{_clipped(where)} is over {EXPANDED_CAP // 1024} KiB once its ${{...}} are expanded"


def _clipped(where: str) -> str:
    """A field's place as a reason names it: a header or env name from the file, cut short."""
    return where if len(where) <= 80 else where[:79] + "…"


def _string_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return dict(value)


def _json_entry(entry: Any, expander: _Expander) -> tuple[dict[str, Any] | None, dict[str, Any], str | None]:
    """(the table-shaped entry with its variables expanded, as written, None) or (None,
    {}, why it is left out)."""
    if not isinstance(entry, dict):
        return None, {}, "a server must be a JSON object"
    unknown = sorted(set(entry) - _JSON_KEYS)
    if unknown:
        return None, {}, f"dshd does not know the key {unknown[0]!r}, so it does not start this server"
    kind = entry.get("type", "stdio" if "command" in entry else "http")
    if kind not in _JSON_TYPES:
        return None, {}, f"type {kind!r}: dshd connects stdio and streamable HTTP servers only"
    table: dict[str, Any] = {}
    if _JSON_TYPES[kind] == "stdio":
        if not isinstance(entry.get("command"), str):
            return None, {}, "a stdio server needs command (a string)"
        table["command"] = entry["command"]
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return None, {}, "args must be a list of strings"
        table["args"] = args
        env = _string_map(entry.get("env", {}))
        if env is None:
            return None, {}, "env must map names to strings"
        table["env"] = env
        if "cwd" in entry:
            if not isinstance(entry["cwd"], str):
                return None, {}, "cwd must be a string"
            table["cwd"] = entry["cwd"]
    else:
        if not isinstance(entry.get("url"), str):
            return None, {}, "an http server needs url (a string)"
        table["url"] = entry["url"]
        headers = _string_map(entry.get("headers", {}))
        if headers is None:
            return None, {}, "headers must map names to strings"
        table["headers"] = headers
    written = table  # expander.table copies: this stays as the file has it
    try:
        table = expander.table(table)
    except _Unexpandable as exc:
        return None, {}, str(exc)
    problem = server_problem(table, outside_cwd=False)
    if problem is not None:
        return None, {}, f"{problem[0]} {problem[1]}"
    return table, written, None


def read_mcp_json(
    root: Path, environ: Mapping[str, str] | None = None, allowed: Iterable[str] = ()
) -> McpJson | None:
    """The workspace's ``.mcp.json``, or None when it has none; its ``${VAR}`` expanded
    from ``environ`` (the daemon's environment by default), only the names of ``allowed``
    (the user config's ``[mcp] expandEnv``) and :data:`HARMLESS_ENV`. A file that cannot be read
    safely (a link, not a regular file, over the cap), is not UTF-8 JSON, or whose
    ``mcpServers`` is not an object is ``invalid-config`` naming the file."""
    root = Path(root).resolve()
    path = root / MCP_JSON
    try:
        raw = safepath.read_bytes(root, path, MCP_JSON_CAP)
    except FileNotFoundError:
        return None
    except PathRefused as exc:
        raise config_error(
            "mcpServers",
            f"not read: {exc} (it must be a regular file in the workspace, not a link, of at most "
            f"{safepath.human(MCP_JSON_CAP)})",
            str(path),
        ) from None
    except OSError as exc:
        raise config_error("mcpServers", f"cannot read it: {exc.strerror or exc}", str(path)) from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise config_error("mcpServers", f"not valid JSON: {exc}", str(path)) from None
    if not isinstance(data, dict):
        raise config_error("mcpServers", "the file must hold a JSON object", str(path))
    servers_in = data.get("mcpServers", {})
    if not isinstance(servers_in, dict):
        raise config_error("mcpServers", "must be an object of servers by name", str(path))
    servers: dict[str, dict[str, Any]] = {}
    skipped: list[tuple[str, str]] = []
    written: dict[str, dict[str, tuple[Any, Any]]] = {}
    expander = _Expander(os.environ if environ is None else environ, allowed)
    for name, entry in servers_in.items():
        if not SERVER_NAME.fullmatch(name):
            skipped.append((name, "a server name is 1 to 32 letters, digits, _ or -"))
            continue
        table, as_written, why = _json_entry(entry, expander)
        if table is None:
            skipped.append((name, why or "not usable"))
        else:
            servers[name] = table
            changed = {k: (table[k], as_written[k]) for k in ("command", "args", "url") if k in table and table[k] != as_written[k]}
            if changed:
                written[name] = changed
    return McpJson(path, servers, tuple(skipped), written)


def specs_from_mcp_json(
    root: Path, environ: Mapping[str, str] | None = None, allowed: Iterable[str] = ()
) -> list[McpServerSpec]:
    """The servers of the workspace's ``.mcp.json`` (source "workspace"), in name order;
    empty when it has none. Expansion and errors as :func:`read_mcp_json`."""
    found = read_mcp_json(root, environ, allowed)
    if found is None:
        return []
    return [spec_from_table(name, found.servers[name], "workspace") for name in sorted(found.servers)]


# ---- ACP -------------------------------------------------------------------------------------


def _acp_pairs(value: Any, field: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DshError("invalid-params", f"{field} must be a list of {{name, value}}", field=field)
    pairs = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("value"), str):
            raise DshError("invalid-params", f"{field}[{index}] must be {{name, value}} strings", field=f"{field}[{index}]")
        pairs.append((item["name"], item["value"]))
    return tuple(pairs)


def specs_from_acp(mcp_servers: list[dict[str, Any]]) -> list[McpServerSpec]:
    """ACP's ``mcpServers`` (``session/new``, ``session/load``): stdio ``{name, command,
    args, env: [{name, value}]}`` and ``{type: "http", name, url, headers: [{name,
    value}]}``, each as a spec with source "acp" and the default keys. A malformed entry
    is ``invalid-params`` naming the field (``mcpServers[1].command``); an SSE server is
    refused the same way (dshd does not advertise SSE)."""
    if not isinstance(mcp_servers, list):
        raise DshError("invalid-params", "mcpServers must be a list", field="mcpServers")
    specs: list[McpServerSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(mcp_servers):
        where = f"mcpServers[{index}]"
        if not isinstance(item, dict):
            raise DshError("invalid-params", f"{where} must be an object", field=where)
        name = item.get("name")
        if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
            raise DshError("invalid-params", f"{where}.name must be 1 to 32 letters, digits, _ or -", field=f"{where}.name")
        if name in seen:
            raise DshError("invalid-params", f"{where}.name {name!r} is listed twice", field=f"{where}.name")
        seen.add(name)
        kind = item.get("type", "stdio")
        table: dict[str, Any]
        if kind == "stdio":
            args = item.get("args", [])
            if not isinstance(item.get("command"), str):
                raise DshError("invalid-params", f"{where}.command must be a string", field=f"{where}.command")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise DshError("invalid-params", f"{where}.args must be a list of strings", field=f"{where}.args")
            table = {"command": item["command"], "args": args, "env": dict(_acp_pairs(item.get("env"), f"{where}.env"))}
        elif kind == "http":
            if not isinstance(item.get("url"), str):
                raise DshError("invalid-params", f"{where}.url must be a string", field=f"{where}.url")
            table = {"url": item["url"], "headers": dict(_acp_pairs(item.get("headers"), f"{where}.headers"))}
        else:
            raise DshError(
                "invalid-params", f"{where}.type {kind!r}: dshd connects stdio and http servers", field=f"{where}.type"
            )
        problem = server_problem(table, outside_cwd=False)
        if problem is not None:
            raise DshError("invalid-params", f"{where}.{problem[0]} {problem[1]}", field=f"{where}.{problem[0]}")
        specs.append(spec_from_table(name, table, "acp"))
    return specs
