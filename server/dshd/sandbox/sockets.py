"""Where the host's Unix sockets are, for a sandbox to hide them as well as a list can.

This is not the wall: the wall is the seccomp socket filter (:mod:`dshd.sandbox.seccomp`),
which lets no Unix socket be made at all. What is here serves two things: the folders
that hold sockets (``/tmp``, ``/run`` and its ``/var/run`` alias, ``$XDG_RUNTIME_DIR``) are
hidden whole with the network off (they also hold the shared daemon's folder); and under
the person's ``[tools] unixSockets`` downgrade, where Unix sockets are allowed, every
other socket the host is listening on (``/proc/net/unix``) is covered one by one, a list
of holes that misses a socket renamed into place, bound by a relative path or made after
the start. Read each time something starts: sockets come and go.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

SOCKET_FOLDERS = ("/tmp", "/run", "/var/run")
LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags column


def socket_folders(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The existing socket folders of this host, links resolved, none inside another."""
    env = os.environ if env is None else env
    found: set[Path] = set()
    for name in (*SOCKET_FOLDERS, env.get("XDG_RUNTIME_DIR", "")):
        if not name or not os.path.isabs(name):
            continue
        real = Path(os.path.realpath(name))
        if real != Path("/") and real.is_dir():
            found.add(real)
    return tuple(sorted(f for f in found if not any(o != f and o in f.parents for o in found)))


def kept_links(folders: tuple[Path, ...]) -> tuple[tuple[str, Path], ...]:
    """(target, link) for each symbolic link right inside a hidden folder that leads out
    of them all to something that is not a socket: made again in the empty folder, so that
    what lives elsewhere stays reachable by its usual name (NixOS keeps its programs
    behind /run/current-system and /run/wrappers; /run/shm leads to /dev/shm)."""
    kept: list[tuple[str, Path]] = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_symlink():
                    continue
                target = os.readlink(entry.path)
                real = Path(os.path.realpath(entry.path))
                if any(real == f or f in real.parents for f in folders) or stat.S_ISSOCK(os.stat(real).st_mode):
                    continue
            except OSError:
                continue  # dangling, or gone meanwhile
            kept.append((target, Path(entry.path)))
    return tuple(kept)


def listening_sockets(table: str = "/proc/net/unix") -> tuple[Path, ...]:
    """Path sockets someone listens on in this network namespace (abstract ones left out:
    a network namespace of its own already hides those)."""
    try:
        lines = Path(table).read_text(errors="replace").splitlines()[1:]
    except OSError:
        return ()
    found: list[Path] = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue
        try:
            if not int(fields[3], 16) & LISTENING:
                continue
        except ValueError:
            continue
        # Links resolved (bubblewrap would follow them); the path as this mount namespace
        # sees it must still be a socket (not a file put there since).
        path = Path(os.path.realpath(fields[7]))
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        found.append(path)
    return tuple(dict.fromkeys(found))
