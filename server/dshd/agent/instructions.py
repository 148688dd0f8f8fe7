"""Project instructions: ``AGENTS.md`` at the workspace root, the prompt section
``project:instructions`` of every request while the file is there.

Part of the core, not a plugin: every workspace gets it, whatever ``plugins`` lists. The
Workspace adds the section to each agent it loads (the loop itself knows nothing of it).
The file is looked at with one ``stat`` per request and read again only when its size,
modification time, inode or change time moved, so an edit between two steps reaches the
next request. Only the first :data:`MAX_BYTES` bytes are sent; a cut file gets a note
saying so. A missing, empty or unreadable file (or a directory of that name) leaves the
section out of the request and of ``request/header.sections``.

The workspace chooses this file, so it is read only when it is a regular file inside the
workspace (a link to a file inside is fine; one leading out is not) of at most
:data:`FILE_CAP` bytes, through directory handles (:mod:`dshd.tools.safepath`). Otherwise
nothing of it is read: the section says why instead (the file, the rule, the cap), and the
daemon logs the same once per change.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

from dshd.agent.prompt import PromptContext, Section
from dshd.tools import safepath
from dshd.tools.paths import PathRefused

log = logging.getLogger(__name__)

FILE_NAME = "AGENTS.md"
SECTION_ID = "project:instructions"
SECTION_ORDER = 20  # before plan:policy (50) and goal:status (60)
MAX_BYTES = 32 * 1024  # bytes sent
FILE_CAP = 256 * 1024  # bytes of a file read at all

HEADER = f"Project instructions ({FILE_NAME} at the workspace root). Follow them:"


def render_instructions(raw: bytes, max_bytes: int = MAX_BYTES, size: int | None = None) -> str | None:
    """The section text for the file's first bytes ``raw`` (``size``: the whole file's,
    when more than ``raw``); None when there is nothing to say."""
    size = max(len(raw), size or 0)
    cut = size > max_bytes
    text = raw[:max_bytes].decode("utf-8", errors="ignore" if cut else "replace")
    if cut:
        # Never send a line cut in half: stop at the last complete line when there is one.
        newline = text.rfind("\n")
        if newline > 0:
            text = text[:newline]
    if not text.strip():
        return None
    out = f"{HEADER}\n\n{text.rstrip()}"
    if cut:
        out += (
            f"\n\n[{FILE_NAME} is {size} bytes; only its first {max_bytes // 1024} KiB are shown here. "
            "Read the file itself for the rest.]"
        )
    return out


def refusal_text(why: str) -> str:
    """The section in place of a file that was not read (no byte of it in here)."""
    return (
        f"[{FILE_NAME} at the workspace root was not read: {why}. Project instructions are read only "
        f"from a regular file inside the workspace of at most {FILE_CAP // 1024} KiB. Tell the person, "
        "who can fix the file.]"
    )


class ProjectInstructions:
    """The ``AGENTS.md`` of one workspace, cached by its stat."""

    def __init__(self, root: Path, max_bytes: int = MAX_BYTES) -> None:
        self.root = Path(root).resolve()
        self.path = self.root / FILE_NAME
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._key: tuple[int, ...] | None = None
        self._text: str | None = None
        self._refused: str | None = None  # the last refusal logged (logged once per change)
        self.reads = 0  # how often the file was read (it is stat'ed on every request)

    def section(self) -> Section:
        return Section(SECTION_ID, SECTION_ORDER, self.render)

    def render(self, ctx: PromptContext | None = None) -> str | None:
        try:
            target = safepath.resolve_inside(self.root, FILE_NAME)
            st = safepath.lstat(self.root, target)
        except PathRefused as exc:
            return self._refuse(str(exc))
        except OSError:
            return self._remember(None, None)
        if st is None or stat.S_ISDIR(st.st_mode):
            return self._remember(None, None)
        if not stat.S_ISREG(st.st_mode):
            return self._refuse(f"{FILE_NAME} is {safepath.kind_of(st.st_mode)}, not a regular file")
        if st.st_size > FILE_CAP:
            return self._refuse(f"{FILE_NAME} is {st.st_size} bytes, over the cap of {FILE_CAP // 1024} KiB")
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        with self._lock:
            if key == self._key:
                return self._text
        try:
            fd, st = safepath.open_regular(self.root, target, FILE_CAP)
        except PathRefused as exc:
            return self._refuse(str(exc))
        except OSError as exc:
            log.warning("cannot read %s: %s (left out of the prompt)", self.path, exc)
            return self._remember(None, None)
        try:
            raw = os.read(fd, self.max_bytes + 1)
        except OSError as exc:
            log.warning("cannot read %s: %s (left out of the prompt)", self.path, exc)
            return self._remember(None, None)
        finally:
            os.close(fd)
        self.reads += 1
        self._refused = None
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        return self._remember(key, render_instructions(raw, self.max_bytes, st.st_size))

    def _refuse(self, why: str) -> str:
        if why != self._refused:
            log.warning("%s not read: %s", self.path, why)
            self._refused = why
        return self._remember(None, refusal_text(why)) or ""

    def _remember(self, key: tuple[int, ...] | None, text: str | None) -> str | None:
        with self._lock:
            self._key, self._text = key, text
        return text
