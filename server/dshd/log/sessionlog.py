"""Layer 1: the bytes of one session on disk.

A session directory holds ``log.jsonl`` (append-only, one JSON object a line),
``log.lock`` (flock'd by the one writer, holds its pid as text), ``projection.json``
(a checkpoint cache, opaque bytes here) and ``torn-<unix-ms>.bin`` files (copies of
incomplete tails cut on open). This layer knows lines and byte offsets, nothing of
events, plans or goals.

Nothing here follows a link (:mod:`dshd.log.safefs`): the session folder is walked from
a trusted base (the workspace) one component at a time, it is held by a folder handle
while open, its files are opened relative to that handle with ``O_NOFOLLOW``, and a
folder holding a link or a non-regular file where a session file belongs is refused
(``unsafe-path``) before a byte is written or cut. Reads go through ``pread`` on the
open handle, never by name again.
"""

from __future__ import annotations

import errno
import fcntl
import io
import itertools
import os
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from dshd.errors import DshError
from dshd.log.safefs import UnsafePath, check_entries, fsync_dir, open_dir, open_file, what_is

LOG_NAME = "log.jsonl"
LOCK_NAME = "log.lock"
CHECKPOINT_NAME = "projection.json"
CHECKPOINT_TMP = CHECKPOINT_NAME + ".tmp"
# Caches beside the checkpoint, written the same way (read_cache / write_cache): the chat's marks.
CACHE_NAMES = ("chat-marks.json",)
# The most a cache file may hold before it is ignored unread: a cloned repository may
# ship a session folder, and a cache is only a shortcut (ours hold a few hundred kB at 1M events).
CACHE_MAX_BYTES = 16 << 20
TORN_PREFIX = "torn-"
# Every name a session folder may hold that dshd opens, reads or writes.
SESSION_FILES = (LOG_NAME, LOCK_NAME, CHECKPOINT_NAME, CHECKPOINT_TMP) + tuple(
    name + tail for name in CACHE_NAMES for tail in ("", ".tmp")
)

# Tail search reads backwards in blocks this size until it finds a newline.
_TAIL_BLOCK = 64 * 1024
# Streaming reads: big enough that per-line Python work dominates, not syscalls.
_READ_BUFFER = 1024 * 1024

# A log to read: an open fd (read with pread, left open) or a path (opened without
# following a link, closed after).
LogSource = "Path | str | int"


class SessionLocked(DshError):
    """Another process (or another open in this one) holds the session for writing."""

    def __init__(self, path: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process (pid unknown)"
        super().__init__("session-locked", f"session {path.name} is held by {who}", pid=pid)


@dataclass(frozen=True)
class TornTail:
    """An incomplete last line (no trailing newline): a write cut by a crash, never acknowledged."""

    offset: int  # where the incomplete bytes started (= log size after the cut)
    length: int  # how many bytes were cut (or found, for a read-only look)
    saved_to: Path | None  # the copy we kept; None when only reported (read-only verify)

    def to_dict(self) -> dict:
        return {"offset": self.offset, "length": self.length, "savedTo": str(self.saved_to) if self.saved_to else None}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def open_log_file(path: Path | str) -> int:
    """A read-only fd on the log file ``path``: not a link, a regular file."""
    path = Path(path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_file(dir_fd, path.name, os.O_RDONLY, path)
    finally:
        os.close(dir_fd)


@contextmanager
def _reading(source: "LogSource") -> Iterator[int]:
    if isinstance(source, int):
        yield source
        return
    fd = open_log_file(source)
    try:
        yield fd
    finally:
        os.close(fd)


def _blocks_before(fd: int, pos: int) -> Iterator[tuple[int, bytes]]:
    """``(start offset, bytes)`` blocks of ``fd`` before ``pos``, the last one first."""
    while pos > 0:
        start = max(0, pos - _TAIL_BLOCK)
        yield start, os.pread(fd, pos - start, start)
        pos = start


def _complete_end(fd: int) -> tuple[int, int]:
    size = os.fstat(fd).st_size
    for start, block in _blocks_before(fd, size):
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1, size
    return 0, size


def find_complete_end(source: "LogSource") -> tuple[int, int]:
    """(end of the last complete line, file size). Bytes in between are a torn tail."""
    with _reading(source) as fd:
        return _complete_end(fd)


def iter_records(
    source: "LogSource", offset: int = 0, line_no: int = 1, end: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Stream ``(line_no, start_offset, line)`` for complete lines (``line`` keeps its b"\\n").

    Reads from ``offset`` (the start of line ``line_no``) up to ``end`` (default: the
    end of the last complete line). Never holds more than one buffer of the file
    (plus the line being read).
    """
    with _reading(source) as fd:
        if end is None:
            end, _ = _complete_end(fd)
        pos = read_at = offset
        pending: list[bytes] = []  # the pieces of a line longer than what one read got
        while read_at < end:
            chunk = os.pread(fd, min(_READ_BUFFER, end - read_at), read_at)
            if not chunk:
                break
            read_at += len(chunk)
            cut = chunk.rfind(b"\n") + 1  # the whole lines end here
            if not cut:
                pending.append(chunk)
                continue
            start = 0
            if pending:
                start = chunk.find(b"\n") + 1
                pending.append(chunk[:start])
                line = b"".join(pending)
                pending = []
                yield line_no, pos, line
                line_no += 1
                pos += len(line)
            # A BytesIO cuts lines in C as a file does (about 1.6x a find-and-slice loop);
            # it shares the chunk's bytes, and islice stops before a cut last line.
            lines = io.BytesIO(chunk)
            lines.seek(start)
            for line in itertools.islice(lines, chunk.count(b"\n", start)):
                yield line_no, pos, line
                line_no += 1
                pos += len(line)
            if cut < len(chunk):
                pending.append(chunk[cut:])
            chunk = lines = None  # let go of this buffer before the next read


def find_line_start(source: "LogSource", offset: int, line_no: int, target: int) -> int:
    """The byte offset where line ``target`` starts, found by reading backwards from
    ``offset`` (the start of line ``line_no``; ``target <= line_no``). Reads only the
    bytes in between (plus at most one block): the way to reach the last lines of a long
    log without reading it from the top."""
    if not 1 <= target <= line_no:
        raise ValueError(f"line {target} is not in 1..{line_no}")
    # Line `target` starts just after the newline that ends line target-1: the
    # (line_no - target + 1)-th newline before `offset`.
    wanted = line_no - target + 1
    if target == 1:
        return 0
    with _reading(source) as fd:
        for start, block in _blocks_before(fd, offset):
            count = block.count(b"\n")
            if count < wanted:
                wanted -= count
                continue
            nl = len(block)
            for _ in range(wanted):
                nl = block.rfind(b"\n", 0, nl)
            return start + nl + 1
    raise ValueError(f"line {target} not found before offset {offset}")


def read_line_before(source: "LogSource", offset: int, length: int) -> bytes | None:
    """The ``length`` bytes ending at ``offset`` (None if the file is shorter)."""
    if length <= 0 or offset < length:
        return None
    with _reading(source) as fd:
        data = os.pread(fd, length, offset - length)
    return data if len(data) == length else None


def _open_session_dir(directory: Path, base: Path | None, *, create: bool = False) -> int:
    """The session folder's handle, walked from ``base`` (default: its parent) without
    following links, after checking that none of its session files is a link."""
    directory = Path(directory)
    fd = open_dir(directory, directory.parent if base is None else Path(base), create=create)
    try:
        check_entries(fd, directory, SESSION_FILES, (TORN_PREFIX,))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_checkpoint(dir_fd: int, directory: Path, limit: int | None, name: str = CHECKPOINT_NAME) -> bytes | None:
    try:
        fd = open_file(dir_fd, name, os.O_RDONLY, directory / name)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            return b""  # too big to be one of ours: read as "unknown header", i.e. ignored
        # One read of one byte more than its size: a short read is the whole file.
        data = os.pread(fd, size + 1, 0)
        if len(data) <= size:
            return data
        chunks = [data]
        offset = len(data)
        while chunk := os.pread(fd, _READ_BUFFER, offset):  # it grew meanwhile
            chunks.append(chunk)
            offset += len(chunk)
            if limit is not None and offset > limit:
                return b""  # grew past the cap while read: ignored, as above
        return b"".join(chunks)
    finally:
        os.close(fd)


class SessionReader:
    """A read-only look at one log (and its sibling checkpoint): no lock, nothing
    written, nothing cut. Opened without following links; read by its handle."""

    def __init__(self, directory: Path, dir_fd: int, fd: int, name: str) -> None:
        self.dir = directory
        self.path = directory / name
        self._dir_fd: int | None = dir_fd
        self.fd = fd
        self.stat = os.fstat(fd)

    @classmethod
    def open(cls, directory: Path, *, base: Path | None = None) -> "SessionReader":
        """The log of session folder ``directory`` (walked from ``base``, checked as an open is)."""
        directory = Path(directory)
        dir_fd = _open_session_dir(directory, base)
        try:
            fd = open_file(dir_fd, LOG_NAME, os.O_RDONLY, directory / LOG_NAME)
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(directory, dir_fd, fd, LOG_NAME)

    @classmethod
    def open_at(cls, parent_fd: int, name: str, directory: Path) -> "SessionReader":
        """The log of session folder ``name`` inside the folder handle ``parent_fd`` (whose
        path is ``directory.parent``), checked as :meth:`open` checks it."""
        try:
            dir_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(directory, what_is(parent_fd, name, True)) from None
            raise type(exc)(exc.errno, exc.strerror, str(directory)) from None
        try:
            check_entries(dir_fd, directory, SESSION_FILES, (TORN_PREFIX,))
            fd = open_file(dir_fd, LOG_NAME, os.O_RDONLY, directory / LOG_NAME)
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(directory, dir_fd, fd, LOG_NAME)

    @classmethod
    def open_path(cls, path: Path | str) -> "SessionReader":
        """Any log file by its path (``dshd log verify``): the file itself is not followed
        if it is a link, and must be a regular file."""
        path = Path(path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = open_file(dir_fd, path.name, os.O_RDONLY, path)
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(path.parent, dir_fd, fd, path.name)

    def read_checkpoint(self, limit: int | None = None) -> bytes | None:
        """The checkpoint's bytes, None if there is none; b"" if larger than ``limit``."""
        if self._dir_fd is None:
            raise ValueError(f"{self.path} is closed")
        return _read_checkpoint(self._dir_fd, self.dir, limit)

    def close(self) -> None:
        if self._dir_fd is not None:
            os.close(self.fd)
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self) -> "SessionReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionLog:
    """The single writer of one session's log (holds ``log.lock`` until :meth:`close`)."""

    def __init__(
        self, directory: Path, dir_fd: int, lock_fd: int, log_fd: int, size: int, torn_tail: TornTail | None
    ) -> None:
        self.dir = directory
        self.path = directory / LOG_NAME
        self.checkpoint_path = directory / CHECKPOINT_NAME
        self._dir_fd: int | None = dir_fd
        self._lock_fd: int | None = lock_fd
        self._fd: int | None = log_fd
        self.size = size  # bytes durable so far (always ends a complete line)
        self.torn_tail = torn_tail

    # ---- opening ---------------------------------------------------------------

    @staticmethod
    def _lock(dir_fd: int, directory: Path) -> int:
        # Hand-written rather than filelock: filelock cannot tell the loser who holds
        # the lock, and SPEC section 3 wants the error to name the holder's pid.
        # flock (not lockf) because POSIX record locks vanish when any fd of the file closes.
        fd = open_file(dir_fd, LOCK_NAME, os.O_RDWR | os.O_CREAT, directory / LOCK_NAME)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            pid = _read_pid(fd)
            os.close(fd)
            raise SessionLocked(directory, pid) from None
        # Fixed width, so no truncate is needed (ftruncate costs ~1 ms on some filesystems).
        try:
            os.pwrite(fd, f"{os.getpid():<15}\n".encode(), 0)
        except BaseException:
            _unlock(fd)
            raise
        return fd

    @classmethod
    def create(cls, directory: Path, *, base: Path | None = None) -> "SessionLog":
        """Make the directory (every component below ``base``, default its parent, made
        without following links), take the lock, create an empty log (FileExistsError if
        one exists). Raises UnsafePath for a link on the way."""
        directory = Path(directory)
        dir_fd = _open_session_dir(directory, base, create=True)
        try:
            lock_fd = cls._lock(dir_fd, directory)
            try:
                fd = open_file(dir_fd, LOG_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, directory / LOG_NAME)
                try:
                    fsync_dir(dir_fd)
                except BaseException:
                    os.close(fd)
                    raise
            except BaseException:
                _unlock(lock_fd)
                raise
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(directory, dir_fd, lock_fd, fd, 0, None)

    @classmethod
    def open(cls, directory: Path, *, base: Path | None = None) -> "SessionLog":
        """Take the lock; cut an incomplete last line (keeping a copy) and report it.

        ``base`` (default: the folder's parent) is where the walk without links starts.
        Raises FileNotFoundError (no log), UnsafePath, SessionLocked."""
        directory = Path(directory)
        path = directory / LOG_NAME
        try:
            dir_fd = _open_session_dir(directory, base)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no session log", str(path)) from None
        try:
            # Look for the log before the lock file is made or written.
            try:
                os.stat(LOG_NAME, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "no session log", str(path)) from None
            lock_fd = cls._lock(dir_fd, directory)
            try:
                fd = open_file(dir_fd, LOG_NAME, os.O_RDWR | os.O_APPEND, path)
                try:
                    torn = _cut_torn_tail(dir_fd, directory, fd)
                    size = os.fstat(fd).st_size
                except BaseException:
                    os.close(fd)
                    raise
            except BaseException:
                _unlock(lock_fd)
                raise
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(directory, dir_fd, lock_fd, fd, size, torn)

    # ---- writing ---------------------------------------------------------------

    def append(self, line: bytes) -> None:
        """Append one complete line (ending in b"\\n"); durable (fdatasync) before it returns."""
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise ValueError("append takes exactly one line ending in a newline")
        self._write_durably(line)

    def append_many(self, lines: list[bytes]) -> None:
        """Append several lines with one fdatasync (group commit)."""
        for line in lines:
            if not line.endswith(b"\n") or b"\n" in line[:-1]:
                raise ValueError("append_many takes complete lines, each ending in one newline")
        if lines:
            self._write_durably(b"".join(lines))

    def _write_durably(self, data: bytes) -> None:
        fd = self._require_open()
        try:
            _write_all(fd, data)
            os.fdatasync(fd)
        except BaseException:
            # A partial write must not stay in front of the next append: cut back to the
            # last acknowledged size (if even that fails, the next open cuts it as torn).
            try:
                os.ftruncate(fd, self.size)
            except OSError:
                pass
            raise
        self.size += len(data)

    def remove_empty_log(self) -> None:
        """Remove the (still empty) log again: a create whose first append failed."""
        if self._dir_fd is not None and self.size == 0:
            try:
                os.unlink(LOG_NAME, dir_fd=self._dir_fd)
            except FileNotFoundError:
                pass

    # ---- reading ---------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The log's handle (pread only: readers never move a file offset)."""
        return self._require_open()

    def records(self, offset: int = 0, line_no: int = 1) -> Iterator[tuple[int, int, bytes]]:
        """Stream (line_no, start_offset, line) of durable lines from ``offset``."""
        return iter_records(self._require_open(), offset, line_no, self.size)

    def read_checkpoint(self) -> bytes | None:
        self._require_open()
        return _read_checkpoint(self._dir_fd, self.dir, None)

    def read_cache(self, name: str) -> bytes | None:
        """A cache file beside the checkpoint (one of CACHE_NAMES), None when absent, empty
        when larger than CACHE_MAX_BYTES (never read: a cache that size is none of ours)."""
        if name not in CACHE_NAMES:
            raise ValueError(f"not a session cache: {name}")
        self._require_open()
        return _read_checkpoint(self._dir_fd, self.dir, CACHE_MAX_BYTES, name)

    def write_cache(self, name: str, data: bytes) -> None:
        """Replace a cache file (one of CACHE_NAMES) atomically, as the checkpoint is."""
        if name not in CACHE_NAMES:
            raise ValueError(f"not a session cache: {name}")
        self.write_checkpoint(data, name)

    def write_checkpoint(self, data: bytes, name: str = CHECKPOINT_NAME) -> None:
        """Atomic replace: write a new temp file (O_EXCL), fsync, rename over, fsync the folder."""
        self._require_open()
        dir_fd = self._dir_fd
        tmp_name = name + ".tmp"
        tmp_path = self.dir / tmp_name
        try:
            before = os.stat(tmp_name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            # A stale one (a crash between write and rename). unlink removes a name, never
            # what a link points to; still, anything but our own regular file is refused.
            if not stat.S_ISREG(before.st_mode):
                raise UnsafePath(tmp_path, "is a symbolic link" if stat.S_ISLNK(before.st_mode) else "is not a regular file")
            os.unlink(tmp_name, dir_fd=dir_fd)
        fd = open_file(dir_fd, tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, tmp_path)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp_name, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        fsync_dir(dir_fd)

    # ---- closing ---------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _require_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"session log {self.path} is closed")
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            _unlock(self._lock_fd)
            self._lock_fd = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self) -> "SessionLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_pid(fd: int) -> int | None:
    # The holder writes its pid right after it gets the lock; give it a moment.
    for _ in range(20):
        raw = os.pread(fd, 32, 0).strip()
        if raw:
            try:
                return int(raw)
            except ValueError:
                return None
        time.sleep(0.005)
    return None


def _unlock(lock_fd: int) -> None:
    # Leave the pid file in place (stale content is harmless: only a held flock counts).
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
    finally:
        os.close(lock_fd)


def _cut_torn_tail(dir_fd: int, directory: Path, fd: int) -> TornTail | None:
    end, size = _complete_end(fd)
    if end == size:
        return None
    tail = os.pread(fd, size - end, end)
    stamp = time.time_ns() // 1_000_000
    n = 0
    while True:  # two cuts in one millisecond: never overwrite a kept copy
        name = f"{TORN_PREFIX}{stamp}.bin" if n == 0 else f"{TORN_PREFIX}{stamp}-{n}.bin"
        try:
            sfd = open_file(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, directory / name)
            break
        except FileExistsError:
            n += 1
    try:
        _write_all(sfd, tail)
        os.fsync(sfd)
    finally:
        os.close(sfd)
    os.ftruncate(fd, end)
    os.fsync(fd)
    fsync_dir(dir_fd)
    return TornTail(end, size - end, directory / name)
