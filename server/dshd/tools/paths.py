"""Where a tool may read and write: inside the workspace, never ``.dsh/``, and ``.git/``
only for a command in full access (which does not come through here).

A path is taken relative to the workspace root (an absolute path is accepted when it
lies inside the workspace). It is resolved with symlinks (``Path.resolve``), so a link that
points out of the workspace is caught wherever it sits in the path. A violation is a
:class:`PathRefused` whose text names the rule; tools turn it into a failed result.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

PROTECTED = (".dsh", ".git")


class PathRefused(Exception):
    """A path a tool may not use; the message names the rule."""


def resolve(root: Path, path: object, *, field: str = "path", write: bool = False) -> Path:
    """The resolved absolute path for ``path`` under ``root`` (already resolved)."""
    if not isinstance(path, str) or not path.strip():
        raise PathRefused(f"`{field}` must be a non-empty path relative to the workspace root")
    if "\0" in path:
        raise PathRefused(f"`{field}` contains a NUL character")
    try:
        target = (root / path).resolve()
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # a link went away between its lstat and its readlink
            raise PathRefused(f"unsafe-path: {path} changed while it was being resolved (a link came or went)") from None
        raise PathRefused(f"{path} cannot be resolved: {exc.strerror or exc}") from None
    if target != root and not target.is_relative_to(root):
        lexical = Path(os.path.normpath(root / path))
        if lexical == root or lexical.is_relative_to(root):
            # Inside by its name, outside by a link on the way: a link leading out.
            raise PathRefused(
                f"unsafe-path: {path} is outside the workspace ({root}) through a symbolic link; "
                "tools only use paths inside it (links are followed only while they stay inside)"
            )
        raise PathRefused(
            f"{path} is outside the workspace ({root}); tools only use paths inside it "
            "(symbolic links are followed before the check)"
        )
    if write:
        parts = target.relative_to(root).parts
        if parts and parts[0] == ".dsh":
            raise PathRefused(f"{path} is inside .dsh/, which holds dshd's own data: no tool writes there")
        if parts and parts[0] == ".git":
            raise PathRefused(f"{path} is inside .git/: tools never write the repository's metadata")
        if target == root:
            raise PathRefused(f"{path} is the workspace root itself, not a file")
    return target


def shown(root: Path, target: Path) -> str:
    """``target`` as the model and the person see it: relative to the root."""
    return "." if target == root else target.relative_to(root).as_posix()
