"""The notice a client gets when the shared daemon already holds its workspace with other
settings (the first client's config stands until the daemon restarts): which keys
differ, what is in force, and the ways out. Pure: the daemon's ``initialize`` calls it."""

from __future__ import annotations

from typing import Any

from dshd.formats import clip, shown

# Keys of the daemon itself, not of a client's sessions: they never make a notice.
NOT_COMPARED = frozenset({"daemon", "trust"})
MAX_KEYS_NAMED = 8

# The words the editors look for to offer the ways out as buttons (VS Code) or a hint.
NOTICE_START = "Your settings are not in force"


def differing_keys(mine: dict[str, Any], live: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(dotted key, this client's value, the live value)`` for every setting that
    differs between two ``LoadedConfig.effective()`` dicts; lists and scalars compare
    whole, tables key by key. A key missing on one side reads as ``None``."""
    out: list[tuple[str, Any, Any]] = []

    def walk(prefix: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(f"{prefix}.{key}" if prefix else str(key), a.get(key), b.get(key))
        elif a != b:
            out.append((prefix, a, b))

    for key in sorted(set(mine) | set(live)):
        if key not in NOT_COMPARED:
            walk(key, mine.get(key), live.get(key))
    return out


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{…}"
    return str(value)


def notice(differ: list[tuple[str, Any, Any]], trust_differs: bool = False) -> str | None:
    """What the person reads (one line, escaped), or None when nothing differs."""
    parts = [
        f"{shown(key)} (yours: {shown(clip(_value(mine), 40))}; in force: {shown(clip(_value(live), 40))})"
        for key, mine, live in differ[:MAX_KEYS_NAMED]
    ]
    if len(differ) > MAX_KEYS_NAMED:
        parts.append(f"and {len(differ) - MAX_KEYS_NAMED} more")
    if trust_differs:
        parts.append("workspace trust")
    if not parts:
        return None
    return (
        f"{NOTICE_START}: {'; '.join(parts)}. This editor joined the workspace's shared dshd "
        "daemon, which keeps the settings of the client that started it. To use yours: open the session in a daemon of this editor's own (`dshd serve`: "
        "VS Code's dsh.server.mode \"serve\", Neovim's server = 'serve'), or restart the "
        "workspace's daemon (VS Code: \"DSH: Restart Workspace Daemon\"; Neovim: :Dsh restart; "
        "a terminal: dshd daemon restart): every client reattaches, and the first to reattach "
        "sets the settings."
    )
