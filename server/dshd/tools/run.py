"""run_command {command, cwd?, timeoutMs?}: one shell command (``/bin/sh -c``) in the sandbox.

The live policy chooses the sandbox (``dshd.sandbox``): read-only, workspace-write (the
default) or full-access, with the network off unless ``[tools] network = true``. Where no
sandbox can be built the command does not run, and the result says why and how to fix it;
it never runs unsandboxed except in full-access with the network on.

The result is ok only when the command ran and exited 0; its content always starts with
the exit code, or why the command did not run or did not finish. Output (stdout and stderr
merged) keeps its last 32 KiB; the result says how much was dropped. The timeout is 120 s
unless ``timeoutMs`` says otherwise (at most 600 s); on timeout, cancellation and shutdown
the command is killed with everything it started.

Commands get an allowlisted environment (:data:`ALLOWED_ENV`, ``LC_*``, and the names the
person lists in their user config's ``[tools] env``), never the daemon's whole one: a
command's output goes to the session log and the model, and the model may be following a
stranger's instructions.

Where bubblewrap runs, every mode (full-access too) runs the command in its own PID
namespace, so nothing it starts outlives it and the daemon's ``/proc`` is not visible; with
the network off the host's sockets are hidden (``dshd.sandbox.sockets``). Only full-access
with the network on runs without bubblewrap when it cannot be built, and says so.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dshd.formats import clip, shown as shown_text
from dshd.agent.tools import Change, ToolContext, ToolDescription, ToolOutcome, argument_text, path_location
from dshd.sandbox import bwrap_argv, probe, run
from dshd.sandbox.policy import replaced_folders
from dshd.sandbox.host import host_policy
from dshd.tools import safepath
from dshd.tools.files import Refused, check_arguments
from dshd.tools.paths import PROTECTED, PathRefused, resolve, shown

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
OUTPUT_CAP = 32 * 1024  # bytes of output kept (the tail)
SHELL = "/bin/sh"
# What a command gets of the daemon's environment (plus LC_* and the user's [tools] env).
ALLOWED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")
# The command runs only in the folder that was checked. The cwd is walked from a handle on
# the root (no link followed, tools/safepath.py) and the sandbox is started in that very
# folder (its handle); inside the sandbox the shell goes there by name, then checks
# where it landed: ``pwd -P`` (the kernel's path of the folder it is in) must be the
# checked path, which holds no link. A folder swapped for a link meanwhile leads
# elsewhere, and the command is not run ($1 the checked path, $2 the refusal's marker,
# $3 the command). Measured: +0.4 ms over ``sh -c`` alone (one subshell, no exec).
CWD_GUARD = (
    'cd -P -- "$1" 2>/dev/null && [ "$(pwd -P)" = "$1" ] || { printf "%s\\n" "$2"; exit 125; }; '
    'shift 2; eval "shift; $1"'  # the command in this same shell, with no arguments, as sh -c runs it
)

PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "A shell command line, run by /bin/sh -c."},
        "cwd": {"type": "string", "description": "Folder to run in, relative to the workspace root. Default: the root."},
        "timeoutMs": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TIMEOUT_MS,
            "description": f"Kill the command after this many milliseconds (default {DEFAULT_TIMEOUT_MS}).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


def command_env(extra: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment commands get: the allowlisted names of the daemon's, and ``extra``."""
    source = os.environ if base is None else base
    allowed = {*ALLOWED_ENV, *extra}
    return {k: v for k, v in source.items() if k in allowed or k.startswith("LC_")}


def sandboxed_env(env: dict[str, str], replaced: tuple[Path, ...], workspace: Path) -> dict[str, str]:
    """``env`` without a TMPDIR the sandbox has emptied (so programs fall back to /tmp)."""
    tmpdir = env.get("TMPDIR")
    if tmpdir and os.path.isabs(tmpdir):
        real = Path(os.path.realpath(tmpdir))
        inside = lambda folder: real == folder or folder in real.parents  # noqa: E731
        if any(inside(folder) for folder in replaced) and not inside(workspace):
            return {k: v for k, v in env.items() if k != "TMPDIR"}
    return env


def _checked(ctx: ToolContext, arguments: dict[str, Any]) -> tuple[str, Path, int]:
    check_arguments(arguments, PARAMETERS)
    command = arguments["command"]
    if not command.strip():
        raise Refused("command is empty")
    cwd = resolve(ctx.root, arguments.get("cwd", "."), field="cwd")
    os.close(_open_cwd(ctx.root, cwd))
    timeout_ms = arguments.get("timeoutMs", DEFAULT_TIMEOUT_MS)
    if timeout_ms > MAX_TIMEOUT_MS:
        raise Refused(f"timeoutMs is at most {MAX_TIMEOUT_MS}")
    return command, cwd, timeout_ms


def _open_cwd(root: Path, cwd: Path) -> int:
    """A handle on the resolved ``cwd``, walked from the root without following a link (a
    folder swapped for one is unsafe-path); the caller closes it."""
    root_fd = safepath.open_root(root)
    try:
        return safepath.open_folder(root_fd, safepath.parts_of(root, cwd))
    except (FileNotFoundError, NotADirectoryError):
        raise Refused(f"cwd {shown(root, cwd)} is not a folder of the workspace") from None
    finally:
        os.close(root_fd)


def _title(command: str) -> str:
    line = command.strip().splitlines()[0]
    shown_line = line if len(line) <= 80 else line[:79] + "…"
    return f"Run `{shown_line}`" + (" (more lines)" if "\n" in command.strip() else "")


async def run_command_preview(ctx: ToolContext, arguments: dict[str, Any]) -> Change | ToolOutcome:
    try:
        command, cwd, _ = _checked(ctx, arguments)
    except (Refused, PathRefused) as exc:
        return ToolOutcome.failure(f"Not run: {exc}")
    return Change(title=_title(command), command=command, cwd=str(cwd))


class RunCommand:
    def __init__(self, env_names: Iterable[str] = ()) -> None:
        self.env_names = tuple(env_names)  # the user config's [tools] env

    async def __call__(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        try:
            command, cwd, timeout_ms = _checked(ctx, arguments)
        except (Refused, PathRefused) as exc:
            return ToolOutcome.failure(f"Not run: {exc}")
        policy = ctx.policy
        where = f"{policy.sandbox} sandbox, network {'on' if policy.network else 'off'}"
        found = await probe()
        refused_marker = f"dshd-cwd-refused-{secrets.token_hex(8)}"
        shell = [SHELL, "-c", CWD_GUARD, SHELL, str(cwd), refused_marker, command]
        replaced: tuple[Path, ...] = ()
        mask: tuple[Path, ...] = ()
        if found.ok:
            argv, replaced, mask = self._sandboxed(ctx, shell, found.bwrap or "bwrap")
        elif policy.sandbox == "full-access" and policy.network:
            # Asked for no restriction at all: run it, and say what that costs.
            argv = shell
            where = f"full-access, network on, not sandboxed: {found.reason}; what it leaves running in the background may outlive it"
        else:
            return ToolOutcome.failure(
                f"Not run: no sandbox can be built here: {found.reason}. To fix it: {found.fix}."
            )
        try:
            cwd_fd = _open_cwd(ctx.root, cwd)
        except (Refused, PathRefused) as exc:
            return ToolOutcome.failure(f"Not run: {exc}")
        try:
            # Started in the checked folder itself (its handle), not by its name: so is the
            # command outside bubblewrap (full-access with the network on, none built).
            for attempt in (1, 2):
                result = await run(
                    argv, cwd=Path(f"/proc/self/fd/{cwd_fd}"), env=sandboxed_env(command_env(self.env_names), replaced, ctx.root),
                    timeout_s=timeout_ms / 1000, output_cap=OUTPUT_CAP, sandbox_status=found.ok,
                )
                # A host socket covered with the network off can vanish between being listed
                # and bubblewrap's start, which then fails before the command runs: list the
                # sockets again and build the sandbox once more (never a command twice: the
                # status pipe says the command did not run).
                if not (result.setup_failed and attempt == 1 and any(not os.path.lexists(p) for p in mask)):
                    break
                argv, replaced, mask = self._sandboxed(ctx, shell, found.bwrap or "bwrap")
        except OSError as exc:
            return ToolOutcome.failure(f"Not run: the command could not be started: {exc}")
        finally:
            os.close(cwd_fd)
        if result.setup_failed:
            return ToolOutcome.failure(
                f"Not run: the sandbox could not be set up ({where}), so nothing was run: "
                f"{clip(shown_text(result.output.strip()), 400) or 'bubblewrap gave no reason'}"
            )
        if result.exit_code == 125 and refused_marker in result.output.splitlines():
            return ToolOutcome.failure(
                f"Not run: unsafe-path: {shown(ctx.root, cwd)}: this folder was swapped for a symbolic link "
                "(or moved) as the command started; nothing was run"
            )
        if result.timed_out:
            head = f"timed out after {timeout_ms} ms: the command and everything it started were killed"
        elif result.signal is not None:
            head = f"killed by signal {result.signal}"
        else:
            head = f"exit code {result.exit_code}"
        parts = [f"{head} ({where})"]
        if result.output_bytes == 0:
            parts.append("(no output)")
        else:
            if result.kept_bytes < result.output_bytes:
                parts.append(
                    f"[output capped at {OUTPUT_CAP // 1024} KiB: the first "
                    f"{result.output_bytes - result.kept_bytes} of {result.output_bytes} bytes were dropped]"
                )
            parts.append(result.output.rstrip("\n"))
        return ToolOutcome(result.exit_code == 0, "\n".join(parts))


    @staticmethod
    def _sandboxed(ctx: ToolContext, shell: list[str], bwrap: str) -> tuple[list[str], tuple[Path, ...], tuple[Path, ...]]:
        """The bubblewrap argv for ``shell`` under the live policy, the folders it replaces
        with empty ones, and the host sockets it covers (listed now: they come and go)."""
        policy = ctx.policy
        # dshd's own folder always exists, so it is always protected; .git only when present.
        (ctx.root / ".dsh").mkdir(exist_ok=True)
        sandbox = host_policy(policy.sandbox, policy.network, ctx.root, PROTECTED)
        # bwrap starts in the root (always there); the guard goes to the cwd and checks it.
        return bwrap_argv(sandbox, shell, ctx.root, bwrap=bwrap), replaced_folders(sandbox), sandbox.mask


def describe_run_command(arguments: dict[str, Any]) -> ToolDescription:
    """What the call is, for people and clients (agent/tools.py: Tool.describe): the
    command escaped and clipped; the person approves the whole of it (the preview)."""
    command = argument_text(arguments, "command")
    return ToolDescription(f"Run `{command}`" if command else "Run a command", "execute", path_location(arguments, "cwd"))
