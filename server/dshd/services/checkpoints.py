"""The checkpoints of one live session: what they are (from its log), what restoring one
would change, and the restore itself (the only writer of ``checkpoint/taken`` and
``checkpoint/restored``, writer ``checkpoints``).

The files live in the workspace's shadow repository (``dshd.checkpoints.ShadowRepo``,
``.dsh/checkpoints.git``), shared by every session of the workspace; which snapshot is
which checkpoint is only in each session's log. A fork copies its parent's events with
their seqs, so it has its parent's checkpoints and restores them from the same repository.

A file "changed by the person" since a checkpoint is one that changed outside the agent's
steps after that checkpoint's step: between a step's "after" snapshot and the next step's
"before" (or now), a file a restore put back counted from the version it put back. What
changed between a step's "before" and "after" is the agent's. A step the daemon did not
finish (no "after") counts as the person's: what happened then is not known, so it is
protected. A restore that would overwrite such a file is refused (``person-changed``)
unless forced.

The repository's methods are synchronous and run in a thread, under one lock per
workspace root for the whole process (its index is shared by every session).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from dshd.checkpoints import ShadowRepo
from dshd.checkpoints.shadow import JOURNAL_NAME
from dshd.errors import DshError
from dshd.folds.events import CheckpointRestored, CheckpointTaken, RequestHeader, decode_line
from dshd.formats import shown
from dshd.log import SessionReader, iter_records
from dshd.services.followed_fold import FollowedFold
from dshd.services.store import SessionStore
from dshd_protocol.ids import is_session_id

log = logging.getLogger(__name__)

WRITER = "checkpoints"
# The most paths CheckpointInfo.files names (a step that rewrote a whole tree).
FILES_CAP = 200
# The most characters of one file's diff handed out by diff().
DIFF_MAX_BYTES = 256 * 1024

T = TypeVar("T")


# ---- values ---------------------------------------------------------------------------


class CheckpointInfo(msgspec.Struct, frozen=True, gc=False):
    """A "before" checkpoint: its seq (the checkpoint's name), turn, step, time, and the
    paths that step changed (before -> after; at most FILES_CAP)."""

    seq: int
    turn: int
    step: int
    at: str
    files: tuple[str, ...]


class FileRestore(msgspec.Struct, frozen=True, gc=False):
    """One file a restore would change (now -> the checkpoint): ``status`` as the restore
    would do it ("added": it comes back, "deleted": it goes), its unified diff (None when
    binary), and whether the person changed it since the agent's last step."""

    path: str
    status: str
    diff: str | None
    binary: bool
    changed_by_person: bool


class RestoreOutcome(msgspec.Struct, frozen=True, gc=False):
    restored: tuple[str, ...]
    forced: tuple[str, ...]
    fork_at: int | None  # the seq to fork the conversation at (conversation=True)


# ---- the log's checkpoints --------------------------------------------------------------


class _Before:
    __slots__ = ("seq", "turn", "step", "at", "tree", "fork_at", "after_tree")

    def __init__(self, seq: int, turn: int, step: int, at: str, tree: str, fork_at: int) -> None:
        self.seq, self.turn, self.step, self.at, self.tree, self.fork_at = seq, turn, step, at, tree, fork_at
        self.after_tree: str | None = None


class _Outside:
    """A stretch of the log outside the agent's steps: from a snapshot (``start_tree``, at
    ``start_seq``) to the next "before" snapshot (``end_tree``; None: still open, it ends
    now). ``restored``: paths a restore put back meanwhile, and the tree each came from."""

    __slots__ = ("start_seq", "start_tree", "restored", "end_tree")

    def __init__(self, start_seq: int, start_tree: str) -> None:
        self.start_seq, self.start_tree = start_seq, start_tree
        self.restored: dict[str, str] = {}
        self.end_tree: str | None = None


class CheckpointFold:
    """The "before" checkpoints of a log, each with its step's "after" tree and the seq of
    its step's request (where a conversation rewind forks), and the stretches outside the
    agent's steps (where what changed is the person's)."""

    def __init__(self) -> None:
        self.befores: list[_Before] = []
        self.by_seq: dict[int, _Before] = {}
        self._header: tuple[int | None, int, int] = (None, 0, 0)  # (turn, step, seq) of the last request
        self.outside: list[_Outside] = []  # oldest first; the last may be open

    def feed_line(self, raw: bytes) -> None:
        # Only three types matter; the rest of a long log is skipped undecoded.
        if b'"checkpoint/' in raw or b'"request/header"' in raw:
            self.feed(decode_line(raw))

    def feed(self, event: Any) -> None:
        cls = event.__class__
        if cls is RequestHeader:
            self._header = (event.turn, event.data.step, event.seq)
        elif cls is CheckpointTaken:
            data = event.data
            last = self.outside[-1] if self.outside and self.outside[-1].end_tree is None else None
            if data.phase == "before":
                if last is not None:
                    last.end_tree = data.tree
                turn, step, header_seq = self._header
                fork_at = header_seq if (turn, step) == (event.turn, data.step) else event.seq - 1
                before = _Before(event.seq, event.turn or 0, data.step, event.at, data.tree, fork_at)
                self.befores.append(before)
                self.by_seq[event.seq] = before
            else:
                before = next(
                    (b for b in reversed(self.befores) if b.turn == event.turn and b.step == data.step), None
                )
                if before is not None:
                    before.after_tree = data.tree
                if before is not None and last is not None and last.start_seq == before.seq:
                    self.outside.pop()  # from its "before" to here was the agent's step
                elif last is not None:
                    last.end_tree = data.tree  # an "after" without its "before": ends the stretch
            self.outside.append(_Outside(event.seq, data.tree))
        elif cls is CheckpointRestored:
            source = self.by_seq.get(event.data.checkpoint)
            if source is not None and self.outside and self.outside[-1].end_tree is None:
                for path in event.data.files:
                    self.outside[-1].restored[path] = source.tree


# ---- one repository and one lock per workspace root, for the process ---------------------

_shared_lock = threading.Lock()
_shared: dict[tuple[Path, int], tuple[ShadowRepo, threading.RLock]] = {}
# The live services by (root, session id): a restore recovered on one session's attach is
# recorded in the log of the session that started it.
_live: dict[tuple[Path, str], "CheckpointService"] = {}
# Things moved aside already reported in this process (a second session of the workspace
# does not say it again).
_reported: set[Path] = set()


def shared_repo(root: Path, max_file_bytes: int) -> tuple[ShadowRepo, threading.RLock]:
    """The workspace's shadow repository and its lock, one of each per root in the process."""
    key = (Path(root).resolve(), max_file_bytes)
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            lock = next((lk for (r, _), (_, lk) in _shared.items() if r == key[0]), None) or threading.RLock()
            found = _shared[key] = (ShadowRepo(key[0], max_file_bytes=max_file_bytes), lock)
        return found


# ---- the service ----------------------------------------------------------------------------


class CheckpointService:
    """``turn_running``: whether a turn is running now; ``hold_turns(reason)``: refuse new
    turns until the returned release is called (both from the agent that owns the store)."""

    def __init__(
        self,
        store: SessionStore,
        root: Path,
        *,
        max_file_bytes: int,
        turn_running: Callable[[], bool],
        hold_turns: Callable[[str], Callable[[], None]],
    ) -> None:
        self.store = store
        self.root = Path(root).resolve()
        self.repo, self._lock = shared_repo(self.root, max_file_bytes)
        self._turn_running = turn_running
        self._hold_turns = hold_turns
        self._fold = FollowedFold(store, CheckpointFold, CheckpointFold.feed_line, CheckpointFold.feed)
        self._changed: dict[tuple[str, ...], tuple[str, ...]] = {}  # trees -> paths (trees never change)
        self._restoring = False
        # What was moved aside when this session opened, in words for the person (read and
        # cleared by the door that follows the session).
        self.warnings: list[str] = []
        with _shared_lock:
            _live[(self.root, store.session_id)] = self

    def close(self) -> None:
        with _shared_lock:
            if _live.get((self.root, self.store.session_id)) is self:
                del _live[(self.root, self.store.session_id)]

    # ---- taking ------------------------------------------------------------------------

    async def take(self, turn: int, step: int, phase: str) -> None:
        """Snapshot the workspace and record it as a ``phase`` checkpoint of ``step``."""
        snapshot = await self._in_thread(self.repo.snapshot)
        if self.store.closed:
            return
        self.store.commit(
            "checkpoint/taken",
            {"step": step, "tree": snapshot.tree, "files": snapshot.files, "phase": phase},
            turn=turn,
            writer=WRITER,
        )
        if phase == "after":
            before = self._fold.folded().befores[-1]
            if before.after_tree is not None and (before.tree, before.after_tree) not in self._changed:
                # Worked out now, off the event loop, so list() rarely has to.
                await self._in_thread(lambda: self._step_files(before.tree, before.after_tree))

    # ---- reading -----------------------------------------------------------------------

    async def list(self) -> list[CheckpointInfo]:
        """The session's "before" checkpoints, oldest first. The steps' files come from the
        cache when every one is there (no thread hop); else git works them out in the
        service's thread, under its lock, never on the event loop."""
        befores = self._fold.folded().befores
        # Read on the loop, where the fold changes: the thread gets a copy.
        steps: list[tuple[_Before, str | None]] = []
        for index, before in enumerate(befores):
            # A step the daemon did not finish has no "after": what it changed shows in the
            # next snapshot, if there is one.
            after = before.after_tree
            if after is None and index + 1 < len(befores):
                after = befores[index + 1].tree
            steps.append((before, after))
        cached = self._infos(steps, cache_only=True)
        if cached is not None:
            return cached
        infos = await self._in_thread(lambda: self._infos(steps))
        assert infos is not None
        return infos

    def _infos(self, steps: list[tuple[_Before, str | None]], *, cache_only: bool = False) -> list[CheckpointInfo] | None:
        """The list's entries; with ``cache_only``, None as soon as one step's files are not
        cached (nothing runs git)."""
        out = []
        for before, after in steps:
            files: tuple[str, ...] = ()
            if after is not None and cache_only:
                found = self._changed.get((before.tree, after))
                if found is None:
                    return None
                files = found
            elif after is not None:
                try:
                    files = self._step_files(before.tree, after)
                except DshError as exc:
                    # The repository lost the trees (deleted, or replaced by one dshd did not
                    # make): the checkpoint is still listed, its files unknown.
                    log.warning("checkpoint %d: its step's files cannot be read: %s", before.seq, exc.message)
            out.append(CheckpointInfo(before.seq, before.turn, before.step, before.at, files))
        return out

    async def diff(self, seq: Any) -> list[FileRestore]:
        """What restoring checkpoint ``seq`` would change, file by file (now -> then)."""
        before = self._checkpoint(seq)
        return await self._in_thread(lambda: self._diff(before))

    # ---- restoring ---------------------------------------------------------------------

    async def restore(
        self, seq: Any, *, files: bool = True, conversation: bool = False, force: bool = False
    ) -> RestoreOutcome:
        """Put the files back as they were before checkpoint ``seq``'s step (``files``) and
        say where to fork the conversation (``conversation``: ``fork_at``; the caller forks).
        ``person-changed`` (nothing restored) when a file to restore was changed by the
        person and not ``force``; ``turn-open`` while a turn runs."""
        before = self._checkpoint(seq)
        if self._turn_running() or self.store.state.turn.open:
            raise DshError("turn-open", "a turn is running: cancel it or wait for it to end, then restore")
        if self._restoring:
            raise DshError("turn-open", "another checkpoint restore of this session is running")
        restored: tuple[str, ...] = ()
        forced: tuple[str, ...] = ()
        if files:
            self._restoring = True
            release = self._hold_turns("a checkpoint restore is running")
            try:
                restored, forced = await self._in_thread(lambda: self._restore_files(before, force))
                try:
                    self.store.commit(
                        "checkpoint/restored",
                        _restored_data(before.seq, restored, forced),
                        writer=WRITER,
                    )
                finally:
                    # The journal goes only now: a kill before the record leaves it, so the
                    # next attach records the restore. Gone even when the record failed here:
                    # a journal left in a live process would be applied again later, over
                    # whatever changed meanwhile.
                    await self._in_thread(self.repo.finish_restore)
            finally:
                release()
                self._restoring = False
        return RestoreOutcome(restored, forced, before.fork_at if conversation else None)

    def recover(self) -> dict[str, Any] | None:
        """Finish a restore a killed process left in this workspace (synchronous: before any
        snapshot) and record it in the log of the session that started it. Returns the
        recovered restore's record, or None.

        Nothing the repository brought is acted on: a ``checkpoints.git`` this user's dshd
        did not make on this machine is moved aside first (its journal with it), and a
        journal is applied only when its mark is ours and the session it names has, in its
        local log, the checkpoint it restores (same seq, same tree); else it is moved aside.
        What was moved aside is in :attr:`warnings` for the person."""
        git_dir = self.repo.git_dir
        if not os.path.lexists(git_dir):
            return None  # nothing was left (nor is a repository made when there is none)
        with self._lock:
            self.repo.check()
            self._report_moved_aside()
        if not os.path.lexists(git_dir / JOURNAL_NAME):
            return None
        with self._lock:
            try:
                note = self.repo.recover(keep_journal=True, check=self._journal_reason)
            finally:
                self._report_moved_aside()
        try:
            if not isinstance(note, dict):
                return None
            try:
                data = _restored_data(int(note["checkpoint"]), note["files"], note.get("forced", []))
                session_id = note["sessionId"]
                after_seq = int(note.get("afterSeq", 0))
            except (KeyError, TypeError, ValueError):
                log.error("a recovered checkpoint restore left an unreadable note: %r", note)
                return None
            _record_recovered(self.root, session_id, data, after_seq)
            return data
        finally:
            with self._lock:
                self.repo.finish_restore()

    def _report_moved_aside(self) -> None:
        """Once per thing moved aside in this process: words for the person, one escaped line
        (the reasons can name entries a clone made); callers hold the lock."""
        repo = self.repo
        if repo.moved_aside is not None and repo.moved_aside not in _reported:
            _reported.add(repo.moved_aside)
            self.warnings.append(shown(
                f"{self.root / '.dsh' / 'checkpoints.git'} was not made by dshd for you on this machine "
                f"({repo.moved_aside_reason}): it was moved aside to {repo.moved_aside.name}, never used, "
                "and a new one is made"
            ))
        if repo.journal_refused is not None and repo.journal_refused[0] not in _reported:
            target, reason = repo.journal_refused
            _reported.add(target)
            self.warnings.append(shown(
                f"a checkpoint restore journal in {self.root / '.dsh'} was not applied ({reason}): "
                f"no file was changed; it was moved aside to {target.name}"
            ))

    def _journal_reason(self, tree: str, paths: list[str], note: dict[str, Any]) -> str | None:
        """Why a restore journal is not this workspace's own (None: it is): the session it
        names must have a local log whose event at the journal's checkpoint seq is that
        checkpoint, with the journal's tree."""
        session_id, checkpoint = note.get("sessionId"), note.get("checkpoint")
        if not is_session_id(session_id):
            return "it names no session"
        if isinstance(checkpoint, bool) or not isinstance(checkpoint, int) or checkpoint < 1:
            return "it names no checkpoint"
        with _shared_lock:
            live = _live.get((self.root, session_id))
        try:
            if live is not None:
                found = live.store.events(after_seq=checkpoint - 1, limit=1)
                event = found[0] if found else None
            else:
                event = _event_at(self.root, session_id, checkpoint)
        except FileNotFoundError:
            return f"session {session_id} has no local log"
        except Exception as exc:  # a link, unreadable: not bound to a local log
            return f"the log of session {session_id} cannot be read ({exc})"
        if event is None:
            return f"session {session_id} has no local log with checkpoint {checkpoint}"
        if not (isinstance(event, CheckpointTaken) and event.seq == checkpoint and event.data.phase == "before"
                and event.data.tree == tree):
            return f"checkpoint {checkpoint} of session {session_id} is not the one it restores"
        return None

    # ---- internals ----------------------------------------------------------------------

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn()

        return await asyncio.to_thread(locked)

    def _checkpoint(self, seq: Any) -> _Before:
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise DshError("invalid-params", "seq must be the seq of a checkpoint", field="seq")
        before = self._fold.folded().by_seq.get(seq)
        if before is None:
            raise DshError("invalid-params", f"no checkpoint at seq {seq} in this session", field="seq")
        return before

    def _step_files(self, before: str, after: str) -> tuple[str, ...]:
        key = (before, after)
        found = self._changed.get(key)
        if found is None:
            with self._lock:
                changes = self.repo.changes(before, after)
            found = self._changed[key] = tuple(change.path for change in changes[:FILES_CAP])
        return found

    def _person_changed(self, since: _Before, now: str, paths: set[str]) -> set[str]:
        """Which of ``paths`` changed outside the agent's steps after checkpoint ``since``
        (callers hold the lock)."""
        person: set[str] = set()
        if not paths:
            return person
        for stretch in self._fold.folded().outside:
            if stretch.start_seq < since.seq:
                continue
            end = stretch.end_tree or now
            restored = stretch.restored
            person |= {p for p in self._changes(stretch.start_tree, end) if p not in restored} & paths
            by_tree: dict[str, set[str]] = {}
            for path in paths & restored.keys():
                by_tree.setdefault(restored[path], set()).add(path)
            for tree, group in by_tree.items():
                person |= self._changes(tree, end) & group
        return person

    def _changes(self, from_tree: str, to_tree: str) -> set[str]:
        """The paths that differ between two trees (cached: trees never change)."""
        if from_tree == to_tree:
            return set()
        key = ("all", from_tree, to_tree)
        found = self._changed.get(key)
        if found is None:
            if len(self._changed) > 4096:  # "now" trees come and go: keep the cache bounded
                self._changed.clear()
            found = self._changed[key] = tuple(c.path for c in self.repo.changes(from_tree, to_tree))
        return set(found)

    def _diff(self, before: _Before) -> list[FileRestore]:
        now = self.repo.snapshot().tree
        diffs = self.repo.diff(now, before.tree, max_bytes=DIFF_MAX_BYTES)
        person = self._person_changed(before, now, {d.path for d in diffs})
        return [FileRestore(d.path, d.status, d.diff, d.binary, d.path in person) for d in diffs]

    def _restore_files(self, before: _Before, force: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        now = self.repo.snapshot().tree
        paths = sorted(change.path for change in self.repo.changes(now, before.tree))
        person = sorted(self._person_changed(before, now, set(paths)))
        if person and not force:
            named = ", ".join(shown(p) for p in person[:5]) + (f" and {len(person) - 5} more" if len(person) > 5 else "")
            raise DshError(
                "person-changed",
                f"{len(person)} file{'s' if len(person) != 1 else ''} to restore changed since the agent's "
                f"last step: {named}; restore with force to overwrite them",
                paths=[_as_text(p) for p in person],
            )
        # afterSeq: a recovery finds this restore's record, if it was made, after that seq.
        note = {"sessionId": self.store.session_id, "afterSeq": self.store.state.seq, **_restored_data(before.seq, paths, person)}
        self.repo.restore(before.tree, paths, note, keep_journal=True)
        return tuple(paths), tuple(person)


def _restored_data(checkpoint: int, files: Any, forced: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"checkpoint": checkpoint, "files": [_as_text(p) for p in files]}
    if forced:
        data["forced"] = [_as_text(p) for p in forced]
    return data


def _as_text(path: str) -> str:
    """A path as JSON can carry it: a name that is not UTF-8 (git hands it over with its
    bytes kept as surrogates) with those bytes written as ``\\xNN``."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _event_at(root: Path, session_id: str, seq: int) -> Any:
    """The event at ``seq`` of a session's log on disk (None when the log is shorter), read
    without taking its lock, the folder walked without following links."""
    with SessionReader.open(root / ".dsh" / "sessions" / session_id, base=root) as reader:
        for number, _, line in iter_records(reader.fd):
            if number == seq:
                return decode_line(line)
    return None


def _record_recovered(root: Path, session_id: Any, data: dict[str, Any], after_seq: int = 0) -> None:
    """``checkpoint/restored`` in the log of the session whose restore was finished: through
    its live service when one is open in this process, else by opening its log; not again
    when the killed process had recorded it (after ``after_seq``) before it died."""
    with _shared_lock:
        live = _live.get((root, session_id)) if isinstance(session_id, str) else None

    def record(store: SessionStore) -> None:
        for event in store.events(after_seq=after_seq):
            if isinstance(event, CheckpointRestored) and event.data.checkpoint == data["checkpoint"]:
                return  # recorded before the kill: only the journal was left
        store.commit("checkpoint/restored", data, writer=WRITER)

    try:
        if live is not None:
            record(live.store)
            return
        store = SessionStore.open(root / ".dsh" / "sessions", session_id, base=root)
        try:
            record(store)
        finally:
            store.close()
    except Exception as exc:  # locked by another process, gone, a turn left open: the files are back
        log.error("a checkpoint restore of session %r was finished but could not be recorded: %s", session_id, exc)
