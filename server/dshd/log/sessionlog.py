"""Layer 1: the bytes of one session on disk.

A session directory holds ``log.jsonl`` (append-only, one JSON object a line),
``log.lock`` (flock'd by the one writer, holds its pid as text), ``projection.json``
(a checkpoint cache, opaque bytes here) and ``torn-<unix-ms>.bin`` files (copies of
incomplete tails cut on open). This layer knows lines and byte offsets, nothing of
events, plans or goals.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from dshd.errors import DshError

LOG_NAME = "log.jsonl"
LOCK_NAME = "log.lock"
CHECKPOINT_NAME = "projection.json"

# Tail search reads backwards in blocks this size until it finds a newline.
_TAIL_BLOCK = 64 * 1024
# Streaming reads: big enough that Python's line iteration is not syscall-bound.
_READ_BUFFER = 1024 * 1024


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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _blocks_before(f, pos: int) -> Iterator[tuple[int, bytes]]:
    """``(start offset, bytes)`` blocks of ``f`` before ``pos``, the last one first."""
    while pos > 0:
        start = max(0, pos - _TAIL_BLOCK)
        f.seek(start)
        yield start, f.read(pos - start)
        pos = start


def find_complete_end(path: Path) -> tuple[int, int]:
    """(end of the last complete line, file size). Bytes in between are a torn tail."""
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        for start, block in _blocks_before(f, size):
            nl = block.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1, size
        return 0, size


def iter_records(
    path: Path, offset: int = 0, line_no: int = 1, end: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Stream ``(line_no, start_offset, line)`` for complete lines (``line`` keeps its b"\\n").

    Reads from ``offset`` (the start of line ``line_no``) up to ``end`` (default: the
    end of the last complete line). Never holds more than one buffer of the file.
    """
    if end is None:
        end, _ = find_complete_end(path)
    with open(path, "rb", buffering=_READ_BUFFER) as f:
        f.seek(offset)
        pos = offset
        for line in f:
            nxt = pos + len(line)
            if nxt > end:
                break
            yield line_no, pos, line
            line_no += 1
            pos = nxt
            if pos == end:
                break


def find_line_start(path: Path, offset: int, line_no: int, target: int) -> int:
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
    with open(path, "rb", buffering=0) as f:
        for start, block in _blocks_before(f, offset):
            count = block.count(b"\n")
            if count < wanted:
                wanted -= count
                continue
            nl = len(block)
            for _ in range(wanted):
                nl = block.rfind(b"\n", 0, nl)
            return start + nl + 1
    raise ValueError(f"line {target} not found before offset {offset}")


def read_line_before(path: Path, offset: int, length: int) -> bytes | None:
    """The ``length`` bytes ending at ``offset`` (None if the file is shorter)."""
    if length <= 0 or offset < length:
        return None
    with open(path, "rb", buffering=0) as f:
        f.seek(offset - length)
        data = f.read(length)
    return data if len(data) == length else None


class SessionLog:
    """The single writer of one session's log (holds ``log.lock`` until :meth:`close`)."""

    def __init__(self, directory: Path, lock_fd: int, log_fd: int, size: int, torn_tail: TornTail | None) -> None:
        self.dir = directory
        self.path = directory / LOG_NAME
        self.checkpoint_path = directory / CHECKPOINT_NAME
        self._lock_fd: int | None = lock_fd
        self._fd: int | None = log_fd
        self.size = size  # bytes durable so far (always ends a complete line)
        self.torn_tail = torn_tail

    # ---- opening ---------------------------------------------------------------

    @staticmethod
    def _lock(directory: Path) -> int:
        # Hand-written rather than filelock: filelock cannot tell the loser who holds
        # the lock, and SPEC section 3 wants the error to name the holder's pid.
        # flock (not lockf) because POSIX record locks vanish when any fd of the file closes.
        fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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
        os.pwrite(fd, f"{os.getpid():<15}\n".encode(), 0)
        return fd

    @classmethod
    def create(cls, directory: Path) -> "SessionLog":
        """Make the directory, take the lock, create an empty log (FileExistsError if one exists)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        lock_fd = cls._lock(directory)
        try:
            fd = os.open(directory / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except BaseException:
            _unlock(lock_fd)
            raise
        _fsync_dir(directory)
        return cls(directory, lock_fd, fd, 0, None)

    @classmethod
    def open(cls, directory: Path) -> "SessionLog":
        """Take the lock; cut an incomplete last line (keeping a copy) and report it."""
        directory = Path(directory)
        path = directory / LOG_NAME
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no session log", str(path))
        lock_fd = cls._lock(directory)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            try:
                torn = _cut_torn_tail(directory, fd, path)
                size = os.fstat(fd).st_size
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            _unlock(lock_fd)
            raise
        return cls(directory, lock_fd, fd, size, torn)

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

    # ---- reading ---------------------------------------------------------------

    def records(self, offset: int = 0, line_no: int = 1) -> Iterator[tuple[int, int, bytes]]:
        """Stream (line_no, start_offset, line) of durable lines from ``offset``."""
        return iter_records(self.path, offset, line_no, self.size)

    def read_checkpoint(self) -> bytes | None:
        try:
            return self.checkpoint_path.read_bytes()
        except FileNotFoundError:
            return None

    def write_checkpoint(self, data: bytes) -> None:
        """Atomic replace: write a temp file, fsync, rename over, fsync the directory."""
        self._require_open()
        tmp = self.dir / (CHECKPOINT_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.checkpoint_path)
        _fsync_dir(self.dir)

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


def _cut_torn_tail(directory: Path, fd: int, path: Path) -> TornTail | None:
    end, size = find_complete_end(path)
    if end == size:
        return None
    tail = os.pread(fd, size - end, end)
    saved = directory / f"torn-{time.time_ns() // 1_000_000}.bin"
    n = 0
    while saved.exists():  # two cuts in one millisecond: never overwrite a kept copy
        n += 1
        saved = directory / f"torn-{time.time_ns() // 1_000_000}-{n}.bin"
    sfd = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _write_all(sfd, tail)
        os.fsync(sfd)
    finally:
        os.close(sfd)
    os.ftruncate(fd, end)
    os.fsync(fd)
    _fsync_dir(directory)
    return TornTail(end, size - end, saved)
