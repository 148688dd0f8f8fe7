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

Host sockets (what reaches them is decided by :func:`socket_filter`, see
:mod:`dshd.sandbox.seccomp` for the wall itself):

- with the network off, every mode, the command has its own network namespace
  (``--unshare-net``): only a loopback device of its own, so TCP to the host's 127.0.0.1 is
  ECONNREFUSED, anything else ENETUNREACH, and the host's abstract Unix sockets are not in
  it;
- the wall for Unix sockets is a seccomp allowlist of socket families loaded into the
  command (``socket()`` only for AF_INET, AF_INET6, AF_NETLINK): with the network off in
  every mode, and with the network on in read-only and workspace-write. No host socket is
  reachable however it was named or when it was bound. Only full-access with the network
  on keeps the host's sockets;
- the person's user config may name host sockets to reach (:attr:`SandboxPolicy.sockets`
  "listed", ``[tools] unixSockets``): AF_UNIX is then allowed, and the other sockets are
  hidden as well as can be (a downgrade the person chose): the folders where hosts keep
  them (:attr:`SandboxPolicy.hide`: ``/tmp``, ``/run``, ``$XDG_RUNTIME_DIR``) replaced by
  empty tmpfs mounts (read-only ones outside full-access; ``/tmp`` stays the private
  writable one in workspace-write), every other listening socket the host has
  (:attr:`SandboxPolicy.mask`) covered with ``/dev/null`` outside full-access, the listed
  ones bound back in. ``"*"`` (:attr:`SandboxPolicy.sockets` "all") allows Unix sockets
  with nothing shown again. With the network off the socket folders are hidden in every
  case (they also hold the shared daemon's folder). A workspace inside a hidden folder is
  bound again after the tmpfs, so it stays visible, and so do the links right inside a
  hidden folder that lead elsewhere (:attr:`SandboxPolicy.links`: NixOS's
  ``/run/current-system``, ``/run/shm``);
- :attr:`SandboxPolicy.conceal`: folders hidden under an empty tmpfs in every mode and
  whatever the network (the shared daemon's socket folder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["read-only", "workspace-write", "full-access"]
# What the person's [tools] unixSockets says: none (refused), some (listed), "*" (all).
Sockets = Literal["refused", "listed", "all"]
SocketFilter = Literal["strict", "unix"]
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
    # Unix sockets: refused by the seccomp wall, or the person's downgrade (see above).
    sockets: Sockets = "refused"
    # With sockets "listed": the host sockets bound back in where their folder is hidden.
    allow: tuple[Path, ...] = field(default=())
    # Folders hidden under an empty tmpfs in every mode, whatever the network.
    conceal: tuple[Path, ...] = field(default=())


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def hides_sockets(policy: SandboxPolicy) -> bool:
    """Whether the socket folders are hidden: with the network off, and with the network
    on where the person listed sockets (the others hidden as well as can be)."""
    if policy.network and policy.mode == "full-access":
        return False
    return not policy.network or policy.sockets == "listed"


def socket_filter(policy: SandboxPolicy) -> SocketFilter | None:
    """The seccomp socket wall this policy loads: none only in full-access with the
    network on (the host's sockets, as that mode says); AF_UNIX too where the person's
    user config allowed Unix sockets."""
    if policy.mode == "full-access" and policy.network:
        return None
    return "strict" if policy.sockets == "refused" else "unix"


def replaced_folders(policy: SandboxPolicy) -> tuple[Path, ...]:
    """The host folders the command sees empty (its own tmpfs in their place), the
    workspace aside: workspace-write's private /tmp, the concealed folders, and the socket
    folders where they are hidden."""
    folders = [PRIVATE_TMP] if policy.mode == "workspace-write" else []
    if hides_sockets(policy):
        folders += [folder for folder in policy.hide if folder not in folders]
    folders += [folder for folder in policy.conceal if folder not in folders]
    return tuple(f for f in folders if not any(o != f and _within(f, o) for o in folders))


def bwrap_argv(policy: SandboxPolicy, command: list[str], cwd: Path, *, bwrap: str = "bwrap") -> list[str]:
    """The argv that runs ``command`` in ``cwd`` under ``policy`` (bubblewrap's own
    environment passed on; :mod:`dshd.sandbox.launcher` gives it one of its own)."""
    return [bwrap, *bwrap_args(policy, command, cwd)]


def bwrap_args(
    policy: SandboxPolicy, command: list[str], cwd: Path, env: dict[str, str] | None = None
) -> list[str]:
    """bubblewrap's arguments (its program left out) that run ``command`` in ``cwd`` under
    ``policy``; with ``env``, the command's whole environment (``--clearenv``, then one
    ``--setenv`` each)."""
    return [*bwrap_options(policy, cwd, env), "--", *command]


def bwrap_options(policy: SandboxPolicy, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """The options of :func:`bwrap_args`, without ``--`` and the command (bubblewrap
    reads options from ``--args FD``, never the command)."""
    if policy.mode not in MODES:
        raise ValueError(f"unknown sandbox mode {policy.mode!r}")
    workspace = policy.workspace
    full = policy.mode == "full-access"
    if full:
        argv = ["--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    else:
        argv = ["--ro-bind", "/", "/", "--dev", "/dev"]
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
    allowed = policy.allow if policy.sockets == "listed" else ()
    for sock in allowed:
        if any(_within(sock, folder) for folder in tmpfs) and not _within(sock, workspace):
            argv += ["--bind" if full else "--ro-bind", str(sock), str(sock)]
    if hides_sockets(policy) and not full:
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
            if sock in allowed:
                continue  # one the person listed
            argv += ["--ro-bind", "/dev/null", str(sock)]
    if not full:
        # Last: the mount points above had to be made in them while they were writable.
        for folder in tmpfs:
            if not (policy.mode == "workspace-write" and folder == PRIVATE_TMP):
                argv += ["--remount-ro", str(folder)]
    if env is not None:
        argv.append("--clearenv")
        for name, value in env.items():
            argv += ["--setenv", name, value]
    argv += ["--chdir", str(cwd)]
    return argv
