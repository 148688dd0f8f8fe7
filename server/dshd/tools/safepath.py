"""Opening workspace files through directory handles, never by name.

A tool resolves its path once (:func:`dshd.tools.paths.resolve`: links whose target stays
inside the workspace are followed there). What is opened afterwards is that resolved path,
walked one component at a time from a handle on the workspace root: every folder is
opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the one before it, and the file at the
end with ``O_NOFOLLOW``. The resolved path holds no links, so a link met on the way means
something swapped a folder (or the file) for one since: the call fails with
:class:`UnsafePath` (its text starts ``unsafe-path`` and names the path) instead of
following it out of the workspace. A folder renamed away while its handle is held stays
the same folder, so whatever is written lands where the walk was checked.

Writes go to a temporary file made with ``O_EXCL`` in the file's folder handle, renamed
over the name with both ends relative to that handle. Reads check that the file is a
regular one (``O_NONBLOCK``: a FIFO neither blocks the open nor gets read) and read at most
``cap + 1`` bytes, so a file over its cap is refused without being held in memory.

Everything here is by handle; by-name helpers from :mod:`os.path` or :mod:`pathlib` are
not used on workspace paths after the resolve.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from dshd.tools.paths import PathRefused

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_SUFFIX = ".dsh-tmp"
CHUNK = 1 << 20


class UnsafePath(PathRefused):
    """A link (or a non-folder) where the resolved path had a plain folder or file."""

    def __init__(self, shown: str, why: str) -> None:
        self.shown = shown
        super().__init__(f"unsafe-path: {shown}: {why}; nothing was read or written")


class NotRegular(PathRefused):
    """The entry is there but is not a regular file (a folder, FIFO, socket, device)."""

    def __init__(self, shown: str, kind: str) -> None:
        self.kind = kind
        super().__init__(f"{shown} is {kind}, not a regular file")


class TooBig(PathRefused):
    def __init__(self, shown: str, size: int | None, cap: int) -> None:
        self.size, self.cap = size, cap
        what = f"{size} bytes" if size is not None else "more than that"
        super().__init__(f"{shown} is over the size cap of {human(cap)} ({what}); it was not read")


def human(size: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def parts_of(root: Path, target: Path) -> tuple[str, ...]:
    """The components of the resolved ``target`` below the resolved ``root``."""
    return target.relative_to(root).parts


def _shown(parts: tuple[str, ...]) -> str:
    return "/".join(parts) or "."


def open_root(root: Path) -> int:
    """A handle on the workspace root (the root's own path is the person's choice)."""
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_folder(root_fd: int, parts: tuple[str, ...], *, create: bool = False) -> int:
    """A handle on the folder ``parts`` below ``root_fd``, walked without following links
    (``create``: missing folders are made, as ``mkdir -p`` would). The caller closes it."""
    if not parts:
        return os.dup(root_fd)
    fd = root_fd  # not ours to close: every later one is
    walked: list[str] = []
    try:
        for part in parts:
            walked.append(part)
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_dir_or_refuse(fd, part, tuple(walked))
            except OSError as exc:
                child = _refuse(fd, part, tuple(walked), exc)
            if fd != root_fd:
                os.close(fd)
            fd = child
        return fd
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise


def _open_dir_or_refuse(fd: int, part: str, walked: tuple[str, ...]) -> int:
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        return _refuse(fd, part, walked, exc)


def _refuse(fd: int, part: str, walked: tuple[str, ...], exc: OSError) -> NoReturn:
    """Why a folder of the path did not open. ELOOP is a link there; ENOTDIR with a link
    or a folder there now is one that was swapped in or out meanwhile."""
    if exc.errno == errno.ELOOP or exc.errno == errno.ENOTDIR and _mode(fd, part) in ("link", "folder"):
        raise UnsafePath(_shown(walked), "this folder is (or was, a moment ago) a symbolic link") from None
    if exc.errno == errno.ENOTDIR:
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", _shown(walked)) from None
    raise exc


def _mode(dir_fd: int, name: str) -> str | None:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return None
    return "link" if stat.S_ISLNK(mode) else "folder" if stat.S_ISDIR(mode) else "other"


@contextmanager
def parent_of(root: Path, target: Path, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """``(handle on the folder holding target, target's name)``; closed on exit."""
    parts = parts_of(root, target)
    if not parts:
        raise PathRefused(". is the workspace root itself, not a file")
    root_fd = open_root(root)
    try:
        folder = open_folder(root_fd, parts[:-1], create=create)
    finally:
        os.close(root_fd)
    try:
        yield folder, parts[-1]
    finally:
        os.close(folder)


def lstat(root: Path, target: Path) -> os.stat_result | None:
    """The entry at ``target`` as it is (None: not there). A link there is unsafe: the
    resolved path had none."""
    if target == root:
        return os.stat(root)
    try:
        with parent_of(root, target) as (folder, name):
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(_shown(parts_of(root, target)), "this file was replaced with a symbolic link")
    return st


def open_regular(root: Path, target: Path, cap: int) -> tuple[int, os.stat_result]:
    """A handle on the regular file ``target`` of at most ``cap`` bytes, and its stat
    (else :class:`UnsafePath`, :class:`NotRegular`, :class:`TooBig`; missing:
    FileNotFoundError). The caller closes it."""
    parts = parts_of(root, target)
    if not parts:
        raise PathRefused(". is the workspace root itself, not a file")
    root_fd = open_root(root)
    try:
        folder = open_folder(root_fd, parts[:-1])
    finally:
        os.close(root_fd)
    try:
        fd = os.open(parts[-1], READ_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # with O_NOFOLLOW: a link is there
            raise UnsafePath(_shown(parts), "this file was replaced with a symbolic link") from None
        raise
    finally:
        os.close(folder)
    try:
        return fd, check_regular(fd, parts, cap)
    except BaseException:
        os.close(fd)
        raise


def check_regular(fd: int, shown: str | tuple[str, ...], cap: int) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
        name = shown if isinstance(shown, str) else _shown(shown)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(name, kind_of(st.st_mode))
        raise TooBig(name, st.st_size, cap)
    return st


def read_bytes(root: Path, target: Path, cap: int) -> bytes:
    """The bytes of the regular file ``target`` (at most ``cap``; more is :class:`TooBig`,
    read no further than ``cap + 1``). Missing: FileNotFoundError."""
    fd, st = open_regular(root, target, cap)
    try:
        return read_at_most(fd, target.name, cap, st.st_size)
    finally:
        os.close(fd)


def read_open(fd: int, shown: str, cap: int) -> bytes:
    """Read an open handle: a regular file of at most ``cap`` bytes, else refused."""
    st = check_regular(fd, shown, cap)
    return read_at_most(fd, shown, cap, st.st_size)


def read_at_most(fd: int, shown: str, cap: int, size: int = CHUNK) -> bytes:
    """Up to ``cap`` bytes from ``fd``; :class:`TooBig` when there is more (it grew).
    ``size``: the file's size when opened (the first read asks for one byte more)."""
    chunks: list[bytes] = []
    left = cap + 1
    ask = min(size + 1, CHUNK)
    while left > 0:
        chunk = os.read(fd, min(left, ask))
        ask = CHUNK
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > cap:
        raise TooBig(shown, None, cap)  # it grew while being read
    return data


def resolve_inside(root: Path, path: str | Path) -> Path:
    """``path`` (relative to ``root``, or absolute) resolved once, links followed; refused
    when that leads outside ``root``. For files the workspace names (its config, AGENTS.md,
    the scripted model's script): they are then opened with :func:`read_bytes`."""
    root = Path(root).resolve()
    try:
        target = (root / path).resolve()
    except OSError as exc:
        raise PathRefused(f"unsafe-path: {path} changed while it was being resolved ({exc.strerror or exc})") from None
    if target == root or not target.is_relative_to(root):
        lexical = Path(os.path.normpath(root / path))
        how = " through a symbolic link" if lexical.is_relative_to(root) else ""
        raise PathRefused(f"{path} is outside the workspace{how}: only a file inside the workspace is read")
    return target


def read_inside(root: Path, path: str | Path, cap: int) -> bytes:
    """The bytes of a file the workspace names: resolved inside ``root``, a regular file,
    at most ``cap`` bytes (else refused, with nothing read). Missing: FileNotFoundError."""
    root = Path(root).resolve()
    return read_bytes(root, resolve_inside(root, path), cap)


def read_by_name(path: Path, cap: int) -> bytes:
    """A file the person named (outside any workspace rule): still a regular file of at
    most ``cap`` bytes, opened without blocking (a FIFO is refused, not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return read_open(fd, str(path), cap)
    finally:
        os.close(fd)


def write_atomically(root: Path, target: Path, data: bytes) -> None:
    """Replace (or create) ``target`` with ``data``: parents made, a temporary file with
    ``O_EXCL`` beside it, renamed over it within the same folder handle. An existing file
    keeps its mode; a new one gets 0666 less the umask."""
    shown = _shown(parts_of(root, target))
    with parent_of(root, target, create=True) as (folder, name):
        try:
            old = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise UnsafePath(shown, "this file was replaced with a symbolic link")
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise NotRegular(shown, kind_of(old.st_mode))
        temp, fd = _temp_file(folder, name)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view[:CHUNK]):]
                if old is not None:
                    os.fchmod(fd, stat.S_IMODE(old.st_mode))
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=folder)
            except OSError:
                pass
            raise


def _temp_file(folder: int, name: str) -> tuple[str, int]:
    for _ in range(16):
        temp = f".{name}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
        try:
            return temp, os.open(temp, TEMP_FLAGS, 0o666, dir_fd=folder)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


class Folders:
    """Folder handles kept open for many lookups (checking a listing's paths): each folder
    walked once, from the root handle, without following links."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fds: dict[tuple[str, ...], int | None] = {}
        self._root_fd = open_root(root)

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()
        os.close(self._root_fd)

    def __enter__(self) -> "Folders":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def folder(self, parts: tuple[str, ...]) -> int | None:
        """A handle on ``parts`` (None: missing, a link, or not a folder)."""
        if not parts:
            return self._root_fd
        if parts in self._fds:
            return self._fds[parts]
        parent = self.folder(parts[:-1])
        fd = None
        if parent is not None:
            try:
                fd = os.open(parts[-1], DIR_FLAGS, dir_fd=parent)
            except OSError:
                fd = None
        self._fds[parts] = fd
        return fd

    def _place(self, rel: str) -> tuple[int, str] | None:
        """The handle of the folder holding ``rel`` (relative to the root, no ``..``) and
        the entry's name in it, reached through plain folders; else None."""
        parts = tuple(p for p in rel.split("/") if p not in ("", "."))
        if not parts or ".." in parts:
            return None
        folder = self.folder(parts[:-1])
        return None if folder is None else (folder, parts[-1])

    def entry(self, rel: str) -> os.stat_result | None:
        """The entry at ``rel`` (relative to the root, no ``..``) if it is really there
        inside the workspace, reached through plain folders; else None."""
        place = self._place(rel)
        if place is None:
            return None
        folder, name = place
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return None

    def read(self, rel: str, cap: int) -> bytes | None:
        """The regular file at ``rel`` (at most ``cap`` bytes), through the handles; None
        when it is not a regular file inside the workspace or is over the cap."""
        place = self._place(rel)
        if place is None:
            return None
        folder, name = place
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=folder)
        except OSError:
            return None
        try:
            return read_open(fd, rel, cap)
        except (PathRefused, OSError):
            return None
        finally:
            os.close(fd)
