"""The rows of ``dsh/session/list``: every session of a workspace, cheap to list again.

A row needs a session's title, the time of its last event and its goal: folded state.
Folding each log on every list is what made a list of 1,000 sessions (or one old log
with a 63 MB title) slow, so a row is kept in memory under a key made of what changes
whenever the folder or its log does (the folder's inode and mtime, the log's inode,
size and mtime). A list then costs two ``stat`` calls a session; a row is folded
again (checkpoint + tail, like an open) only when its key changed. From SAVE_FROM
sessions on, the rows are saved in the person's cache folder for the next daemon.

Nothing here follows a link or writes: ``.dsh`` and ``.dsh/sessions`` are walked from
the workspace without links (a link there refuses the whole list, ``unsafe-path``); a
session folder that is a link, or holds a link or a non-regular file where a session
file belongs, is listed as refused with the reason, never opened.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import re
import stat
import time
from pathlib import Path
from typing import Callable

import msgspec

from dshd.errors import DshError
from dshd.folds import apply
from dshd.folds.events import decode_line
from dshd.folds.replay import ReplayError, _load_checkpoint, fold_file
from dshd.folds.state import TITLE_MAX, SessionState
from dshd.formats import rfc3339_utc
from dshd.log import LOG_NAME, SessionReader, UnsafePath, find_complete_end
from dshd.log.safefs import open_dir, refusal
from dshd.services.goals import GoalView, goal_view

log = logging.getLogger("dshd")

# (folder inode, folder mtime, log inode, log size, log mtime)
_Key = tuple[int, int, int, int, int]

# A row reads a checkpoint of at most this size (ours are small: titles are capped) and,
# without one, line 1 in full only up to this size; a longer line 1 (a huge title in a
# log written before the cap) is read as its first HEAD_BYTES and its last bytes.
CHECKPOINT_LIMIT = 4 * 1024 * 1024
HEAD_BYTES = 64 * 1024
_LOG_IN_FOLDER = "/" + LOG_NAME
_TITLE_KEY = re.compile(rb'"title"\s*:\s*"')
# After the title's closing quote our writer ends line 1 with the data and envelope braces.
_START_END = re.compile(rb'"\s*\}\s*\}\s*$')


class SessionRefusal(msgspec.Struct, frozen=True, gc=False):
    """Why a folder under sessions/ is listed but not opened (a link, not a folder)."""

    kind: str  # "unsafe-path"
    path: str
    reason: str


class SessionRow(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One row of the session list: plain core values (each door writes its own shape)."""

    session_id: str
    title: str | None
    updated_at: str | None
    goal: GoalView | None = None  # absent: no goal
    refused: SessionRefusal | None = None  # present: the folder is not a session to open
    # What the session's live agent in this process does, when not idle ("working" or
    # "waiting"); question: while waiting ("plan-review" or "approval"). Never kept or saved.
    activity: str | None = None
    question: str | None = None


class SessionIndex:
    """The list rows of ``<root>/.dsh/sessions``; ``is_session_id`` says which names count."""

    def __init__(self, root: Path, is_session_id: Callable[[str], bool], *, saved: Path | None = None) -> None:
        """``saved``: where the rows are kept between daemons (default: the person's cache
        folder, see :func:`saved_rows_path`), once a workspace has SAVE_FROM sessions."""
        self.root = Path(root)
        self.sessions_dir = self.root / ".dsh" / "sessions"
        self._is_session_id = is_session_id
        self._rows: dict[str, tuple[_Key, SessionRow | None]] = {}
        self._saved = saved if saved is not None else saved_rows_path(self.root)
        self._loaded = False
        self._changed = False

    def rows(self, live: Callable[[str], tuple[SessionState, bool] | None]) -> list[SessionRow]:
        """Every session, oldest first. ``live(id)`` is (state, goal armed) of a session
        this daemon holds open (its row comes from memory), else None."""
        try:
            sessions_fd = open_dir(self.sessions_dir, self.root)
        except FileNotFoundError:
            return []
        out: list[SessionRow] = []
        seen: set[str] = set()
        try:
            with os.scandir(sessions_fd) as entries:
                names = sorted(e.name for e in entries if self._is_session_id(e.name))
            if not self._loaded:
                self._loaded = True
                if len(names) >= SAVE_FROM and self._saved is not None:
                    self._rows = _load_rows(self._saved, self.root)
            for name in names:
                seen.add(name)
                row = self._row(sessions_fd, name, live(name))
                if row is not None:
                    out.append(row)  # frozen: the kept row is shared as it is
        finally:
            os.close(sessions_fd)
        for gone in self._rows.keys() - seen:
            del self._rows[gone]
            self._changed = True
        if self._changed and len(names) >= SAVE_FROM and self._saved is not None:
            self._changed = False
            _save_rows(self._saved, self.root, self._rows)
        return out

    def _row(self, sessions_fd: int, name: str, live: tuple[SessionState, bool] | None) -> SessionRow | None:
        try:
            dir_st = os.stat(name, dir_fd=sessions_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(dir_st.st_mode):
            return _refused(name, UnsafePath(self.sessions_dir / name, refusal(dir_st.st_mode, True)), dir_st)
        if live is not None:
            state, armed = live
            return _summary(name, state, armed, None)
        try:
            # The folder is a real folder (just checked): these look inside it, read only.
            log_st = os.stat(name + _LOG_IN_FOLDER, dir_fd=sessions_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # not a session (yet): nothing to list
        except OSError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        key = (dir_st.st_ino, dir_st.st_mtime_ns, log_st.st_ino, log_st.st_size, log_st.st_mtime_ns)
        kept = self._rows.get(name)
        if kept is not None and kept[0] == key:
            return kept[1]
        row = self._fold_row(sessions_fd, name, dir_st, log_st)
        self._rows[name] = (key, row)
        self._changed = True
        return row

    def _fold_row(self, sessions_fd: int, name: str, dir_st: os.stat_result, log_st: os.stat_result) -> SessionRow | None:
        try:
            with SessionReader.open_at(sessions_fd, name, self.sessions_dir / name) as reader:
                state = fold_for_list(reader)
        except UnsafePath as exc:
            return _refused(name, exc, dir_st)
        except DshError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        except OSError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        return _summary(name, state, False, log_st)


# ---- rows kept between daemons ---------------------------------------------------------

# A daemon's first list reads every session's checkpoint (80-250 us a session, syscall
# bound); with this many sessions or more the rows are also kept in the person's cache
# folder, so the next daemon's first list costs what a later list costs.
SAVE_FROM = 100
_SAVED_VERSION = 3  # 3: rows are SessionRow (snake_case, the goal a GoalView), no longer the wire's
_SAVED_MAX = 32 * 1024 * 1024


class _SavedRows(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    root: str
    rows: dict[str, tuple[tuple[int, int, int, int, int], SessionRow | None]]


def saved_rows_path(root: Path) -> Path | None:
    """``$XDG_CACHE_HOME/dshd/session-lists/<sha256 of the workspace path>.json`` (else
    ``~/.cache``): outside the workspace, so no repository can plant rows there. None
    when there is no home folder to put it in."""
    cache = os.environ.get("XDG_CACHE_HOME")
    if not cache:
        try:
            cache = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):
            return None
    digest = hashlib.sha256(str(Path(root)).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return Path(cache) / "dshd" / "session-lists" / f"{digest}.json"


def _load_rows(path: Path, root: Path) -> dict[str, tuple[_Key, SessionRow | None]]:
    """The rows a daemon saved, if they are for this workspace and well formed; a row is
    used only while its key (inodes, sizes, times to the nanosecond) still matches."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _SAVED_MAX:
            return {}
        saved = msgspec.json.decode(os.pread(fd, st.st_size, 0), type=_SavedRows)
    except (OSError, msgspec.MsgspecError):
        return {}
    finally:
        os.close(fd)
    if saved.version != _SAVED_VERSION or saved.root != str(root):
        return {}
    return {name: (tuple(key), row) for name, (key, row) in saved.rows.items()}  # type: ignore[misc]


def _save_rows(path: Path, root: Path, rows: dict[str, tuple[_Key, SessionRow | None]]) -> None:
    """Write the rows (a cache: any failure is only logged). A new temp file (O_EXCL)
    renamed over the old one, so a reader sees one whole version."""
    body = msgspec.json.encode(_SavedRows(_SAVED_VERSION, str(root), dict(rows)))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("session list rows not saved to %s: %s", path, exc)
        try:
            os.unlink(tmp)
        except OSError:
            pass


# ---- folding a row ------------------------------------------------------------------------


def fold_for_list(reader: SessionReader) -> SessionState:
    """The folded state of a log for its list row, reading a bounded amount: the
    checkpoint and the tail after it; without a usable checkpoint the whole log, except
    that an oversized line 1 is read only at its ends (its title is cut to TITLE_MAX
    anyway). Lines after line 1 are folded strictly, as replay folds them; the skipped
    middle of an oversized title is checked when the session is opened."""
    fd = reader.fd
    size = reader.stat.st_size
    raw = reader.read_checkpoint(limit=CHECKPOINT_LIMIT)
    # A checkpoint is checked against the log's complete lines. When it covers the whole
    # file, its last covered line (fingerprinted, ending in a newline) proves the file
    # ends a line there: no need to look for a torn tail first.
    cp, _status = _load_checkpoint(raw, fd, size) if raw else (None, "absent")
    end = size
    if cp is None or cp.offset != size:
        end, _size = find_complete_end(fd)
        if cp is not None and cp.offset > end:
            cp = None
    if cp is not None:
        state, _n, _last = fold_file(cp.state, fd, cp.offset, cp.line + 1, end)
        return state
    head = os.pread(fd, HEAD_BYTES, 0)
    if b"\n" not in head and len(head) == HEAD_BYTES:
        started = _start_from_ends(fd, head, end)
        if started is not None:
            state, line2 = started
            state, _n, _last = fold_file(state, fd, line2, 2, end)
            return state
    state, _n, _last = fold_file(None, fd, 0, 1, end)
    if state is None:
        raise ReplayError(None, 1, "empty log: line 1 must be session/start")
    return state


def _start_from_ends(fd: int, head: bytes, end: int) -> tuple[SessionState, int] | None:
    """(state after line 1, offset of line 2) for an oversized line 1 whose title is its
    last field, built from the title's first characters; None for any other shape."""
    key = _TITLE_KEY.search(head)
    if key is None or end == 0:
        return None
    with mmap.mmap(fd, end, prot=mmap.PROT_READ) as mapped:
        line_end = mapped.find(b"\n")  # memchr over the mapping: no copy of the line
        if line_end < 0:
            return None
        tail = mapped[max(line_end - 64, key.end()) : line_end]
    closing = _START_END.search(tail)
    if closing is None:
        return None
    title = _string_prefix(head[key.end() :])
    if title is None:
        return None
    # The same line with the title cut: what it folds to equals the full line's fold.
    line = head[: key.end() - 1] + msgspec.json.encode(title) + tail[closing.start() + 1 :]
    try:
        return apply(None, decode_line(line + b"\n")), line_end + 1
    except (msgspec.MsgspecError, DshError):
        return None


def _string_prefix(body: bytes) -> str | None:
    """A stand-in for the JSON string whose body (after the opening quote) starts
    ``body`` and runs on past it: its first TITLE_MAX - 1 characters, then filler, so it
    is cut (cap_title) exactly as the whole string would be. None if ``body`` does not
    hold that many characters."""
    piece = body[: (TITLE_MAX + 2) * 12]  # room for every character written as a \\uXXXX pair
    for cut in range(len(piece), max(len(piece) - 13, 0), -1):
        try:
            text = msgspec.json.decode(b'"' + piece[:cut] + b'"')
        except msgspec.DecodeError:
            continue  # cut inside an escape or a UTF-8 sequence: one byte shorter
        if not isinstance(text, str) or len(text) <= TITLE_MAX:
            return None
        # Past TITLE_MAX - 1 the characters are cut anyway (and the last one read may be
        # half a surrogate pair): filler keeps the length over the cap.
        return text[: TITLE_MAX - 1] + "__"
    return None


def _summary(name: str, state: SessionState, armed: bool, log_st: os.stat_result | None) -> SessionRow:
    updated = state.last_at or (rfc3339_utc(log_st.st_mtime_ns) if log_st is not None else None)
    return SessionRow(session_id=name, title=state.title, updated_at=updated, goal=goal_view(state.goal, armed))


def _refused(name: str, exc: UnsafePath, st: os.stat_result) -> SessionRow:
    return SessionRow(
        session_id=name,
        title=None,
        updated_at=rfc3339_utc(st.st_mtime_ns),
        refused=SessionRefusal(kind=exc.kind, path=exc.path, reason=exc.reason),
    )


__all__ = ["SessionIndex", "SessionRefusal", "SessionRow"]
