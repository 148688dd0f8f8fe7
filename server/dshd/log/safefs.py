"""Layer 1: opening session files without following links.

Everything under a workspace's ``.dsh/`` may come from a cloned repository, so nothing
there is trusted to be what its name says. Folders are walked one component at a time
from a folder handle (``O_DIRECTORY | O_NOFOLLOW``, then ``dir_fd=``), files are opened
with ``O_NOFOLLOW`` and checked to be regular files before a byte is read or written,
and new files are made with ``O_EXCL`` (which never follows a link either). A link, or
an entry that is not a regular file or folder, is a :class:`UnsafePath`; any other OS
failure is an ``io-error`` naming the path and the OS error (:func:`io_error`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from dshd.errors import DshError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(DshError):
    """A session folder or file that is a link, or not a regular file or folder."""

    def __init__(self, path: Path | str, reason: str) -> None:
        message = f"refused {path}: {reason}; dshd opens only regular files and folders there, never through a link"
        super().__init__("unsafe-path", message, path=str(path), reason=reason)
        self.path = str(path)
        self.reason = reason


def io_error(exc: OSError, path: Path | str | None = None, action: str = "use") -> DshError:
    """``io-error`` for an OS failure: what failed (``could not <action>``), the path (the
    one the OS error names, else ``path``), the OS error's name and its words."""
    where = exc.filename if exc.filename is not None else (str(path) if path is not None else "(unknown path)")
    name = errno.errorcode.get(exc.errno, "EIO") if exc.errno else "EIO"
    words = exc.strerror or str(exc)
    hint = _IO_HINTS.get(exc.errno, "")
    return DshError("io-error", f"could not {action} {where}: {words} ({name}){hint}", path=str(where), errno=name)


_IO_HINTS = {
    errno.ENOSPC: "; free some space and try again (nothing acknowledged was lost)",
    errno.EDQUOT: "; free some space and try again (nothing acknowledged was lost)",
    errno.EROFS: "; the workspace is on a read-only file system",
    errno.EACCES: "; check the folder's permissions",
    errno.EPERM: "; check the folder's permissions",
}


def _named(exc: OSError, path: Path) -> OSError:
    """The same OS error naming the whole path (calls with ``dir_fd`` name only the last part)."""
    return type(exc)(exc.errno, exc.strerror, str(path))


def refusal(mode: int, want_dir: bool) -> str:
    """Why an entry of this ``st_mode`` is refused where a folder (``want_dir``) or a
    regular file belongs, in words."""
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if want_dir:
        return "is a file, not a folder" if stat.S_ISREG(mode) else "is not a folder"
    if stat.S_ISDIR(mode):
        return "is a folder, not a regular file"
    return "is not a regular file"


def what_is(dir_fd: int, name: str, want_dir: bool) -> str:
    """:func:`refusal` for ``name`` in the folder ``dir_fd`` (looked at without following it)."""
    try:
        return refusal(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode, want_dir)
    except OSError:
        return "changed while it was being opened"


def open_dir(path: Path, base: Path, *, create: bool = False) -> int:
    """A handle (fd) on folder ``path``, every component below ``base`` opened without
    following links (made, mode 0o755, when missing and ``create``). ``base`` itself is
    the trusted starting point (the workspace, which may well be reached through links).
    Raises UnsafePath, FileNotFoundError (missing, not ``create``), OSError."""
    path, base = Path(path), Path(base)
    parts = path.relative_to(base).parts
    if create:
        base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    here = base
    try:
        for part in parts:
            here = here / part
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError as exc:
                if not create:
                    raise _named(exc, here) from None
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)  # mkdir never follows a link (one there: EEXIST)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise _named(exc, here) from None
                child = _open_child_dir(fd, part, here)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(here, what_is(fd, part, True)) from None
                raise _named(exc, here) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child_dir(dir_fd: int, name: str, path: Path) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(path, what_is(dir_fd, name, True)) from None
        raise _named(exc, path) from None


def open_file(dir_fd: int, name: str, flags: int, path: Path, mode: int = 0o644) -> int:
    """Open ``name`` in folder ``dir_fd`` without following a link; refuse anything but a
    regular file with one name (a hard link would let writes land in another file).
    ``path`` is what errors name. Raises UnsafePath, FileNotFoundError, OSError."""
    writing = flags & (os.O_WRONLY | os.O_RDWR) != 0
    # Look before opening: opening a FIFO or a device can block or act by itself.
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError as exc:
        if not flags & os.O_CREAT:
            raise _named(exc, path) from None
    except OSError as exc:
        raise _named(exc, path) from None
    else:
        _check_regular(before, path, writing)
        if flags & os.O_EXCL:
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise UnsafePath(path, what_is(dir_fd, name, False)) from None
        raise _named(exc, path) from None
    try:
        _check_regular(os.fstat(fd), path, writing)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(st: os.stat_result, path: Path, writing: bool) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(path, "is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(path, "is a folder, not a regular file" if stat.S_ISDIR(st.st_mode) else "is not a regular file")
    if writing and st.st_nlink > 1:
        raise UnsafePath(path, f"has {st.st_nlink} hard links (another name for the same file)")


def check_entries(dir_fd: int, directory: Path, names: tuple[str, ...], prefixes: tuple[str, ...] = ()) -> None:
    """Refuse the folder if any entry named in ``names`` (or starting with one of
    ``prefixes``) is a link or not a regular file. Reads only the folder's listing."""
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if entry.name in names or entry.name.startswith(prefixes):
                if entry.is_symlink():
                    raise UnsafePath(directory / entry.name, "is a symbolic link")
                if not entry.is_file(follow_symlinks=False):
                    raise UnsafePath(directory / entry.name, refusal(entry.stat(follow_symlinks=False).st_mode, False))


def fsync_dir(dir_fd: int) -> None:
    os.fsync(dir_fd)
