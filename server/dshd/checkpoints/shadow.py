"""The shadow repository: snapshots of every file of a workspace as git trees, kept in a
repository dshd makes and owns at ``<root>/.dsh/checkpoints.git``, never the person's own
``.git``.

Only the ``git`` binary touches it, and always the same way:

- a fresh environment (nothing inherited but ``PATH``): no system or global config, no
  ``GIT_*`` variable of the caller, ``HOME`` pointed into the shadow folder where nothing
  is, literal pathspecs;
- ``-c`` overrides on every call: no hooks, no fsmonitor, no external diff or textconv,
  links stored as links, no line-ending conversion;
- the repository's own config is ours, byte for byte. A filter (``filter.<name>.clean``)
  can only run when config defines it, and the only config git reads is ours, so a
  workspace ``.gitattributes`` naming a filter does nothing. A ``checkpoints.git`` that is
  not exactly what we make (a cloned repository can ship one) is moved aside to
  ``checkpoints.git.untrusted-<time>`` and a fresh one made; one in our layout whose
  ``dsh-owner`` mark is not an HMAC made with this user's state key
  (:mod:`dshd.log.statekey`) goes to ``checkpoints.git.foreign-<time>``: a clone cannot
  bring a repository, nor a restore journal, dshd takes for its own.

A snapshot asks git which files differ from the shadow index (its stat cache: only
changed files are read), drops the ones over ``max_file_bytes`` before anything is
hashed, updates the index with the rest, writes the tree, drops from it the files git read
over the cap (grown since our lstat) and names it with a ref (``refs/dsh/trees/<tree>``) so
its objects stay. Restores write each file atomically
(temporary file in the same folder, fsync, rename) through folder handles opened without
following links, behind a journal written first and removed last; :meth:`recover`
finishes a restore a killed process left, when the journal carries our HMAC and names this
folder (the caller binds it to a local session log too); any other journal is moved aside
to ``.dsh/checkpoints.git.journal-refused-<time>``, never applied nor deleted.

Methods are synchronous (callers run them in a thread) and serialised by a lock file, so
two processes never interleave on one shadow repository.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dshd.errors import DshError
from dshd.log import statekey
from dshd.log.dsh_gitignore import ensure_dsh_gitignore
from dshd.log.safefs import UnsafePath, io_error, open_dir

log = logging.getLogger(__name__)

SHADOW_NAME = "checkpoints.git"
JOURNAL_NAME = "dsh-restore.json"
# The mark that this user's dshd made the repository on this machine (statekey's HMAC).
OWNER_NAME = "dsh-owner"
_OWNER_PURPOSE = "checkpoints.git owner v1"
_JOURNAL_PURPOSE = "checkpoints restore journal v2"
_JOURNAL_VERSION = 2
LOCK_NAME = "dsh.lock"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
TREE_REFS = "refs/dsh/trees"
DEFAULT_MAX_FILE_BYTES = 1 << 20
# Restore's temporary files start with this; the shadow's exclude file leaves them out.
RESTORE_TMP_PREFIX = ".dsh-restore-"
DISPLACED_SUFFIX = ".dsh-displaced"
# ls-tree takes paths on its command line up to this many; more and it lists the tree.
_ARGV_PATHS = 256
_JOURNAL_CAP = 64 << 20
_BULK_FILES = 64
_UPDATE_RETRIES = 100
_HEAD_LAG = 256
_KEEP_HEAP = {"MALLOC_TOP_PAD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}

# Exactly the files of a shadow repository we made; anything else there means we did not.
_CONFIG = (
    b"# dshd's checkpoint repository: made and used only by dshd, through git's plumbing.\n"
    b"[core]\n"
    b"\trepositoryformatversion = 0\n"
    b"\tbare = false\n"
    b"\tfilemode = true\n"
    b"\tsymlinks = true\n"
    b"\tignorecase = false\n"
    b"\tautocrlf = false\n"
    b"\tsafecrlf = false\n"
    b"\tfsmonitor = false\n"
    b"\tuntrackedCache = true\n"
    b"\tpreloadIndex = true\n"
    b"\tlogAllRefUpdates = false\n"
    b"\tquotePath = false\n"
    b"[index]\n"
    b"\tversion = 4\n"
    b"[gc]\n"
    b"\tauto = 0\n"
)
_HEAD = b"ref: refs/heads/dsh-snapshots\n"
_EXCLUDE = b"# dshd's own folder and its restore's temporary files are never snapshotted.\n/.dsh\n" + (
    RESTORE_TMP_PREFIX.encode() + b"*\n"
)
# Top-level entries git or dshd make in the shadow folder (all of them regular files or
# folders); a name outside this list means someone else made or changed the repository.
_ALLOWED_TOP = {
    "HEAD", "config", "objects", "refs", "info", "index", "index.lock", "packed-refs",
    LOCK_NAME, JOURNAL_NAME, JOURNAL_NAME + ".tmp", OWNER_NAME,
}
_ALLOWED_DIRS = {"objects", "refs", "info"}
# The -c overrides on every call: the repository config already says most of this; the
# command line says it again so no config file can undo it.
_OVERRIDES = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=true",
    "core.symlinks=true",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.filemode=true",
    "core.ignorecase=false",
    "core.quotePath=false",
    "core.bare=false",
    "core.sparseCheckout=false",
    "core.splitIndex=false",
    "core.attributesFile=/dev/null",
    "core.pager=cat",
    "core.askPass=",
    "index.version=4",
    "core.preloadIndex=true",
    "gc.auto=0",
    "color.ui=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.renames=false",
    "diff.external=",
    "submodule.recurse=false",
    "protocol.allow=never",
)

Status = Literal["added", "modified", "deleted"]
_STATUS = {"A": "added", "M": "modified", "T": "modified", "D": "deleted"}


@dataclass(frozen=True, slots=True)
class Snapshot:
    tree: str  # the 40-hex tree id
    files: int  # files (and links) in it


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    status: Status


@dataclass(frozen=True, slots=True)
class FileDiff:
    path: str
    status: Status
    diff: str | None  # a unified diff, cut at the caller's cap; None when binary
    binary: bool


class ShadowRepo:
    """The checkpoint repository of one workspace root."""

    def __init__(self, root: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        if max_file_bytes < 0:
            raise ValueError("max_file_bytes must be zero or more")
        self.root = Path(root).absolute()
        self.max_file_bytes = max_file_bytes
        self.dsh_dir = self.root / ".dsh"
        self.git_dir = self.dsh_dir / SHADOW_NAME
        self._git_bin = shutil.which("git") or "git"
        self._thread_lock = threading.Lock()
        self._checked: tuple[int, int] | None = None  # (st_dev, st_ino) of the git dir we verified
        # What the last snapshot of this process left: the index file's stat then, the
        # tree, the file count. A changed index (another process) means recount.
        self._index_stamp: tuple[int, int, int] | None = None
        self._last: Snapshot | None = None
        self._head_tree: str | None = None
        # Where a checkpoints.git dshd did not make was moved by this instance, if it was,
        # and why (the caller may tell the person); likewise a refused restore journal.
        self.moved_aside: Path | None = None
        self.moved_aside_reason: str | None = None
        self.journal_refused: tuple[Path, str] | None = None

    # ----- public -----

    def snapshot(self) -> Snapshot:
        with self._locked():
            return self._snapshot()

    def changes(self, from_tree: str, to_tree: str) -> list[FileChange]:
        _check_tree(from_tree, "from_tree")
        _check_tree(to_tree, "to_tree")
        with self._locked():
            out = self._git("diff-tree", "-r", "-z", "--no-renames", "--raw", from_tree, to_tree)
        return [FileChange(path, status) for path, status in _parse_raw(out)]

    def diff(
        self, from_tree: str, to_tree: str, paths: Iterable[str] | None = None, max_bytes: int = 256 * 1024,
        max_total_bytes: int = 32 << 20,
    ) -> list[FileDiff]:
        _check_tree(from_tree, "from_tree")
        _check_tree(to_tree, "to_tree")
        wanted = None if paths is None else {_check_path(p) for p in paths}
        with self._locked():
            listed = _parse_raw(self._git("diff-tree", "-r", "-z", "--no-renames", "--raw", from_tree, to_tree))
            if wanted is not None:
                listed = [(p, s) for p, s in listed if p in wanted]
            if not listed:
                return []
            texts = self._patches(from_tree, to_tree, [p for p, _ in listed], max_bytes, max_total_bytes)
        out = []
        for path, status in listed:
            text, binary = texts.get(path, ("", False))
            out.append(FileDiff(path, status, None if binary else text, binary))
        return out

    def restore(self, tree: str, paths: Iterable[str], note: dict[str, Any], *, keep_journal: bool = False) -> list[str]:
        """Put ``paths`` back as they are in ``tree`` (deleting the ones it does not have).
        The journal is durable before the first file changes, so a killed restore is
        finished by :meth:`recover`; each file is replaced atomically. ``keep_journal``: the
        caller records the restore first, then calls :meth:`finish_restore` (a kill between
        the files and the record leaves the journal, so :meth:`recover` can record it)."""
        _check_tree(tree, "tree")
        wanted = sorted({_check_path(p) for p in paths})
        try:
            body = json.dumps(
                {"version": _JOURNAL_VERSION, "root": str(self.root), "tree": tree, "paths": wanted, "note": note}
            ).encode()
        except (TypeError, ValueError) as exc:
            raise DshError("invalid-params", f"the restore note is not JSON: {exc}", field="note") from None
        with self._locked():
            entries = self._entries(tree, wanted)  # before the journal: an unknown tree changes nothing
            # Bound to this user and machine: a journal whose mark is not ours is never applied.
            self._write_journal(statekey.mac(_JOURNAL_PURPOSE, body).encode() + b"\n" + body)
            self._apply(tree, wanted, entries)
            if not keep_journal:
                self._remove_journal()
        return wanted

    def recover(
        self, *, keep_journal: bool = False, check: Callable[[str, list[str], dict[str, Any]], str | None] | None = None,
    ) -> dict[str, Any] | None:
        """Finish a restore a killed process left (returns its note), else None. Also
        removes the index lock a killed snapshot left. ``keep_journal`` as for :meth:`restore`.

        Only a journal this user's dshd wrote on this machine for this workspace is applied
        (its HMAC, made with the key of :mod:`dshd.log.statekey`, and the root it names),
        and only when ``check(tree, paths, note)`` finds nothing wrong (the caller binds it
        to a local session log). Any other is moved aside, never applied nor deleted:
        :attr:`journal_refused` says where and why, and None is returned."""
        with self._locked():
            journal = self._read_journal()
            if journal is None:
                return None
            tree, wanted, note = journal
            reason = check(tree, wanted, note) if check is not None else None
            if reason is not None:
                self._refuse_journal(reason)
                return None
            self._apply(tree, wanted, self._entries(tree, wanted))
            if not keep_journal:
                self._remove_journal()
            return note

    def finish_restore(self) -> None:
        """Remove the journal of a restore that is recorded (after ``keep_journal``)."""
        with self._locked():
            self._remove_journal()

    def check(self) -> None:
        """Check an existing repository now (moving it aside if dshd did not make it here);
        make none when there is none."""
        if os.path.lexists(self.git_dir):
            with self._locked():
                pass

    # ----- the repository: made by us, checked before use -----

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            self._ensure()
            try:
                fd = os.open(self.git_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise io_error(exc, self.git_dir / LOCK_NAME, "open") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                # We hold the lock, so no snapshot of ours is running: an index lock is a
                # killed one's leftover. Its git may live on (a kill -9 of the daemon leaves
                # its children running): it is ended first, else its late rename would take
                # the lock file of our own next git for its index.
                if os.path.lexists(self.git_dir / "index.lock"):
                    _end_orphans(str(self.git_dir))
                try:
                    os.unlink(self.git_dir / "index.lock")
                except FileNotFoundError:
                    pass
                yield
            finally:
                os.close(fd)

    def _ensure(self) -> None:
        """The shadow repository exists and is ours; one that is not is moved aside. The
        first time this instance opens it (and whenever it makes one), the temporary
        repositories killed creates left in ``.dsh`` are removed."""
        # Without this user's key nothing here can be told ours: refuse (nothing is moved).
        statekey.state_key()
        try:
            dsh_fd = open_dir(self.dsh_dir, self.root, create=True)  # refuses a linked .dsh
        except OSError as exc:
            raise io_error(exc, self.dsh_dir, "open") from None
        try:
            st = os.lstat(self.git_dir)
        except FileNotFoundError:
            st = None
        except BaseException:
            os.close(dsh_fd)
            raise
        try:
            if st is not None and self._checked == (st.st_dev, st.st_ino) and self._config_is_ours():
                return
            _remove_leftovers(dsh_fd)
        finally:
            os.close(dsh_fd)
        if st is not None:
            reason = _untrusted_reason(self.git_dir)
            kind = "untrusted"
            if reason is None:
                reason, kind = _owner_reason(self.git_dir), "foreign"
            if reason is None:
                self._checked = (st.st_dev, st.st_ino)
                ensure_dsh_gitignore(self.dsh_dir)  # once an instance: an older one may lack our lines
                return
            self._move_aside(kind, reason)
        self._create()
        ensure_dsh_gitignore(self.dsh_dir)

    def _config_is_ours(self) -> bool:
        try:
            fd = os.open(self.git_dir / "config", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return os.read(fd, len(_CONFIG) + 1) == _CONFIG
        finally:
            os.close(fd)

    def _move_aside(self, kind: str, reason: str) -> None:
        """``checkpoints.git`` to ``checkpoints.git.<kind>-<time>`` (kept, never deleted)."""
        target = _aside(self.git_dir, self.dsh_dir / f"{SHADOW_NAME}.{kind}-")
        if target is not None:
            self.moved_aside, self.moved_aside_reason = target, reason
            log.warning("moved aside %s (%s) to %s: dshd did not make it on this machine for this user; "
                        "a new one is made", self.git_dir, reason, target.name)

    def _refuse_journal(self, reason: str) -> None:
        """The restore journal to ``.dsh/checkpoints.git.journal-refused-<time>``: kept for
        the person to look at, outside the repository so it is never read again."""
        path = self.git_dir / JOURNAL_NAME
        target = _aside(path, self.dsh_dir / f"{SHADOW_NAME}.journal-refused-")
        if target is not None:
            _fsync_path(self.git_dir)
            self.journal_refused = (target, reason)
            log.warning("a restore journal was not applied (%s): moved to %s; no file was changed", reason, target)

    def _create(self) -> None:
        """Made in a temporary folder and renamed into place: a half-made repository is never
        at the real name."""
        tmp = self.dsh_dir / f"{SHADOW_NAME}.new-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            os.mkdir(tmp, 0o700)
            nonce = os.urandom(16).hex().encode()
            # The mark first: a leftover of a killed create is then ours to remove.
            _write_new(tmp / OWNER_NAME, b"dshd " + nonce + b" " + statekey.mac(_OWNER_PURPOSE, nonce).encode() + b"\n")
            for sub in ("objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags", "refs/dsh",
                        TREE_REFS, "info"):
                os.mkdir(tmp / sub, 0o755)
            for name, data in (("HEAD", _HEAD), ("config", _CONFIG), ("info/exclude", _EXCLUDE)):
                _write_new(tmp / name, data)
            try:
                os.rename(tmp, self.git_dir)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process made it first
                self._ensure_made_by_other()
                return
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise io_error(exc, self.git_dir, "create") from None
        st = os.lstat(self.git_dir)
        self._checked = (st.st_dev, st.st_ino)
        self._index_stamp = None
        self._last = None
        self._head_tree = None

    def _ensure_made_by_other(self) -> None:
        reason = _untrusted_reason(self.git_dir) or _owner_reason(self.git_dir)
        if reason is not None:
            raise UnsafePath(self.git_dir, reason)
        st = os.lstat(self.git_dir)
        self._checked = (st.st_dev, st.st_ino)

    # ----- running git -----

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "LANG": "C",
            # No file there: the shadow folder admits no such entry.
            "HOME": str(self.git_dir / "no-home"),
            "XDG_CONFIG_HOME": str(self.git_dir / "no-home"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self.git_dir / "index"),
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_LAZY_FETCH": "1",
        }
        return env

    def _args(self, *args: str) -> list[str]:
        cmd = [self._git_bin, "--no-pager"]
        for override in _OVERRIDES:
            cmd += ["-c", override]
        cmd += ["-c", f"core.excludesFile={self._person_excludes()}"]
        return cmd + list(args)

    def _person_excludes(self) -> str:
        """The person's own ``.git/info/exclude`` (local patterns no clone brings), when it is
        a plain file in plain folders; else nothing."""
        path = self.root / ".git" / "info" / "exclude"
        try:
            if all(stat.S_ISDIR(os.lstat(p).st_mode) for p in (self.root / ".git", self.root / ".git" / "info")):
                if stat.S_ISREG(os.lstat(path).st_mode):
                    return str(path)
        except OSError:
            pass
        return "/dev/null"

    def _git(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        return self._finish(self._start(*args, stdin=input is not None, env=env), args, input)

    def _start(self, *args: str, stdin: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                self._args(*args), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env or self._env(), cwd=self.root,
            )
        except OSError as exc:
            raise io_error(exc, self._git_bin, "run") from None

    def _finish(self, proc: subprocess.Popen[bytes], args: tuple[str, ...], input: bytes | None = None) -> bytes:
        out, err = proc.communicate(input)
        if proc.returncode != 0:
            words = err.decode("utf-8", "replace").strip()[-2000:]
            command = next((a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c")), "")
            raise DshError("io-error", f"git {command} failed in the checkpoint repository: {words}",
                           path=str(self.git_dir), errno="EIO")
        return out

    # ----- snapshot -----

    def _snapshot(self) -> Snapshot:
        index_path = self.git_dir / "index"
        stamp_before = _stamp(index_path)
        # One git status asks the index's stat cache which files changed (their lstats run
        # in threads; a file only touched is re-read once and its cache entry refreshed) and
        # lists the files not in the index, .gitignore applied. It compares the index with
        # HEAD too, so HEAD is kept at a commit of the last tree: that part is then empty.
        # Every untracked file is listed by config, not by -uall: git uses its untracked
        # cache (each folder's listing kept while the folder's mtime holds) only when the
        # mode comes from config, and with it the walk of the folders drops from about 15 ms
        # to under 1 ms on 10,000 files.
        listing = self._git("-c", "status.showUntrackedFiles=all", "status", "--porcelain=v2", "-z", "--no-renames",
                            "--ignore-submodules=all")
        tracked_seen: dict[str, None] = {}
        untracked: list[str] = []
        behind_head = 0  # entries where the index differs from HEAD's tree
        for record in listing.split(b"\0"):
            if record.startswith(b"? "):
                untracked.append(os.fsdecode(record[2:]))
            elif record.startswith(b"1 "):
                fields = record.split(b" ", 8)
                behind_head += fields[1][:1] != b"."
                if fields[1][1:2] != b".":  # the work tree differs from the index
                    tracked_seen[os.fsdecode(fields[8])] = None
            elif record.startswith(b"u "):
                tracked_seen[os.fsdecode(record.split(b" ", 10)[10])] = None
        # The index as this process left it (status may have rewritten it since, with the
        # same entries and fresher stat data): the last count still holds.
        known = self._last is not None and stamp_before == self._index_stamp
        if known:
            self._index_stamp = _stamp(index_path)
        if not tracked_seen and not untracked and known:
            return self._last
        update: list[str] = []  # --add --remove --replace: changed, new, gone (git drops those missing)
        force_remove: list[str] = []  # in the index but not to be kept: over the cap, not a file
        added = removed = 0
        folders: dict[str, bool] = {}
        hashed: list[str] = []  # the files and links git reads now
        for path in tracked_seen:
            kind = self._kind(path, folders)
            if kind == "keep":
                update.append(path)
                hashed.append(path)
            elif kind == "missing":
                update.append(path)
                removed += 1
            elif kind == "dir":
                update.append(path)  # a folder where a file was: dropped, its files come as new
                removed += 1
            else:
                force_remove.append(path)
                removed += 1
        for path in untracked:
            # A folder git names with a slash is another repository inside this one; skip it.
            if path.endswith("/"):
                continue
            if self._kind(path, folders) == "keep":
                update.append(path)
                hashed.append(path)
                added += 1
        counted = self._update_index(update, force_remove)
        tree = self._git("write-tree").decode().strip()
        grown = self._over_cap(tree, hashed) if hashed else []
        if grown:
            # Grown past the cap between our lstat and git's read: left out, as a file over
            # the cap always is (its blob stays in the object store, named by no snapshot).
            self._git("update-index", "--force-remove", "-z", "--stdin", input=_nul_join(grown))
            tree = self._git("write-tree").decode().strip()
            counted = False
        stamp_after = _stamp(index_path)
        if counted and known:
            files = self._last.files + added - removed
        elif counted and stamp_before is None:
            files = added  # there was no index: every file is new
        else:
            files = self._git("ls-files", "-z").count(b"\0")
        self._keep(tree)
        if behind_head + len(untracked) > _HEAD_LAG or not self._head_exists():
            self._point_head(tree)
        self._index_stamp = stamp_after
        self._last = Snapshot(tree, files)
        return self._last

    def _update_index(self, update: list[str], force_remove: list[str]) -> bool:
        """Apply the snapshot's changes to the index. git gives up on the whole list when one
        path cannot be read (no permission, gone behind a link since it was named): that path
        is then left out and the rest applied again. False when that happened (the caller's
        count of added and removed files is off: it recounts)."""
        update = list(update)
        exact = True
        for _ in range(_UPDATE_RETRIES):
            if force_remove:
                self._git("update-index", "--force-remove", "-z", "--stdin", input=_nul_join(force_remove))
                force_remove = []
            if not update:
                return exact
            # Many new files (a first snapshot): one pack instead of a file per object,
            # which is most of a first snapshot's time (git's bulk check-in streams every
            # blob over the threshold into one pack).
            bulk = ("-c", "core.bigFileThreshold=1") if len(update) >= _BULK_FILES else ()
            # Bulk check-in allocates and frees a large buffer per file; glibc hands that
            # memory back and faults it in again each time (most of the system time of a
            # first snapshot). Keeping it for the life of this one process halves the CPU.
            env = self._env() | _KEEP_HEAP if bulk else None
            proc = self._start(*bulk, "update-index", "--add", "--remove", "--replace", "-z", "--stdin", stdin=True,
                               env=env)
            _, err = proc.communicate(_nul_join(update))
            if proc.returncode == 0:
                return exact
            failed = _unprocessable(err)
            if failed not in update:
                raise DshError("io-error", "git update-index failed in the checkpoint repository: "
                               + err.decode("utf-8", "replace").strip()[-2000:], path=str(self.git_dir), errno="EIO")
            update.remove(failed)
            force_remove = [failed]
            exact = False
        raise DshError("io-error", f"more than {_UPDATE_RETRIES} files of the workspace could not be read",
                       path=str(self.root), errno="EIO")

    def _over_cap(self, tree: str, paths: list[str]) -> list[str]:
        """Which of ``paths`` ``tree`` holds as regular files larger than the cap, by the
        sizes of the blobs git wrote (a file can grow after our lstat; git reads the size
        its own lstat saw). A link is a link at any size, as in :meth:`_kind`."""
        args = ["ls-tree", "-r", "-l", "-z", "--full-tree", tree]
        if len(paths) <= _ARGV_PATHS:
            args += ["--", *paths]
        wanted = set(paths)
        over = []
        for item in self._git(*args).split(b"\0"):
            meta, _, name = item.partition(b"\t")
            fields = meta.split()
            if len(fields) != 4 or fields[0] not in (b"100644", b"100755") or not fields[3].isdigit():
                continue
            if int(fields[3]) > self.max_file_bytes:
                path = os.fsdecode(name)
                if path in wanted:
                    over.append(path)
        return over

    def _kind(self, path: str, folders: dict[str, bool]) -> str:
        """What the snapshot does with a path git named: keep it (a regular file within the
        cap, or a link), or it is missing, a folder, or to be left out (too big, not a file,
        or behind a link: a folder swapped for a link since git last looked)."""
        parent = path.rpartition("/")[0]
        if parent and not self._plain_folder(parent, folders):
            return "leave-out"
        try:
            st = os.lstat(self.root / path)
        except FileNotFoundError:
            return "missing"
        except OSError:
            return "leave-out"
        if stat.S_ISLNK(st.st_mode):
            return "keep"
        if stat.S_ISREG(st.st_mode):
            return "keep" if st.st_size <= self.max_file_bytes else "leave-out"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "leave-out"

    def _head_exists(self) -> bool:
        return os.path.lexists(self.git_dir / _HEAD.decode().removeprefix("ref: ").strip())

    def _point_head(self, tree: str) -> None:
        """HEAD at a commit of a recent tree, so status's compare of the index with it walks
        only what changed since (skipped until that is more than a few hundred files: one
        process less per snapshot). The commit's author and dates are fixed: one tree, one
        commit id."""
        if tree == self._head_tree:
            return
        env = self._env() | {
            "GIT_AUTHOR_NAME": "dshd", "GIT_AUTHOR_EMAIL": "dshd@localhost", "GIT_AUTHOR_DATE": "1700000000 +0000",
            "GIT_COMMITTER_NAME": "dshd", "GIT_COMMITTER_EMAIL": "dshd@localhost", "GIT_COMMITTER_DATE": "1700000000 +0000",
        }
        commit = self._git("commit-tree", "-m", "dshd snapshot", tree, env=env).decode().strip()
        ref = self.git_dir / _HEAD.decode().removeprefix("ref: ").strip()
        try:
            os.makedirs(ref.parent, exist_ok=True)
            _write_new(ref, commit.encode() + b"\n")
        except OSError as exc:
            raise io_error(exc, ref, "write") from None
        self._head_tree = tree

    def _plain_folder(self, folder: str, folders: dict[str, bool]) -> bool:
        """Every component of ``folder`` is a real folder, not a link (memoised per snapshot)."""
        known = folders.get(folder)
        if known is None:
            parent = folder.rpartition("/")[0]
            known = not parent or self._plain_folder(parent, folders)
            if known:
                try:
                    known = stat.S_ISDIR(os.lstat(self.root / folder).st_mode)
                except OSError:
                    known = False
            folders[folder] = known
        return known

    def _keep(self, tree: str) -> None:
        """A ref per distinct tree, so its objects stay (written as git writes a loose ref)."""
        ref = self.git_dir / TREE_REFS / tree
        if os.path.lexists(ref):
            return
        try:
            os.makedirs(self.git_dir / TREE_REFS, exist_ok=True)
            _write_new(ref, tree.encode() + b"\n", exist_ok=True)
        except OSError as exc:
            raise io_error(exc, ref, "write") from None

    # ----- diff -----

    def _patches(self, from_tree: str, to_tree: str, paths: list[str], max_bytes: int,
                 max_total_bytes: int) -> dict[str, tuple[str, bool]]:
        """Each path's unified diff (cut at ``max_bytes``; once the diffs kept reach
        ``max_total_bytes``, the rest are a one-line note) and whether git found it binary.
        The patch is split at the ``diff --git`` header git writes for each path."""
        texts: dict[str, tuple[list[bytes], int, bool]] = {}
        kept = [0]  # bytes of diff kept so far, across the chunks
        for start in range(0, len(paths), _ARGV_PATHS):  # paths go on the command line: in chunks
            self._patch_chunk(from_tree, to_tree, paths[start:start + _ARGV_PATHS], max_bytes, max_total_bytes,
                              kept, texts)
        out = {}
        for path, (parts, size, binary) in texts.items():
            text = b"".join(parts).decode("utf-8", "replace")
            if size > max_bytes:
                text = text[: text.rfind("\n") + 1] + f"... (the rest of this diff, {size - max_bytes} bytes, left out)\n"
            out[path] = (text, binary)
        return out

    def _patch_chunk(self, from_tree: str, to_tree: str, paths: list[str], max_bytes: int, max_total_bytes: int,
                     kept: list[int], texts: dict[str, tuple[list[bytes], int, bool]]) -> None:
        left_out = f"(diff left out: the diffs before it already reach {max_total_bytes} bytes)\n".encode()
        headers = {_diff_header(p): p for p in paths}
        args = self._args("diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                          "-U3", from_tree, to_tree, "--", *paths)
        current: str | None = None
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              env=self._env(), cwd=self.root) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                header = headers.get(line.rstrip(b"\n")) if line.startswith(b"diff --git ") else None
                if header is not None:
                    current = header
                    if current not in texts and kept[0] >= max_total_bytes:
                        texts[current] = ([left_out], len(left_out), False)
                        current = None  # its lines are skipped
                    else:
                        texts.setdefault(current, ([], 0, False))
                if current is None:
                    continue
                parts, size, binary = texts[current]
                if line.startswith(b"Binary files ") and header is None:
                    binary = True
                if size < max_bytes:
                    piece = line[: max_bytes - size]
                    parts.append(piece)
                    kept[0] += len(piece)
                size += len(line)
                texts[current] = (parts, size, binary)
        if proc.returncode != 0:
            raise DshError("io-error", "git diff-tree failed in the checkpoint repository", path=str(self.git_dir),
                           errno="EIO")

    # ----- restore -----

    def _entries(self, tree: str, paths: list[str]) -> dict[str, tuple[str, str]]:
        """path -> (mode, blob id) for the wanted paths that ``tree`` has as files or links."""
        wanted = set(paths)
        args = ["ls-tree", "-r", "-z", "--full-tree", tree]
        if 0 < len(paths) <= _ARGV_PATHS:
            args += ["--", *paths]
        if not paths:
            return {}
        entries = {}
        for item in self._git(*args).split(b"\0"):
            if not item:
                continue
            meta, _, name = item.partition(b"\t")
            mode, kind, oid = meta.decode().split()
            path = os.fsdecode(name)
            if path in wanted and kind == "blob" and mode in ("100644", "100755", "120000"):
                entries[path] = (mode, oid)
            elif path in wanted and kind == "commit":
                entries[path] = ("gitlink", oid)
        return entries

    def _apply(self, tree: str, paths: list[str], entries: dict[str, tuple[str, str]]) -> None:
        """Make each path as ``tree`` has it. Idempotent: a second run after a crash ends
        the same way."""
        try:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise io_error(exc, self.root, "open") from None
        touched = _Folders()
        try:
            # Deletions first, deepest first: a file that becomes a folder (or a folder that
            # becomes a file) is cleared before its new shape is written.
            for path in sorted((p for p in paths if p not in entries), key=lambda p: (-p.count("/"), p)):
                self._delete(root_fd, path, touched)
            writes = [p for p in paths if p in entries and entries[p][0] != "gitlink"]
            if writes:
                with self._blobs() as read_blob:
                    for path in writes:
                        mode, oid = entries[path]
                        self._write(root_fd, path, mode, read_blob(oid), touched)
            touched.sync()
        except OSError as exc:
            raise io_error(exc, self.root, "restore files in") from None
        finally:
            touched.close()
            os.close(root_fd)

    @contextmanager
    def _blobs(self) -> Iterator[Any]:
        proc = subprocess.Popen(self._args("cat-file", "--batch"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=self._env(), cwd=self.root)
        assert proc.stdin is not None and proc.stdout is not None

        def read_blob(oid: str) -> bytes:
            proc.stdin.write(oid.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                raise DshError("io-error", f"the checkpoint repository has no blob {oid}", path=str(self.git_dir),
                               errno="ENOENT")
            size = int(header[2])
            data = proc.stdout.read(size + 1)[:size]
            if len(data) != size:
                raise DshError("io-error", f"short read of blob {oid}", path=str(self.git_dir), errno="EIO")
            return data

        try:
            yield read_blob
        finally:
            proc.stdin.close()
            proc.wait()
            proc.stdout.close()

    def _delete(self, root_fd: int, path: str, touched: _Folders) -> None:
        parts = path.split("/")
        chain = _walk(root_fd, parts[:-1], create=False)
        if chain is None:
            return  # a parent is missing or not a plain folder: nothing of ours is there
        try:
            fd = chain[-1]
            try:
                st = os.lstat(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                return  # a folder is no file of the snapshot; its files are paths of their own
            os.unlink(parts[-1], dir_fd=fd)
            # Folders left empty go too (a snapshot has no empty folders).
            for depth in range(len(chain) - 1, 0, -1):
                try:
                    os.rmdir(parts[depth - 1], dir_fd=chain[depth - 1])
                except OSError:
                    break
            touched.add(chain[-1])
            if len(chain) > 1:
                touched.add(chain[0])
        finally:
            for fd in chain[1:]:
                os.close(fd)

    def _write(self, root_fd: int, path: str, mode: str, data: bytes, touched: _Folders) -> None:
        parts = path.split("/")
        chain = _walk(root_fd, parts[:-1], create=True)
        assert chain is not None
        try:
            fd, name = chain[-1], parts[-1]
            tmp = RESTORE_TMP_PREFIX + hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
            try:
                os.unlink(tmp, dir_fd=fd)  # a killed restore's leftover
            except FileNotFoundError:
                pass
            if mode == "120000":
                os.symlink(data, tmp, dir_fd=fd)
            else:
                perms = 0o755 if mode == "100755" else 0o644
                out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, perms,
                              dir_fd=fd)
                try:
                    os.fchmod(out, perms)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(out, view):]
                    os.fsync(out)
                finally:
                    os.close(out)
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                _displace(fd, name)
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            touched.add(fd)
        finally:
            for held in chain[1:]:
                os.close(held)

    # ----- the journal -----

    def _write_journal(self, data: bytes) -> None:
        tmp = self.git_dir / (JOURNAL_NAME + ".tmp")
        try:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, self.git_dir / JOURNAL_NAME)
            _fsync_path(self.git_dir)
        except OSError as exc:
            raise io_error(exc, self.git_dir / JOURNAL_NAME, "write") from None

    def _remove_journal(self) -> None:
        try:
            os.unlink(self.git_dir / JOURNAL_NAME)
            _fsync_path(self.git_dir)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise io_error(exc, self.git_dir / JOURNAL_NAME, "remove") from None

    def _read_journal(self) -> tuple[str, list[str], dict[str, Any]] | None:
        path = self.git_dir / JOURNAL_NAME
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise io_error(exc, path, "read") from None
        try:
            raw = os.read(fd, _JOURNAL_CAP)
        finally:
            os.close(fd)
        mark, nl, body = raw.partition(b"\n")
        if not nl or not statekey.mac_ok(_JOURNAL_PURPOSE, body, mark.decode("ascii", "replace")):
            # Not written by this user's dshd on this machine (or damaged): never applied.
            self._refuse_journal("its mark is not of this user and machine")
            return None
        try:
            journal = json.loads(body)
            if journal["version"] != _JOURNAL_VERSION:
                raise ValueError("version")
            tree, paths, note, root = journal["tree"], journal["paths"], journal["note"], journal["root"]
            _check_tree(tree, "tree")
            wanted = sorted({_check_path(p) for p in paths})
            if not isinstance(note, dict):
                raise ValueError("note")
        except (ValueError, KeyError, TypeError, DshError):
            self._refuse_journal("it cannot be read")
            return None
        if root != str(self.root):
            self._refuse_journal(f"it was written for another folder ({root!r})")
            return None
        return tree, wanted, note


# ----- helpers -----


def _check_tree(tree: object, field: str) -> str:
    if not isinstance(tree, str) or len(tree) != 40 or any(c not in "0123456789abcdef" for c in tree):
        raise DshError("invalid-params", f"{field} must be a 40-hex tree id", field=field)
    return tree


def _check_path(path: object) -> str:
    """A workspace-relative path as git writes it; never into ``.git`` or ``.dsh``."""
    if not isinstance(path, str) or not path or "\0" in path or path.startswith("/"):
        raise DshError("invalid-params", f"not a workspace-relative path: {path!r}", field="paths")
    parts = path.split("/")
    if any(p in ("", ".", "..") or p.lower() == ".git" for p in parts) or parts[0] == ".dsh":
        raise DshError("invalid-params", f"not a path a checkpoint holds: {path!r}", field="paths")
    return path


def _parse_raw(out: bytes) -> list[tuple[str, Status]]:
    """``diff-tree --raw -z``: ``:<mode> <mode> <oid> <oid> <status>\\0<path>\\0``; entries
    for other repositories inside the workspace (mode 160000) are left out."""
    items = out.split(b"\0")
    result = []
    for meta, name in zip(items[0::2], items[1::2]):
        if not meta.startswith(b":"):
            continue
        old_mode, new_mode, _, _, letter = meta[1:].decode().split()
        if "160000" in (old_mode, new_mode):
            continue
        result.append((os.fsdecode(name), _STATUS.get(letter[:1], "modified")))
    return result


_C_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}


def _quoted(name: bytes) -> bytes:
    """A name as git writes it in a patch header (quote_c_style, ``core.quotePath=false``)."""
    if not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) for b in name):
        return name
    out = ['"']
    for b in name:
        if b in _C_ESCAPES:
            out.append(_C_ESCAPES[b])
        elif b < 0x20 or b == 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    out.append('"')
    return "".join(out).encode("latin-1")


def _diff_header(path: str) -> bytes:
    name = os.fsencode(path)
    return b"diff --git " + _quoted(b"a/" + name) + b" " + _quoted(b"b/" + name)


def _walk(root_fd: int, folders: list[str], *, create: bool) -> list[int] | None:
    """Handles on each folder from the root down (``[root_fd, ...]``; the caller closes all
    but the first), opened without following links. With ``create``, a missing folder is
    made and a link or file where a folder belongs is replaced by one (the snapshot has a
    folder there; replacing the link itself never touches what it points to). Without, a
    missing or non-folder step gives None."""
    chain = [root_fd]
    try:
        for part in folders:
            fd = chain[-1]
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise _Stop from None
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if not create:
                    raise _Stop from None
                os.unlink(part, dir_fd=fd)
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            chain.append(child)
    except _Stop:
        for fd in chain[1:]:
            os.close(fd)
        return None
    except BaseException:
        for fd in chain[1:]:
            os.close(fd)
        raise
    return chain


class _Stop(Exception):
    pass


class _Folders:
    """The folders a restore changed, each fsynced once at the end (names made or
    removed are durable only then); at most ``cap`` handles held, synced early past it."""

    def __init__(self, cap: int = 256) -> None:
        self.cap = cap
        self.held: dict[tuple[int, int], int] = {}

    def add(self, fd: int) -> None:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in self.held:
            return
        if len(self.held) >= self.cap:
            self.sync()
            self.close()
        self.held[key] = os.dup(fd)

    def sync(self) -> None:
        for fd in self.held.values():
            os.fsync(fd)

    def close(self) -> None:
        for fd in self.held.values():
            os.close(fd)
        self.held.clear()


def _displace(dir_fd: int, name: str) -> None:
    """A folder where the snapshot has a file: what is still in it (files no snapshot
    holds) is kept under a new name beside it rather than deleted."""
    try:
        os.rmdir(name, dir_fd=dir_fd)
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    for n in range(1000):
        target = f"{name}{DISPLACED_SUFFIX}" + ("" if n == 0 else f"-{n}")
        try:
            os.stat(target, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(name, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
    raise OSError(errno.EEXIST, "no free name to move a folder aside", name)


def _end_orphans(git_dir: str, wait_s: float = 5.0) -> None:
    """SIGKILL the git processes still working on ``git_dir`` (found by their ``GIT_DIR``),
    and wait for them to be gone. Called only with the repository's lock held, so none of
    them belongs to a live holder: they were left by a process killed mid-snapshot."""
    needle = f"GIT_DIR={git_dir}".encode() + b"\0"
    found: list[int] = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if os.stat(entry.path).st_uid != os.getuid():
                continue
            with open(f"{entry.path}/environ", "rb") as f:
                environ = f.read(1 << 20) + b"\0"
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry.name))
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    for pid in found:
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[-1].split()[0]
            except OSError:
                break  # gone
            if state == b"Z":
                break  # dead, not yet reaped by its (new) parent
            time.sleep(0.005)


# The temporary folder _create makes and renames into place: a daemon killed in between
# leaves it, named with that daemon's pid.
_LEFTOVER = re.compile(re.escape(SHADOW_NAME) + r"\.new-([1-9][0-9]{0,9})-[0-9a-f]{8}")


def _remove_leftovers(dsh_fd: int) -> None:
    """Remove from ``.dsh`` (the handle ``dsh_fd``) the temporary repositories of creates
    whose process is gone. Only folders of exactly that pattern, of this user, holding this
    user's owner mark (a clone can ship folders of that name: they are not ours to delete,
    nor is a link); ``rmtree`` opens each folder without following links. Best effort: one
    that cannot go, or a create killed before its mark, costs only space."""
    try:
        names = os.listdir(dsh_fd)
    except OSError:
        return
    for name in names:
        found = _LEFTOVER.fullmatch(name)
        if found is None or _pid_alive(int(found.group(1))):
            continue
        try:
            st = os.lstat(name, dir_fd=dsh_fd)
            if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode) or not _marked_at(dsh_fd, name):
                continue
            shutil.rmtree(name, dir_fd=dsh_fd)
        except (OSError, DshError):
            pass


def _marked_at(dsh_fd: int, name: str) -> bool:
    """Whether folder ``name`` of ``dsh_fd`` holds this user's owner mark (opened without links)."""
    folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dsh_fd)
    try:
        fd = os.open(OWNER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return False
    finally:
        os.close(folder)
    try:
        raw = os.read(fd, 256) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)
    return _owner_mark_reason(raw) is None


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (any user's); when it cannot be told, yes, so
    nothing a live create is making is removed."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def _untrusted_reason(git_dir: Path) -> str | None:
    """None when ``git_dir`` is exactly a repository we make: a plain folder of ours, our
    config, HEAD and exclude file byte for byte, no hooks, attributes, alternates or
    anything else git would read."""
    try:
        st = os.lstat(git_dir)
        if stat.S_ISLNK(st.st_mode):
            return "is a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return "is not a folder"
        if st.st_uid != os.getuid():
            return "belongs to another user"
        for entry in os.scandir(git_dir):
            if entry.name not in _ALLOWED_TOP:
                return f"has {entry.name!r}, which dshd never makes"
            want_dir = entry.name in _ALLOWED_DIRS
            if entry.is_symlink() or (entry.is_dir(follow_symlinks=False) != want_dir):
                return f"{entry.name!r} is not what dshd makes"
        for name, want in (("config", _CONFIG), ("HEAD", _HEAD), ("info/exclude", _EXCLUDE)):
            if _read_small(git_dir / name, len(want) + 1) != want:
                return f"its {name} is not dshd's"
        if {e.name for e in os.scandir(git_dir / "info")} != {"exclude"}:
            return "its info/ has more than dshd's exclude file"
        if any(e.name not in ("packs",) for e in os.scandir(git_dir / "objects" / "info")):
            return "its objects/info has alternates or other files dshd never makes"
    except OSError as exc:
        return f"could not be checked ({exc.strerror})"
    return None


def _owner_reason(git_dir: Path) -> str | None:
    """None when ``git_dir`` holds the owner mark this user's dshd makes on this machine."""
    return _owner_mark_reason(_read_small(git_dir / OWNER_NAME, 256))


def _owner_mark_reason(raw: bytes | None) -> str | None:
    if raw is None:
        return "it has no owner mark (it came with a clone or from elsewhere, or a dshd before owner marks made it)"
    parts = raw.rstrip(b"\n").split(b" ")
    if len(parts) != 3 or parts[0] != b"dshd" or not statekey.mac_ok(_OWNER_PURPOSE, parts[1], parts[2].decode("ascii", "replace")):
        return "its owner mark was not made by this user's dshd on this machine"
    return None


def _aside(path: Path, prefix: Path) -> Path | None:
    """Rename ``path`` (a link itself, never its target) to ``<prefix><time>[-n]``, a name
    no one has; None when ``path`` is gone."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(100):
        target = prefix.with_name(prefix.name + stamp + ("" if n == 0 else f"-{n}"))
        try:
            if os.path.lexists(target):
                continue
            os.rename(path, target)
            return target
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise io_error(exc, path, "move aside") from None
    raise DshError("io-error", f"could not move aside {path}", path=str(path), errno="EEXIST")


def _read_small(path: Path, cap: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, cap)
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, *, exist_ok: bool = False) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _unprocessable(err: bytes) -> str | None:
    """The path of git update-index's "Unable to process path <path>", if it said so."""
    marker = b"Unable to process path "
    at = err.rfind(marker)
    if at < 0:
        return None
    return os.fsdecode(err[at + len(marker):].split(b"\n", 1)[0])


def _nul_join(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)
