"""The socket wall: a seccomp program that bubblewrap loads (``--seccomp FD``) into the
sandboxed command just before it runs.

An allowlist of socket families, not a list of sockets: ``socket()`` succeeds only for
AF_INET and AF_INET6 (with the network off they reach the sandbox's own loopback and
nothing else) and AF_NETLINK (what ``getaddrinfo`` and ``ip`` read the interfaces with);
every other family, AF_UNIX included, fails with EPERM. So no host Unix socket can be
reached however it was bound or named (absolute, relative, renamed or linked into
place, bound after the command started, abstract), because no Unix socket can be made to
connect with. ``socketpair(AF_UNIX)`` stays allowed (pipes between the command's own
processes; a pair is connected already and cannot connect anywhere else).
``io_uring_setup`` is refused: io_uring can open and connect sockets without the
``socket`` system call. On the other ABIs of this machine (x32, i386) ``socket`` and
``socketcall`` are refused whole: ``socketcall`` passes its arguments through memory a
filter cannot read.

The ``unix`` variant adds AF_UNIX to the allowlist, for the person's named downgrade
(``[tools] unixSockets`` in their user config).

The comparison is on the whole 64-bit register: a family with high bits set (which the
kernel would truncate to an ``int``) is outside every allowed value, so it is refused.

Built with libseccomp (the ``pyseccomp`` binding), imported on first use; each variant's
program is built once per process (about half a millisecond) and kept as bytes.
"""

from __future__ import annotations

import errno
import socket
from typing import Literal

Variant = Literal["strict", "unix"]

AF_UNSPEC, AF_UNIX = 0, socket.AF_UNIX
ALLOWED = {"strict": (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)}
ALLOWED["unix"] = (AF_UNIX, *ALLOWED["strict"])
HIGHEST_FAMILY_CHECKED = 63  # families above this one are refused by one comparison

_programs: dict[str, bytes] = {}


class SeccompUnavailable(Exception):
    """No socket wall can be built here (libseccomp or its binding missing)."""


def program(variant: Variant) -> bytes:
    """The compiled program (classic BPF, as ``--seccomp`` reads it) for ``variant``."""
    found = _programs.get(variant)
    if found is None:
        found = _programs[variant] = _build(ALLOWED[variant])
    return found


def _build(allowed: tuple[int, ...]) -> bytes:
    import os

    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # the binding, or the system's libseccomp.so.2
        raise SeccompUnavailable(f"libseccomp cannot be loaded ({exc})") from None
    refuse = sc.ERRNO(errno.EPERM)
    try:
        native = sc.SyscallFilter(sc.ALLOW)
        # socket(): refused for every family not allowed. libseccomp ORs rules of one
        # system call: one per refused family up to HIGHEST_FAMILY_CHECKED, one above it.
        for family in range(HIGHEST_FAMILY_CHECKED + 1):
            if family not in allowed:
                native.add_rule(refuse, "socket", sc.Arg(0, sc.EQ, family))
        native.add_rule(refuse, "socket", sc.Arg(0, sc.GT, HIGHEST_FAMILY_CHECKED))
        native.add_rule(refuse, "socketpair", sc.Arg(0, sc.NE, AF_UNIX))
        for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
            native.add_rule(refuse, name)
        others = sc.SyscallFilter(sc.ALLOW)
        others.remove_arch(sc.Arch.NATIVE)
        native_arch = sc.system_arch()
        for arch in (sc.Arch.X86, sc.Arch.X32) if native_arch == sc.Arch.X86_64 else ():
            others.add_arch(arch)
        if native_arch == sc.Arch.X86_64:
            for name in ("socket", "socketcall", "io_uring_setup"):
                others.add_rule(refuse, name)
            native.merge(others)
        fd = os.memfd_create("dshd-seccomp", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as out:
                native.export_bpf(out)
            os.lseek(fd, 0, os.SEEK_SET)
            data = b""
            while chunk := os.read(fd, 65536):
                data += chunk
        finally:
            os.close(fd)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp could not build the socket filter ({exc})") from None
    if not data or len(data) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed socket filter")
    return data
