"""A sandbox policy as a bubblewrap command line (pure: no I/O, no environment).

Modes:

- ``read-only``: the whole file system read-only (``--ro-bind / /``); writes fail with
  EROFS wherever they go (the workspace, ``$HOME``, ``/tmp``).
- ``workspace-write``: the same, then a private ``/tmp`` (an empty tmpfs that vanishes with
  the command), then the workspace bound writable, then each protected path inside it
  (``.git``, ``.dsh``: only those that exist, bubblewrap cannot bind a missing path) bound
  read-only again. Order matters: a later mount hides an earlier one, so a workspace under
  ``/tmp`` is bound after the tmpfs.
- ``full-access``: the whole file system bound writable (``--bind / /``) and the host's
  devices; nothing is restricted but the network (when it is off).

Every mode runs the command in its own PID namespace with a fresh ``/proc``: when the
command ends, or bubblewrap is killed, the kernel kills everything left in it, and the
daemon's ``/proc/<pid>/environ`` is not there to read. ``--die-with-parent`` ties the
sandbox to the process that started it (the daemon dying, even by SIGKILL, ends it).

Network off (every mode) means no socket reaches the host:

- its own network namespace (``--unshare-net``): only a loopback device of its own, so TCP
  to the host's 127.0.0.1 is ECONNREFUSED, anything else ENETUNREACH; abstract Unix sockets
  belong to a network namespace too, so the host's are unreachable (ECONNREFUSED);
- Unix sockets on the file system are not covered by that: the folders where hosts keep
  them (:attr:`SandboxPolicy.hide`: ``/tmp``, ``/run``, ``$XDG_RUNTIME_DIR``) are replaced
  by empty tmpfs mounts (read-only ones outside full-access; ``/tmp`` stays the private
  writable one in workspace-write), and outside full-access every other listening socket
  the host has (:attr:`SandboxPolicy.mask`) gets ``/dev/null`` bound over it
  (ECONNREFUSED). A workspace inside a hidden folder is bound again after the tmpfs, so it
  stays visible, and so do the links right inside a hidden folder that lead elsewhere
  (:attr:`SandboxPolicy.links`: NixOS's ``/run/current-system``, ``/run/shm``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["read-only", "workspace-write", "full-access"]
MODES: tuple[str, ...] = ("read-only", "workspace-write", "full-access")
PRIVATE_TMP = Path("/tmp")
DEV = Path("/dev")


@dataclass(frozen=True)
class SandboxPolicy:
    mode: Mode
    network: bool
    workspace: Path  # absolute, resolved
    # Paths inside the workspace kept read-only in workspace-write; pass only existing ones.
    protect: tuple[Path, ...] = field(default=())
    # With the network off: host folders that hold sockets, hidden under an empty tmpfs
    # (resolved, existing folders; see dshd.sandbox.sockets.socket_folders).
    hide: tuple[Path, ...] = field(default=())
    # With the network off: host sockets outside those folders, covered with /dev/null
    # (see dshd.sandbox.sockets.listening_sockets).
    mask: tuple[Path, ...] = field(default=())
    # With the network off: links inside hidden folders made again there, as (target, link)
    # (see dshd.sandbox.sockets.kept_links).
    links: tuple[tuple[str, Path], ...] = field(default=())
    # Folders inside the replaced ones shown again, read-only (an MCP server installed in a
    # checkout under /tmp); the sockets listening in them are covered like any other.
    show: tuple[Path, ...] = field(default=())


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def replaced_folders(policy: SandboxPolicy) -> tuple[Path, ...]:
    """The host folders the command sees empty (its own tmpfs in their place), the
    workspace aside: workspace-write's private /tmp, and with the network off the socket
    folders."""
    folders = [PRIVATE_TMP] if policy.mode == "workspace-write" else []
    if not policy.network:
        folders += [folder for folder in policy.hide if folder not in folders]
    return tuple(f for f in folders if not any(o != f and _within(f, o) for o in folders))


def bwrap_argv(policy: SandboxPolicy, command: list[str], cwd: Path, *, bwrap: str = "bwrap") -> list[str]:
    """The argv that runs ``command`` in ``cwd`` under ``policy``."""
    if policy.mode not in MODES:
        raise ValueError(f"unknown sandbox mode {policy.mode!r}")
    workspace = policy.workspace
    full = policy.mode == "full-access"
    if full:
        argv = [bwrap, "--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    else:
        argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--unshare-pid", "--new-session", "--die-with-parent"]
    if not policy.network:
        argv.append("--unshare-net")

    tmpfs = replaced_folders(policy)
    # One inside the workspace is hidden again after the workspace is bound (the bind
    # would show it again).
    before = [f for f in tmpfs if not _within(f, workspace) or f == workspace]
    after = [f for f in tmpfs if f not in before]
    for folder in before:
        argv += ["--tmpfs", str(folder)]
    # Before the workspace's bind: a shown folder that holds the workspace must not cover it.
    shown = [f for f in policy.show if any(_within(f, folder) and f != folder for folder in before)]
    for folder in shown:
        argv += ["--ro-bind", str(folder), str(folder)]
    if policy.mode == "workspace-write":
        argv += ["--bind", str(workspace), str(workspace)]
    elif any(_within(workspace, folder) for folder in before):
        argv += ["--bind" if full else "--ro-bind", str(workspace), str(workspace)]
    for folder in after:
        argv += ["--tmpfs", str(folder)]
    for target, link in policy.links:
        if any(link.parent == folder for folder in tmpfs) and not _within(link, workspace):
            argv += ["--symlink", target, str(link)]
    if policy.mode == "workspace-write":
        for path in policy.protect:
            argv += ["--ro-bind", str(path), str(path)]
    if not policy.network and not full:
        # Not in full access: there the root is the host's, writable, and a socket removed
        # before bubblewrap binds over it would come back as an empty file on the host.
        # Under a read-only root that race only makes bubblewrap fail, before the command.
        for sock in policy.mask:
            if _within(sock, workspace):
                continue  # the workspace's own
            if any(_within(sock, folder) for folder in tmpfs) and not any(_within(sock, f) for f in shown):
                continue  # hidden with its folder
            if _within(sock, DEV):
                continue  # a fresh /dev holds no socket of the host's
            argv += ["--ro-bind", "/dev/null", str(sock)]
    if not full:
        # Last: the mount points above had to be made in them while they were writable.
        for folder in tmpfs:
            if not (policy.mode == "workspace-write" and folder == PRIVATE_TMP):
                argv += ["--remount-ro", str(folder)]
    argv += ["--chdir", str(cwd), "--", *command]
    return argv
