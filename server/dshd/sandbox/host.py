"""The sandbox policy for one start on this host, read from the host now.

:mod:`dshd.sandbox.policy` is pure; this is the one place that fills a
:class:`SandboxPolicy` from what the host has at the moment something starts in it (a
command of ``run_command``, an MCP server): which protected names exist in the workspace,
which socket folders there are to hide (with the network off, and where the person's
``unixSockets`` downgrade applies), which listening sockets to cover under that downgrade
(they come and go, so they are read at each start), which links inside those folders to
make again, which folders to conceal in every mode (the shared daemon's), and which folders
a program was installed in where the sandbox would show an empty folder instead.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from dshd.sandbox.policy import Mode, SandboxPolicy, Sockets, hides_sockets, replaced_folders
from dshd.sandbox.sockets import kept_links, listening_sockets, socket_folders


def host_policy(
    mode: Mode,
    network: bool,
    workspace: Path,
    protected: Iterable[str],
    *,
    show_installed: Sequence[str] = (),
    unix_sockets: Sequence[str] = (),
    conceal: Iterable[str | Path] = (),
) -> SandboxPolicy:
    """The policy for ``mode`` and ``network`` on ``workspace`` as the host is now.

    ``protected``: names inside the workspace kept read-only (only those that exist are
    passed on: bubblewrap cannot bind a missing path). ``show_installed``: a command line
    whose program and path arguments are shown again, read-only, where they live under a
    folder the sandbox replaces (:func:`installed_in`). ``unix_sockets``: the user
    config's ``[tools] unixSockets`` (absolute socket paths, or ``"*"``). ``conceal``:
    folders hidden in every mode (those that exist, links resolved)."""
    protect = tuple(workspace / name for name in protected if os.path.lexists(workspace / name))
    sockets: Sockets = "all" if "*" in unix_sockets else "listed" if unix_sockets else "refused"
    # The listed sockets there now (bubblewrap cannot bind a missing one), links resolved.
    allow = tuple(dict.fromkeys(
        Path(os.path.realpath(p)) for p in unix_sockets if p != "*" and os.path.isabs(p) and _is_socket(p)
    ))
    hidden = tuple(dict.fromkeys(Path(os.path.realpath(f)) for f in conceal if os.path.isabs(f) and os.path.isdir(f)))
    hide: tuple[Path, ...] = ()
    mask: tuple[Path, ...] = ()
    links: tuple[tuple[str, Path], ...] = ()
    probe = SandboxPolicy(mode, network, workspace, sockets=sockets)
    if hides_sockets(probe):
        hide = socket_folders()
        links = kept_links(hide)
        if sockets != "refused":
            # AF_UNIX allowed (the person's downgrade): cover the rest as well as can be.
            mask = listening_sockets()
    policy = SandboxPolicy(mode, network, workspace, protect, hide, mask, links, (), sockets, allow, hidden)
    show = installed_in(replaced_folders(policy), show_installed) if show_installed else ()
    if show:
        policy = SandboxPolicy(mode, network, workspace, protect, hide, mask, links, show, sockets, allow, hidden)
    return policy


def installed_in(replaced: tuple[Path, ...], command: Sequence[str]) -> tuple[Path, ...]:
    """The folders a program and its path arguments live in, where the sandbox would show
    an empty folder instead (a checkout or an install under /tmp): for each, the first
    folder below the replaced one (``/tmp/checkout`` for ``/tmp/checkout/.venv/bin/python``),
    so that it can be shown again read-only and the program can start from where the person
    installed it. Links are not followed to get there: a folder that is a link is left out."""
    found: list[Path] = []
    program = command[0] if command else ""
    candidates = [shutil.which(program) or program, *command[1:]]
    for text in candidates:
        if not text or not os.path.isabs(text) or not os.path.exists(text):
            continue
        path = Path(os.path.normpath(text))
        for folder in replaced:
            if folder in path.parents:
                top = folder / path.relative_to(folder).parts[0]
                if top.is_dir() and not top.is_symlink() and top not in found:
                    found.append(top)
    return tuple(found)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
