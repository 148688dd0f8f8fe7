"""A sandbox policy as a bubblewrap command line (pure: no I/O, no environment).

Modes:

- ``read-only``: the whole file system read-only (``--ro-bind / /``); writes fail with
  EROFS wherever they go (the workspace, ``$HOME``, ``/tmp``).
- ``workspace-write``: the same, then a private ``/tmp`` (an empty tmpfs that vanishes with
  the command), then the workspace bound writable, then each protected path inside it
  (``.git``, ``.dsh``: only those that exist, bubblewrap cannot bind a missing path) bound
  read-only again. Order matters: a later mount hides an earlier one, so a workspace under
  ``/tmp`` is bound after the tmpfs.
- ``full-access``: nothing is restricted but the network: with ``network`` off the command
  still runs in bubblewrap with the whole file system bound writable and its own network
  namespace; with ``network`` on no sandbox is needed (:func:`bwrap_argv` returns None).

Every sandboxed command gets its own network namespace unless ``network`` is on (only a
loopback device of its own: connecting to the host's 127.0.0.1 is ECONNREFUSED, anything
else ENETUNREACH). ``read-only`` and ``workspace-write`` also get their own PID namespace
(with a fresh ``/proc``): when the command ends, or bubblewrap is killed, the kernel kills
everything left in it. ``--die-with-parent`` ties the sandbox to the process that started it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["read-only", "workspace-write", "full-access"]
MODES: tuple[str, ...] = ("read-only", "workspace-write", "full-access")


@dataclass(frozen=True)
class SandboxPolicy:
    mode: Mode
    network: bool
    workspace: Path  # absolute, resolved
    # Paths inside the workspace kept read-only in workspace-write; pass only existing ones.
    protect: tuple[Path, ...] = field(default=())


def bwrap_argv(policy: SandboxPolicy, command: list[str], cwd: Path, *, bwrap: str = "bwrap") -> list[str] | None:
    """The argv that runs ``command`` in ``cwd`` under ``policy``, or None when the policy
    asks for no sandbox at all (full access with the network on)."""
    if policy.mode not in MODES:
        raise ValueError(f"unknown sandbox mode {policy.mode!r}")
    if policy.mode == "full-access":
        if policy.network:
            return None
        argv = [bwrap, "--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    else:
        argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--new-session"]
        if policy.mode == "workspace-write":
            workspace = str(policy.workspace)
            argv += ["--tmpfs", "/tmp", "--bind", workspace, workspace]
            for path in policy.protect:
                argv += ["--ro-bind", str(path), str(path)]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--chdir", str(cwd), "--", *command]
    return argv
