"""The one launcher: every process dshd runs in the sandbox (a command of
``run_command``, an MCP stdio server, anything added later) starts through
:func:`sandbox_start`, which builds its bubblewrap command, its environment and its socket
wall.

- bubblewrap itself runs with a fixed, minimal environment (:data:`BWRAP_ENV`): nothing of
  the daemon's, nothing configured. A loader variable there (``LD_PRELOAD``) would run code
  in bubblewrap, outside every namespace.
- The command's environment is given inside the sandbox: ``--clearenv``, then one
  ``--setenv`` per variable. A loader variable (:func:`loader_variable`) in it is refused
  (:class:`LoaderVariable`): whoever configured it, the command must not load code it
  names.
- All of bubblewrap's options (the policy, the variables) go through ``--args FD``,
  NUL-separated, from a memfd: no value (an MCP server's token) reaches
  ``/proc/<pid>/cmdline``, which every local user can read. bubblewrap's own command
  line is ``bwrap --args N -- <command>`` (bubblewrap reads the command from its argv
  only; the command's own command line shows it anyway once it runs).
- The socket wall (:mod:`dshd.sandbox.seccomp`), when the policy has one, is handed to
  bubblewrap the same way (``--seccomp FD``).

Two ways to hand the memfds over: inherited descriptors (``via="fds"``, for a process
dshd spawns itself with ``pass_fds``), or, for a spawner that closes every descriptor but
stdio (the MCP SDK's), through ``/bin/sh`` opening ``/proc/<daemon pid>/fd/N`` as
descriptors 3 and 4 and exec'ing bubblewrap (``via="proc"``; the daemon keeps the memfds
open until the process has started: :meth:`SandboxStart.close`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dshd.sandbox.policy import SandboxPolicy, bwrap_options, replaced_folders, socket_filter
from dshd.sandbox.seccomp import program

# bubblewrap's own environment: a fixed one (its program path is absolute).
BWRAP_ENV: dict[str, str] = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
# glibc's list of variables it drops for set-user-ID programs (unsecvars.h) but TMPDIR,
# and every LD_* name: each makes the loader or libc read code or data from a path.
LOADER_NAMES = frozenset(
    {
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
    }
)
SHELL = "/bin/sh"
# via="proc": the memfds opened by path as descriptors 3 (arguments) and 4 (the wall);
# the variables the MCP SDK adds to every server's environment (and the PWD sh sets)
# are dropped first.
_PROC_SCRIPT = 'unset HOME LOGNAME SHELL TERM USER PWD; p=$1; shift; exec "$0" --args 3 "$@" 3<"$p"'
_PROC_SCRIPT_WALL = 'unset HOME LOGNAME SHELL TERM USER PWD; p=$1 s=$2; shift 2; exec "$0" --args 3 "$@" 3<"$p" 4<"$s"'
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def loader_variable(name: str) -> bool:
    """Whether ``name`` makes the dynamic loader or libc load something it names."""
    return name.startswith("LD_") or name in LOADER_NAMES


class LoaderVariable(ValueError):
    """A configured environment holds a loader variable (``name``)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"env {name} is a loader variable: it would make programs load code or data it names, so it is refused"
        )
        self.name = name


@dataclass
class SandboxStart:
    """How to start one sandboxed process: ``argv`` with ``env`` (bubblewrap's own), the
    descriptors to pass on (``via="fds"``); :meth:`close` once it has started."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    replaced: tuple[Path, ...]  # the folders it sees empty
    # Host sockets bound over or back in (listed now; they come and go): one gone by the
    # time bubblewrap binds it makes the start fail, and the caller may build it again.
    covered: tuple[Path, ...]
    wall: str | None  # the socket filter loaded ("strict", "unix"), or None
    _open: list[int] = field(default_factory=list, repr=False)

    def close(self) -> None:
        while self._open:
            try:
                os.close(self._open.pop())
            except OSError:
                pass


def checked_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a command's environment; raises :class:`LoaderVariable` for a loader
    variable, ValueError for a name or value bubblewrap cannot set."""
    for name, value in env.items():
        if loader_variable(name):
            raise LoaderVariable(name)
        if not _NAME.fullmatch(name) or "\0" in value:
            raise ValueError(f"env {name!r} is not a variable name with a value")
    return dict(env)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sandbox_start(
    policy: SandboxPolicy,
    command: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    bwrap: str,
    via: Literal["fds", "proc"] = "fds",
    wall: bool = True,
) -> SandboxStart:
    """Start ``command`` in ``cwd`` under ``policy`` with exactly ``env``.

    ``bwrap``: bubblewrap's absolute path. ``wall``: False only where the person's
    downgrade allows running without the socket filter when it cannot be loaded (the
    caller decides, from the probe). Raises :class:`LoaderVariable`, and
    :class:`dshd.sandbox.seccomp.SeccompUnavailable` when the wall cannot be built."""
    child_env = checked_env(env)
    variant = socket_filter(policy) if wall else None
    wall_program = program(variant) if variant is not None else None
    args = bwrap_options(policy, cwd, child_env)
    tail = ["--", *command]  # bubblewrap takes the command from its own argv only
    opened: list[int] = []
    try:
        if via == "fds":
            if wall_program is not None:
                seccomp_fd = _memfd("dshd-seccomp", wall_program)
                opened.append(seccomp_fd)
                args = ["--seccomp", str(seccomp_fd), *args]
            args_fd = _memfd("dshd-bwrap-args", _nul_joined(args))
            opened.append(args_fd)
            argv = [bwrap, "--args", str(args_fd), *tail]
            pass_fds = tuple(opened)
        else:
            if wall_program is not None:
                args = ["--seccomp", "4", *args]
            args_fd = _memfd("dshd-bwrap-args", _nul_joined(args))
            opened.append(args_fd)
            me = os.getpid()
            paths = [f"/proc/{me}/fd/{args_fd}"]
            if wall_program is not None:
                seccomp_fd = _memfd("dshd-seccomp", wall_program)
                opened.append(seccomp_fd)
                paths.append(f"/proc/{me}/fd/{seccomp_fd}")
            script = _PROC_SCRIPT_WALL if wall_program is not None else _PROC_SCRIPT
            argv = [SHELL, "-c", script, bwrap, *paths, *tail]
            pass_fds = ()
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    covered = (*policy.mask, *(policy.allow if policy.sockets == "listed" else ()))
    return SandboxStart(argv, dict(BWRAP_ENV), pass_fds, replaced_folders(policy), covered, variant, opened)


def _nul_joined(args: Sequence[str]) -> bytes:
    out = bytearray()
    for arg in args:
        data = arg.encode("utf-8", "surrogateescape")
        if b"\0" in data:
            raise ValueError("an argument holds a NUL character")
        out += data + b"\0"
    return bytes(out)
