"""Project instructions: ``AGENTS.md`` at the workspace root, the prompt section
``project:instructions`` of every request while the file is there.

Part of the core, not a plugin: every workspace gets it, whatever ``plugins`` lists. The
Workspace adds the section to each agent it loads (the loop itself knows nothing of it).
The file is looked at with one ``stat`` per request and read again only when its size,
modification time, inode or change time moved, so an edit between two steps reaches the
next request. Only the first :data:`MAX_BYTES` bytes are sent; a cut file gets a note
saying so. A missing, empty or unreadable file (or a directory of that name) leaves the
section out of the request and of ``request/header.sections``.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

from dshd.agent.prompt import PromptContext, Section

log = logging.getLogger(__name__)

FILE_NAME = "AGENTS.md"
SECTION_ID = "project:instructions"
SECTION_ORDER = 20  # before plan:policy (50) and goal:status (60)
MAX_BYTES = 32 * 1024

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


class ProjectInstructions:
    """The ``AGENTS.md`` of one workspace, cached by its stat."""

    def __init__(self, root: Path, max_bytes: int = MAX_BYTES) -> None:
        self.path = Path(root) / FILE_NAME
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._key: tuple[int, ...] | None = None
        self._text: str | None = None
        self.reads = 0  # how often the file was read (it is stat'ed on every request)

    def section(self) -> Section:
        return Section(SECTION_ID, SECTION_ORDER, self.render)

    def render(self, ctx: PromptContext | None = None) -> str | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return self._remember(None, None)
        if not stat.S_ISREG(st.st_mode):
            return self._remember(None, None)
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        with self._lock:
            if key == self._key:
                return self._text
        try:
            with open(self.path, "rb") as f:
                raw = f.read(self.max_bytes + 1)
        except OSError as exc:
            log.warning("cannot read %s: %s (left out of the prompt)", self.path, exc)
            return self._remember(None, None)
        self.reads += 1
        return self._remember(key, render_instructions(raw, self.max_bytes, st.st_size))

    def _remember(self, key: tuple[int, ...] | None, text: str | None) -> str | None:
        with self._lock:
            self._key, self._text = key, text
        return text
