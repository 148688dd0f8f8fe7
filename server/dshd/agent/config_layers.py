"""Where configuration comes from, and what a workspace may set without being trusted.

Layers, later wins, merged key by key (:func:`dshd.config_tables.merge_tables`)::

    built-in defaults < user config < workspace config < the editor's settings
                        $XDG_CONFIG_HOME/dsh/config.toml     initializationOptions.config
                        (~/.config/dsh/config.toml)
                                      <workspace>/.dsh/config.toml

Each layer is checked on its own first (unknown keys, wrong types: the error names that
layer's file and the key), then the merged result (value rules: the error names the file
that set the key).

A cloned repository is not the person: from the workspace file, the guarded keys apply
only when the workspace is trusted (the editor says so with
``initializationOptions.trusted``, or the user config lists the folder, or a folder above
it, in ``[trust] folders``). Guarded: ``[model] provider`` (any value but "scripted"),
``baseUrl``, ``apiKeyEnv`` (they decide where requests and the API key go) and, in
``[tools]``, a ``sandbox`` looser than the layers below, ``network = true`` over
``false``, an ``approve`` list that drops a class the layers below ask for, a
``maxWriteBytes`` above theirs. Values as
tight or tighter always apply; a value equal to the layers below changes nothing and is
not reported. ``[trust]`` is read from the user config only: in the workspace file or the
editor's settings it is ignored; so is ``[tools] env`` (the variables commands may see:
a repository, or editor settings a repository can ship, must not ask for the person's
secrets). MCP servers: an untrusted workspace's (its ``[mcp.servers]`` and its
``.mcp.json``, merged under its config file) do not start; ``approve = "never"`` and
``sandbox = "none"`` of a server, and ``[mcp] expandEnv`` (the variables ``.mcp.json``
may expand: the daemon itself sends an HTTP server's url and headers), are taken from the
user config only. Every ignored key is kept in :attr:`LoadedConfig.ignored`
(file, key, why) for ``dsh/config/get`` and the one notice the daemon sends.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from dshd.agent.config import DEFAULTS, NOT_KEYS, Config, check_layer, config_error, merge_tables, parse_config
from dshd.errors import DshError
from dshd.mcp.config import MCP_JSON, read_mcp_json
from dshd.models.errors import shown_key_env
from dshd.tools import safepath
from dshd.tools.paths import PathRefused

EDITOR_SETTINGS = "initializationOptions.config"  # the `file` of the editor's layer
BUILT_IN = "built-in defaults"

SANDBOX_STRICTNESS = {"read-only": 0, "workspace-write": 1, "full-access": 2}  # higher: looser

_WHERE_REQUESTS_GO = "the workspace is not trusted: only you choose where requests (and your API key) go"
_TRUST_ONLY_FROM_USER = "only your user config may list trusted folders (a repository cannot vouch for itself)"
_TRUST_NOT_FROM_EDITOR = "the editor says whether the workspace is trusted with initializationOptions.trusted"
_ENV_ONLY_FROM_USER = "only your user config may pass environment variables to commands (they may hold secrets)"
_SOCKETS_ONLY_FROM_USER = "only your user config may let commands reach the host's Unix sockets ([tools] unixSockets)"
_MCP_NOT_TRUSTED = "the workspace is not trusted: its MCP servers (programs it would run) do not start"
_MCP_ONLY_FROM_USER = {
    "approve": "only your user config may let an MCP server's tools run without asking (approve = \"never\")",
    "sandbox": "only your user config may run an MCP server outside the sandbox (sandbox = \"none\")",
}
_MCP_LOOSEST = {"approve": "never", "sandbox": "none"}
_EXPAND_ONLY_FROM_USER = (
    "only your user config may let .mcp.json read environment variables ([mcp] expandEnv: they may hold secrets)"
)


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/dsh/config.toml``; ``~/.config/dsh/config.toml`` when the variable
    is unset, empty or not an absolute path (the XDG spec says to ignore a relative one)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        base = Path(xdg)
    else:
        base = Path(env.get("HOME") or Path.home()) / ".config"
    return base / "dsh" / "config.toml"


@dataclass(frozen=True)
class IgnoredKey:
    file: str
    key: str  # dotted, e.g. "model.baseUrl"
    why: str
    untrusted: bool  # True: ignored because the workspace is not trusted (trust would apply it)


@dataclass(frozen=True)
class LoadedConfig:
    config: Config
    ignored: tuple[IgnoredKey, ...]
    trusted: bool
    user_file: Path | None  # the user config looked for (None: no user layer)
    workspace_file: Path
    # .mcp.json's servers: {name: {field: (expanded, as written)}} (McpJson.written)
    mcp_json_written: Mapping[str, Mapping[str, tuple[Any, Any]]] = field(default_factory=dict, repr=False)

    def effective(self) -> dict[str, Any]:
        """The merged configuration in force, in the files' shape (a key with no value,
        such as an unset ``baseUrl``, is left out, as TOML has no null)."""
        effective = msgspec.to_builtins(self.config)
        for name in NOT_KEYS:  # read at load time, not keys (the scripted replies)
            del effective[name]
        model = effective.get("model")
        if isinstance(model, dict) and model.get("apiKeyEnv") is not None:
            model["apiKeyEnv"] = shown_key_env(model["apiKeyEnv"])  # a pasted key is never echoed
        for server in (effective.get("mcp") or {}).get("servers", {}).values():
            # A server's env and headers may carry tokens: their names are shown, never values.
            for key in ("env", "headers"):
                if server.get(key):
                    server[key] = {name: "(set)" for name in server[key]}
        for name, fields in self.mcp_json_written.items():
            # .mcp.json's command, args and url as the file has them: never an expanded value.
            server = (effective.get("mcp") or {}).get("servers", {}).get(name)
            for key, (expanded, written) in fields.items() if server is not None else ():
                if server.get(key) == expanded:
                    server[key] = written
        return {
            name: {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value
            for name, value in effective.items()
        }

    def notice(self, *, editor_trust: bool = True) -> str | None:
        """What to tell the person once when keys were ignored (None: nothing was).
        ``editor_trust``: the front door can learn trust from the editor and has
        ``dsh/config/get`` (``dshd acp`` has neither)."""
        if not self.ignored:
            return None
        by_file: dict[str, list[str]] = {}
        for item in self.ignored:
            by_file.setdefault(item.file, []).append(item.key)
        parts = [f"dshd ignored {', '.join(keys)} from {file}." for file, keys in by_file.items()]
        if any(item.untrusted for item in self.ignored):
            user = self.user_file or user_config_path()
            how = "trust the folder in your editor, or add it to" if editor_trust else "add the folder to"
            servers = any(item.untrusted and item.key.startswith(("mcp.", "mcpServers")) for item in self.ignored)
            parts.append(
                "This folder is not trusted, so its config may not choose where requests and your API key go"
                + (", start MCP servers," if servers else "")
                + f" or loosen the sandbox. To use them, {how} [trust] folders in {user}."
            )
        if editor_trust:
            parts.append("`dshd doctor`, run in the folder, lists each one and why.")
        return " ".join(parts)


# ---- reading one layer ----------------------------------------------------------------


CONFIG_CAP = 1024 * 1024  # bytes of a config file


def _read_file(path: Path, workspace: Path | None = None) -> dict[str, Any] | None:
    """A TOML config file as a mapping; None when there is no such file. A regular file of
    at most :data:`CONFIG_CAP` bytes (no more is read); ``workspace``: the file is the
    workspace's own, read through directory handles and only from inside it."""
    try:
        if workspace is None:
            raw = safepath.read_by_name(path, CONFIG_CAP)
        else:
            raw = safepath.read_inside(workspace, path.relative_to(workspace), CONFIG_CAP)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return None
    except PathRefused as exc:
        where = " inside the workspace" if workspace is not None else ""
        raise config_error(
            "config.toml",
            f"not read: {exc} (a config file must be a regular file{where} of at most {safepath.human(CONFIG_CAP)})",
            str(path),
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise config_error("config.toml", f"cannot read it: {reason}", str(path)) from None
    try:
        layer = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise config_error("config.toml", f"not valid TOML: {exc}", str(path)) from None
    check_layer(layer, str(path))
    return layer


def _trust_folders(user: dict[str, Any] | None, file: str) -> list[Path]:
    folders = (user or {}).get("trust", {}).get("folders", [])
    out = []
    for folder in folders:
        path = Path(folder).expanduser()
        if not folder.strip() or not path.is_absolute():
            raise config_error("trust.folders", f"{folder!r} is not an absolute path (or ~/...)", file)
        out.append(path.resolve())
    return out


def _is_trusted(workspace: Path, folders: list[Path]) -> bool:
    here = workspace.resolve()
    return any(here == folder or folder in here.parents for folder in folders)


# ---- guarded keys -------------------------------------------------------------------


def _looser(table: str, key: str, value: Any, below: dict[str, Any]) -> str | None:
    """Why ``table.key = value`` from an untrusted workspace is not taken (None: it may be)."""
    current = below[table].get(key)
    if value == current:
        return None  # changes nothing
    if table == "model":
        if key == "provider" and value != "scripted":
            return _WHERE_REQUESTS_GO
        if key in ("baseUrl", "apiKeyEnv"):
            return _WHERE_REQUESTS_GO
    elif table == "tools":
        if key == "sandbox" and SANDBOX_STRICTNESS[value] > SANDBOX_STRICTNESS[current]:
            return f"the workspace is not trusted: it may tighten the sandbox, not loosen it beyond {current}"
        if key == "network" and value is True:
            return "the workspace is not trusted: it may not let commands reach the network"
        if key == "approve" and not set(value) >= set(current):
            dropped = ", ".join(sorted(set(current) - set(value)))
            return f"the workspace is not trusted: it may add approvals, not drop {dropped}"
        if key == "maxWriteBytes" and isinstance(value, int) and value > current:
            return f"the workspace is not trusted: it may lower the write cap, not raise it beyond {current} bytes"
    return None


def _guard_workspace(
    layer: dict[str, Any], below: dict[str, Any], file: str, trusted: bool
) -> tuple[dict[str, Any], list[IgnoredKey]]:
    """The workspace layer without the keys it may not set, and what was left out."""
    layer = copy.deepcopy(layer)
    ignored = _drop_trust_table(layer, file, _TRUST_ONLY_FROM_USER) + _drop_tools_env(layer, file) + _drop_expand_env(layer, file)
    ignored += _drop_mcp_servers(layer, file) if not trusted else _drop_mcp_loosening(layer, file)
    if trusted:
        return layer, ignored
    for table in ("model", "tools"):
        values = layer.get(table, {})
        for key in list(values):
            why = _looser(table, key, values[key], below)
            if why is not None:
                del values[key]
                ignored.append(IgnoredKey(file, f"{table}.{key}", why, untrusted=True))
    return layer, ignored


def _drop_tools_env(layer: dict[str, Any], file: str) -> list[IgnoredKey]:
    tools = layer.get("tools")
    if not isinstance(tools, dict):
        return []
    dropped = []
    for key, why in (("env", _ENV_ONLY_FROM_USER), ("unixSockets", _SOCKETS_ONLY_FROM_USER)):
        if key in tools:
            del tools[key]
            dropped.append(IgnoredKey(file, f"tools.{key}", why, untrusted=False))
    return dropped


def _drop_expand_env(layer: dict[str, Any], file: str) -> list[IgnoredKey]:
    mcp = layer.get("mcp")
    if not isinstance(mcp, dict) or "expandEnv" not in mcp:
        return []
    del mcp["expandEnv"]
    return [IgnoredKey(file, "mcp.expandEnv", _EXPAND_ONLY_FROM_USER, untrusted=False)]


def _expand_env(user: dict[str, Any] | None) -> tuple[str, ...]:
    """The user config's ``[mcp] expandEnv`` (its layer check made it a list of strings)."""
    mcp = (user or {}).get("mcp")
    names = mcp.get("expandEnv", []) if isinstance(mcp, dict) else []
    return tuple(name for name in names if isinstance(name, str))


def _mcp_servers(layer: dict[str, Any] | None) -> dict[str, Any]:
    mcp = (layer or {}).get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    return servers if isinstance(servers, dict) else {}


def _drop_mcp_servers(layer: dict[str, Any], file: str) -> list[IgnoredKey]:
    """An untrusted workspace's MCP servers: none of them starts."""
    servers = _mcp_servers(layer)
    names = list(servers)
    servers.clear()
    return [IgnoredKey(file, f"mcp.servers.{name}", _MCP_NOT_TRUSTED, untrusted=True) for name in names]


def _drop_mcp_loosening(layer: dict[str, Any], file: str) -> list[IgnoredKey]:
    """``approve = "never"`` and ``sandbox = "none"`` of any layer but the user config."""
    ignored = []
    for name, server in _mcp_servers(layer).items():
        if not isinstance(server, dict):
            continue
        for key, loosest in _MCP_LOOSEST.items():
            if server.get(key) == loosest:
                del server[key]
                ignored.append(IgnoredKey(file, f"mcp.servers.{name}.{key}", _MCP_ONLY_FROM_USER[key], untrusted=False))
    return ignored


def _mcp_json_layer(
    workspace: Path, trusted: bool, allowed: tuple[str, ...]
) -> tuple[dict[str, Any] | None, str, list[IgnoredKey], dict[str, dict[str, tuple[Any, Any]]]]:
    """The workspace's ``.mcp.json`` as a layer under its config file (only in a trusted
    folder), its file name, what was left out of it, and its fields as written
    (McpJson.written); ``allowed``: the variables its ``${VAR}`` may read."""
    path = str(workspace / MCP_JSON)
    if not trusted:
        try:
            found = read_mcp_json(workspace)
        except DshError:  # unreadable: named as a whole, never parsed further
            if not os.path.lexists(path):
                return None, path, [], {}
            return None, path, [IgnoredKey(path, "mcpServers", _MCP_NOT_TRUSTED, untrusted=True)], {}
        if found is None:
            return None, path, [], {}
        names = [*found.servers, *(name for name, _ in found.skipped)]
        return None, path, [IgnoredKey(path, f"mcpServers.{name}", _MCP_NOT_TRUSTED, untrusted=True) for name in names], {}
    found = read_mcp_json(workspace, allowed=allowed)
    if found is None:
        return None, path, [], {}
    ignored = [IgnoredKey(path, f"mcpServers.{name}", why, untrusted=False) for name, why in found.skipped]
    layer = {"mcp": {"servers": found.servers}} if found.servers else None
    return layer, path, ignored, found.written


def _drop_trust_table(layer: dict[str, Any], file: str, why: str) -> list[IgnoredKey]:
    trust = layer.pop("trust", None)
    if trust is None:
        return []
    keys = [f"trust.{key}" for key in trust] or ["trust"]
    return [IgnoredKey(file, key, why, untrusted=False) for key in keys]


# ---- merging, with the file of every key ------------------------------------------------


def _merge_noting(merged: dict[str, Any], layer: dict[str, Any], file: str, origin: dict[str, str]) -> dict[str, Any]:
    for key, value in layer.items():
        if isinstance(value, dict):
            for inner in value:
                origin[f"{key}.{inner}"] = file
        else:
            origin[key] = file
    return merge_tables(merged, layer)


def _file_of(key: str, origin: dict[str, str]) -> str:
    """The file to fix for a value error on ``key``: the one that set it, or (a model name
    nobody set) the one that chose the provider that needs it."""
    for candidate in (key, "model.provider" if key == "model.model" else None):
        if candidate in origin:
            return origin[candidate]
    for dotted, file in reversed(list(origin.items())):
        if dotted.startswith(key + "."):
            return file
    parent = key.rpartition(".")[0]
    while parent:  # a key inside a table set as a whole (mcp.servers.<name>.url)
        if parent in origin:
            return origin[parent]
        parent = parent.rpartition(".")[0]
    return BUILT_IN


def load_layers(
    workspace: Path,
    editor: dict[str, Any] | None = None,
    *,
    user_file: Path | None = None,
    editor_trusted: bool = False,
) -> LoadedConfig:
    """Read, check and merge every layer; leave out what the workspace may not set.

    ``user_file`` None reads no user config (tests; the daemon passes
    :func:`user_config_path`). ``editor`` is ``initializationOptions.config``;
    ``editor_trusted`` is ``initializationOptions.trusted``.
    """
    workspace = Path(workspace)
    user = _read_file(user_file) if user_file is not None else None
    user_name = str(user_file)
    workspace_file = workspace / ".dsh" / "config.toml"
    from_workspace = _read_file(workspace_file, workspace)
    if editor is not None:
        check_layer(editor, EDITOR_SETTINGS)
        editor = copy.deepcopy(editor)
    trusted = editor_trusted or _is_trusted(workspace, _trust_folders(user, user_name))

    origin: dict[str, str] = {}
    merged = copy.deepcopy(DEFAULTS)
    if user is not None:
        merged = _merge_noting(merged, user, user_name, origin)
    ignored: list[IgnoredKey] = []
    if from_workspace is not None:
        from_workspace, dropped = _guard_workspace(from_workspace, merged, str(workspace_file), trusted)
        ignored += dropped
    if editor is not None:
        ignored += _drop_trust_table(editor, EDITOR_SETTINGS, _TRUST_NOT_FROM_EDITOR)
        ignored += _drop_tools_env(editor, EDITOR_SETTINGS)
        ignored += _drop_expand_env(editor, EDITOR_SETTINGS)
        ignored += _drop_mcp_loosening(editor, EDITOR_SETTINGS)
    mcp_json, mcp_json_file, mcp_json_ignored, mcp_json_written = _mcp_json_layer(workspace, trusted, _expand_env(user))
    ignored += mcp_json_ignored
    editor_model = (editor or {}).get("model") or {}
    workspace_model = (from_workspace or {}).get("model") or {}
    provider = editor_model.get("provider") or workspace_model.get("provider") or merged["model"]["provider"]
    if provider != "scripted" and "script" in workspace_model and "script" not in editor_model:
        # A repository's demo script must not stop a person's own provider from starting.
        del workspace_model["script"]
        ignored.append(
            IgnoredKey(
                str(workspace_file),
                "model.script",
                f"the provider is {provider}: only the scripted provider reads a script",
                untrusted=False,
            )
        )
    # The workspace's servers are noted by name, so they are known as the workspace's
    # (dshd.plugins.mcp_config.workspace_servers), .mcp.json's under its config file.
    if mcp_json is not None:
        merged = _merge_noting(merged, mcp_json, mcp_json_file, origin)
        origin.update({f"mcp.servers.{name}": mcp_json_file for name in _mcp_servers(mcp_json)})
    if from_workspace is not None:
        merged = _merge_noting(merged, from_workspace, str(workspace_file), origin)
        origin.update({f"mcp.servers.{name}": str(workspace_file) for name in _mcp_servers(from_workspace)})
    if editor is not None:
        merged = _merge_noting(merged, editor, EDITOR_SETTINGS, origin)
    try:
        workspace_keys = {key for key, file in origin.items() if file in (str(workspace_file), mcp_json_file)}
        config = parse_config(merged, workspace, workspace_keys=workspace_keys)
    except DshError as exc:
        key = exc.data.get("key", "config")
        raise config_error(key, getattr(exc, "detail", exc.message), _file_of(key, origin)) from None
    return LoadedConfig(config, tuple(ignored), trusted, user_file, workspace_file, mcp_json_written)


def load_config(
    workspace: Path,
    overrides: dict[str, Any] | None = None,
    *,
    user_file: Path | None = None,
    trusted: bool = False,
) -> Config:
    """The effective :class:`Config` of :func:`load_layers` (``overrides``: the editor's)."""
    return load_layers(workspace, overrides, user_file=user_file, editor_trusted=trusted).config
