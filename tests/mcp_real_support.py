"""The real MCP servers tests/mcp/setup.sh installs (npm server-everything,
server-filesystem and server-memory, PyPI mcp-server-time): where they are, how dshd's config and
``.mcp.json`` name them, how the SDK starts them directly (bench/mcp_calls.py's baseline), and
finding their processes in ``/proc``.

Each server a test configures carries a marker of its own, in its argv where the server
ignores extra words (server-everything) and always in its environment (``DSHD_MCP_MARK``),
so the process table tells a test's servers from every other test's, inside bubblewrap or
not, before and after the daemon that started them is gone.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("DSHD_MCP_CACHE") or REPO / ".cache" / "mcp")
NODE_MODULES = CACHE / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING_JS = NODE_MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM_JS = NODE_MODULES / "server-filesystem" / "dist" / "index.js"
MEMORY_JS = NODE_MODULES / "server-memory" / "dist" / "index.js"
TIME_BIN = CACHE / "py" / "bin" / "mcp-server-time"
MARK_ENV = "DSHD_MCP_MARK"


def node() -> str:
    """The node the set-up installed the npm servers with (it records which)."""
    recorded = CACHE / "node" / "node-path"
    return recorded.read_text().strip() if recorded.is_file() else "node"


def missing() -> str | None:
    """Why the real servers cannot run here, or None."""
    for path in (EVERYTHING_JS, FILESYSTEM_JS, MEMORY_JS, TIME_BIN):
        if not path.exists():
            return f"{path} is not there (run tests/mcp/setup.sh)"
    if not Path(node()).is_file():
        return f"the node that installed the npm servers ({node()}) is gone (run tests/mcp/setup.sh)"
    return None


def new_mark() -> str:
    return "dshd-mcp-" + secrets.token_hex(6)


# ---- the three servers, as (command, args) -------------------------------------------------


def everything_argv(mark: str | None = None) -> tuple[str, list[str]]:
    # server-everything reads only its first argument (the transport): the marker after it
    # is there for the process table.
    return node(), [str(EVERYTHING_JS), "stdio", *([mark] if mark else [])]


def filesystem_argv(*allowed: Path) -> tuple[str, list[str]]:
    return node(), [str(FILESYSTEM_JS), *(str(p) for p in allowed)]


def memory_argv(mark: str) -> tuple[str, list[str]]:
    # server-memory takes no arguments: the marker is there for the process table.
    return node(), [str(MEMORY_JS), mark]


def time_argv() -> tuple[str, list[str]]:
    return str(TIME_BIN), ["--local-timezone", "UTC"]


# ---- dshd's config -------------------------------------------------------------------------


def _toml(value) -> str:
    """A TOML value: strings, lists of them, numbers, booleans and flat tables (JSON's
    quoted strings are TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def server_toml(name: str, argv: tuple[str, list[str]], mark: str, env: dict[str, str] | None = None, **keys) -> str:
    """``[mcp.servers.<name>]`` for a stdio server, its marker (and ``env``) in its
    environment; ``keys`` are more of the table's keys (toolTimeoutS=1, sandbox="none", ...)."""
    command, args = argv
    lines = [
        f"[mcp.servers.{name}]",
        f"command = {_toml(command)}",
        f"args = {_toml(args)}",
        f"env = {_toml({MARK_ENV: mark, **(env or {})})}",
    ]
    lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def mcp_json(servers: dict[str, tuple[tuple[str, list[str]], str]]) -> str:
    """A workspace's ``.mcp.json`` (the shape Claude Code reads): name -> (argv, marker)."""
    return json.dumps(
        {
            "mcpServers": {
                name: {"command": command, "args": args, "env": {MARK_ENV: mark}}
                for name, ((command, args), mark) in servers.items()
            }
        },
        indent=2,
    )


def user_config(home: Path, text: str) -> dict[str, str]:
    """Writes ``text`` as the user config of its own XDG_CONFIG_HOME; the daemon env for it."""
    (home / "dsh").mkdir(parents=True, exist_ok=True)
    (home / "dsh" / "config.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(home)}


# ---- the SDK, directly ---------------------------------------------------------------------


def sdk_params(argv: tuple[str, list[str]], cwd: Path | None = None):
    from mcp import StdioServerParameters

    command, args = argv
    return StdioServerParameters(command=command, args=args, cwd=str(cwd) if cwd else None)


# ---- the process table ---------------------------------------------------------------------


def _live(pid_dir: str) -> bool:
    try:
        stat = Path(pid_dir, "stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


def server_processes(mark: str) -> list[int]:
    """Live pids carrying ``mark`` in their command line or their environment (bubblewrap,
    the server, anything the server started: the environment is inherited)."""
    needle = mark.encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if (needle in cmdline or f"{MARK_ENV}={mark}".encode() in environ.split(b"\0")) and _live(entry.path):
            found.append(int(entry.name))
    return found


def server_process(mark: str, script: Path | str) -> list[int]:
    """The pids running ``script`` as ``<interpreter> <script> ...``: the server itself,
    not the bubblewrap around it (whose argv holds the same words further on)."""
    needle = str(script).encode()
    found = []
    for pid in server_processes(mark):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2] == [needle]:
                found.append(pid)
        except OSError:
            continue  # gone meanwhile
    return found
