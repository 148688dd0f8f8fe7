"""The rows of ``dsh/session/list``: every session of a workspace, cheap to list again.

A row needs a session's title, the time of its last event and its goal: folded state.
Folding each log on every list is what made a list of 1,000 sessions (or one old log
with a 63 MB title) slow, so a row is kept in memory under a key made of what changes
whenever the folder or its log does (the folder's inode and mtime, the log's inode,
size and mtime). A list then costs three ``stat`` calls a session; a row is folded
again (checkpoint + tail, like an open) only when its key changed.

Nothing here follows a link or writes: ``.dsh`` and ``.dsh/sessions`` are walked from
the workspace without links (a link there refuses the whole list, ``unsafe-path``); a
session folder that is a link, or holds a link or a non-regular file where a session
file belongs, is listed as refused with the reason, never opened.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any, Callable

from dshd.errors import DshError
from dshd.folds import replay
from dshd.folds.state import SessionState
from dshd.formats import rfc3339_utc
from dshd.log import LOG_NAME, SessionReader, UnsafePath
from dshd.log.safefs import open_dir
from dshd.services.goals import goal_view

log = logging.getLogger("dshd")

# (folder inode, folder mtime, log inode, log size, log mtime)
_Key = tuple[int, int, int, int, int]


class SessionIndex:
    """The list rows of ``<root>/.dsh/sessions``; ``is_session_id`` says which names count."""

    def __init__(self, root: Path, is_session_id: Callable[[str], bool]) -> None:
        self.root = Path(root)
        self.sessions_dir = self.root / ".dsh" / "sessions"
        self._is_session_id = is_session_id
        self._rows: dict[str, tuple[_Key, dict[str, Any] | None]] = {}

    def rows(self, live: Callable[[str], tuple[SessionState, bool] | None]) -> list[dict[str, Any]]:
        """Every session, oldest first. ``live(id)`` is (state, goal armed) of a session
        this daemon holds open (its row comes from memory), else None."""
        try:
            sessions_fd = open_dir(self.sessions_dir, self.root)
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        try:
            with os.scandir(sessions_fd) as entries:
                names = sorted(e.name for e in entries if self._is_session_id(e.name))
            for name in names:
                seen.add(name)
                row = self._row(sessions_fd, name, live(name))
                if row is not None:
                    out.append(row)
        finally:
            os.close(sessions_fd)
        for gone in self._rows.keys() - seen:
            del self._rows[gone]
        return out

    def _row(self, sessions_fd: int, name: str, live: tuple[SessionState, bool] | None) -> dict[str, Any] | None:
        directory = self.sessions_dir / name
        try:
            dir_st = os.stat(name, dir_fd=sessions_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(dir_st.st_mode):
            why = "is a symbolic link" if stat.S_ISLNK(dir_st.st_mode) else "is not a folder"
            return _refused(name, UnsafePath(directory, why), dir_st)
        if live is not None:
            state, armed = live
            return _summary(name, state, armed, None)
        try:
            # The folder is a real folder (just checked): these look inside it, read only.
            log_st = os.stat(f"{name}/{LOG_NAME}", dir_fd=sessions_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # not a session (yet): nothing to list
        except OSError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        key = (dir_st.st_ino, dir_st.st_mtime_ns, log_st.st_ino, log_st.st_size, log_st.st_mtime_ns)
        kept = self._rows.get(name)
        if kept is not None and kept[0] == key:
            return kept[1]
        row = self._fold_row(name, directory, dir_st, log_st)
        self._rows[name] = (key, row)
        return row

    def _fold_row(self, name: str, directory: Path, dir_st: os.stat_result, log_st: os.stat_result) -> dict | None:
        try:
            with SessionReader.open(directory, base=self.root) as reader:
                state = replay(reader).state
        except UnsafePath as exc:
            return _refused(name, exc, dir_st)
        except DshError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        except OSError as exc:
            log.warning("session %s not listed: %s", name, exc)
            return None
        return _summary(name, state, False, log_st)


def _summary(name: str, state: SessionState, armed: bool, log_st: os.stat_result | None) -> dict[str, Any]:
    updated = state.last_at or (rfc3339_utc(log_st.st_mtime_ns) if log_st is not None else None)
    row: dict[str, Any] = {"sessionId": name, "title": state.title, "updatedAt": updated}
    view = goal_view(state.goal, armed)
    if view is not None:
        row["goal"] = view.to_dict()
    return row


def _refused(name: str, exc: UnsafePath, st: os.stat_result) -> dict[str, Any]:
    return {
        "sessionId": name,
        "title": None,
        "updatedAt": rfc3339_utc(st.st_mtime_ns),
        "refused": {"kind": exc.kind, "path": exc.path, "reason": exc.reason},
    }


__all__ = ["SessionIndex"]
