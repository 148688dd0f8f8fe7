"""Layer 1: ``.dsh/.gitignore``, which keeps what dshd writes under ``.dsh/`` out of the
person's repository.

A new one ignores everything dshd writes there, itself included, so ``git status`` and
``git add -A`` see nothing of dshd's (the workspace's ``config.toml`` is the person's and
is not ignored). An existing one (the person's, or an older dshd's) that lacks one of
:data:`REQUIRED` gets the missing lines appended: never replaced, nothing removed. One
that is a link, or not a regular file, is left alone and reported. Failing to write it
never stops a session or a snapshot.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dshd.errors import DshError
from dshd.log.safefs import UnsafePath, open_dir, open_file

log = logging.getLogger(__name__)

# Every name dshd writes under .dsh/: session folders, the checkpoint repository, and the
# names beside it (a repository being made, one moved aside, a refused restore journal).
REQUIRED = ("sessions/", "checkpoints.git/", "checkpoints.git.*")

DSH_GITIGNORE = """\
# Written by dshd: what dshd keeps here stays out of version control (this file too).
# dshd adds a line it needs when one is missing and never removes any.
# config.toml holds the workspace's settings: commit it if the team shares them.
/.gitignore
sessions/
checkpoints.git/
checkpoints.git.*
"""

_READ_CAP = 1 << 20


def ensure_dsh_gitignore(dsh_dir: Path) -> str | None:
    """Make ``.dsh/.gitignore`` or complete it (``dsh_dir`` is walked from its parent, the
    workspace, without following links). Returns what the person should be told when it
    could not be done, else None (the same words are logged)."""
    path = dsh_dir / ".gitignore"
    try:
        dsh_fd = open_dir(dsh_dir, dsh_dir.parent)
    except (OSError, DshError) as exc:
        return _report(f"could not open {dsh_dir} to write its .gitignore: {exc}")
    try:
        try:
            fd = open_file(dsh_fd, ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL, path)
        except FileExistsError:
            return _complete(dsh_fd, path)
        except UnsafePath as exc:
            return _left_alone(path, exc.reason)
        except (OSError, DshError) as exc:
            return _report(f"could not write {path}: {exc}")
    finally:
        os.close(dsh_fd)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        try:
            out.write(DSH_GITIGNORE)
        except OSError as exc:
            return _report(f"could not write {path}: {exc}")
    return None


def _complete(dsh_fd: int, path: Path) -> str | None:
    """Append the lines of REQUIRED an existing file lacks (read and written through one
    handle opened without following a link)."""
    try:
        fd = open_file(dsh_fd, ".gitignore", os.O_RDWR | os.O_APPEND, path)
    except UnsafePath as exc:
        return _left_alone(path, exc.reason)
    except (OSError, DshError) as exc:
        return _left_alone(path, str(exc))
    try:
        data = os.pread(fd, _READ_CAP + 1, 0)
        if len(data) > _READ_CAP:
            return _report(f"{path} is larger than {_READ_CAP} bytes and was left as it is")
        have = {line.strip() for line in data.decode("utf-8", "replace").splitlines()}
        missing = [entry for entry in REQUIRED if entry not in have and "/" + entry not in have]
        if not missing:
            return None
        lead = b"\n" if data and not data.endswith(b"\n") else b""
        added = lead + b"# Added by dshd: what it keeps here stays out of version control.\n"
        added += "".join(entry + "\n" for entry in missing).encode()
        os.write(fd, added)
        log.info("added %s to %s", ", ".join(missing), path)
        return None
    except OSError as exc:
        return _report(f"could not add to {path}: {exc}")
    finally:
        os.close(fd)


def _left_alone(path: Path, reason: str) -> str:
    return _report(f"{path} was left as it is ({reason}): add {', '.join(REQUIRED)} to it yourself "
                   "so git does not see what dshd keeps there")


def _report(message: str) -> str:
    log.warning("%s", message)
    return message
