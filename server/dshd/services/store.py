"""SessionStore: the single commit path of one session (log + folds).

Every event of a session goes through :meth:`SessionStore.commit`: build the envelope,
check it against the folded state (a FoldError writes nothing), append it durably, set
the state, then tell listeners. The store never decides *what* to write; the services
above it (PlanModeController, GoalService, the agent loop) do.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

import msgspec

from dshd.errors import DshError
from dshd.folds import SessionState, apply, encode_checkpoint, replay
from dshd.folds.events import DATA_CLASSES, EVENT_CLASSES, Event, SessionStart, decode_line, encode_event
from dshd.folds.replay import ReplayError, _reject
from dshd.folds.state import TITLE_MAX, cap_title  # noqa: F401  (TITLE_MAX: for callers)
from dshd.formats import utc_now
from dshd.log import SessionLog, TornTail, find_line_start, io_error

log = logging.getLogger("dshd")

# A checkpoint every this many appended events bounds a cold open after a crash to a tail
# of at most this many events (about 1 ms of replay) for ~1 us amortized per event
# (an atomic checkpoint write costs ~1 ms). Clean close always writes one.
CHECKPOINT_EVERY = 1000

# Events only one service may write (SPEC PM-4/PM-6, G-1/G-2: the only writers of their events).
_OWNERS = {
    "plan/mode": "plan",
    "plan/forget": "plan",
    "goal/change": "goals",
    "permission/decision": "approvals",
    "mcp/server": "mcp",
    "checkpoint/taken": "checkpoints",
    "checkpoint/restored": "checkpoints",
}

# sessionId is an opaque token the daemon issues; this also keeps it a single path segment.
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

# events(after_seq) starts reading at the nearest known line start: one every this many
# seqs committed by this process, plus where the replayed prefix ended.
_INDEX_EVERY = 1024

Listener = Callable[[Event], None]


class _CallIdOnly(msgspec.Struct):
    callId: str = ""


class _CallLine(msgspec.Struct):
    """Just what tool_call_ids reads of a line (the rest was checked by replay)."""

    type: str
    data: _CallIdOnly


_decode_call_line = msgspec.json.Decoder(_CallLine).decode


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or _SESSION_ID.fullmatch(session_id) is None:
        raise DshError("invalid-params", f"not a session id: {session_id!r}", field="sessionId")
    return session_id


class SessionStore:
    """One open session: holds its log's write lock until :meth:`close`."""

    def __init__(self, session_log: SessionLog, state: SessionState | None, last_line: bytes) -> None:
        self._log = session_log
        self.dir = session_log.dir
        self.state: SessionState = state  # type: ignore[assignment]  # None only inside create()
        self._last_line = last_line
        self._since_checkpoint = 0
        self._listeners: list[Listener] = []
        # Benchmarks only (bench/rpc.py): called first, as soon as an event is durable.
        self.on_durable: Listener | None = None
        self._lock = threading.RLock()
        self.torn_tail: TornTail | None = session_log.torn_tail
        self.checkpoint_status = "absent"
        # Sparse (seq, byte offset of that seq's line) index for events(); seq 1 is at 0.
        self._index_seqs = [1]
        self._index_offsets = [0]
        if state is not None and session_log.size:
            self._index_seqs.append(state.seq + 1)
            self._index_offsets.append(session_log.size)

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def path(self) -> Path:
        return self._log.path

    @property
    def log_fd(self) -> int:
        """The open log's handle, for readers of its lines (``dshd.log.iter_records``):
        reading by it never follows a link that replaced the folder since it was opened."""
        return self._log.fd

    # ---- opening -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        sessions_dir: Path,
        session_id: str,
        *,
        title: str | None = None,
        forked_from: dict | None = None,
        base: Path | None = None,
    ) -> "SessionStore":
        """A new session directory with its log and session/start (FileExistsError if it exists).

        ``base`` (default: ``sessions_dir``) is where the walk without links starts: the
        workspace, so ``.dsh`` and ``.dsh/sessions`` are checked too (UnsafePath).
        A title longer than TITLE_MAX (200) characters is cut (with an ellipsis). A bad title or
        forked_from raises ValueError before anything is created; if the first append
        fails, the empty log is removed again so the id stays usable.
        """
        check_session_id(session_id)
        data: dict[str, Any] = {"sessionId": session_id, "formatVersion": 1}
        if forked_from is not None:
            data["forkedFrom"] = forked_from
        if title is not None:
            data["title"] = cap_title(title) if isinstance(title, str) else title
        try:
            start = msgspec.convert(data, DATA_CLASSES["session/start"])
        except msgspec.MsgspecError as exc:
            raise ValueError(f"invalid session/start: {exc}") from None
        sessions_dir = Path(sessions_dir)
        session_log = SessionLog.create(sessions_dir / session_id, base=sessions_dir if base is None else base)
        store = cls(session_log, None, b"")
        try:
            store.commit("session/start", start)
        except BaseException:
            if session_log.size == 0:
                session_log.remove_empty_log()
            session_log.close()
            raise
        return store

    @classmethod
    def open(cls, sessions_dir: Path, session_id: str, *, base: Path | None = None) -> "SessionStore":
        """Lock the session, cut a torn tail, strictly replay (checkpoint + tail).

        ``base`` (default: ``sessions_dir``) is where the walk without links starts.
        Raises SessionLocked, ReplayError, UnsafePath, FileNotFoundError (no such session).
        """
        check_session_id(session_id)
        sessions_dir = Path(sessions_dir)
        session_log = SessionLog.open(sessions_dir / session_id, base=sessions_dir if base is None else base)
        try:
            result = replay(session_log)
            if result.state.session_id != session_id:
                raise ReplayError(1, 1, f"session/start names session {result.state.session_id}, not {session_id}")
            store = cls(session_log, result.state, result.last_line)
            store.checkpoint_status = result.checkpoint
            store._since_checkpoint = result.tail_events
            # A missing or mismatched checkpoint is rebuilt now; so is one left far behind.
            if result.checkpoint != "used" or result.tail_events >= CHECKPOINT_EVERY:
                store._checkpoint_quietly()
        except BaseException:
            session_log.close()
            raise
        return store

    # ---- the commit path ---------------------------------------------------------------

    def commit(self, type: str, data: Any, *, turn: int | None = None, writer: str | None = None) -> Event:
        """Append one event durably and return it (as it will replay).

        ``data`` is the payload as a dict or its msgspec Struct. Raises ValueError for an
        unknown type, a payload of the wrong shape or the wrong writer, FoldError when the
        event may not follow the log; in both cases nothing is written.
        """
        owner = _OWNERS.get(type)
        if owner is not None and writer != owner:
            raise ValueError(f"{type} is written only by writer={owner!r}, not {writer!r}")
        event_cls = EVENT_CLASSES.get(type)
        if event_cls is None:
            raise ValueError(f"unknown event type {type!r}")
        with self._lock:
            if self._log.closed:
                raise ValueError(f"session {self.dir.name} is closed")
            seq = 1 if self.state is None else self.state.seq + 1
            try:
                if not isinstance(data, DATA_CLASSES[type]):
                    data = msgspec.convert(data, DATA_CLASSES[type])
                line = encode_event(event_cls(seq=seq, at=utc_now(), turn=turn, data=data))
                # Decode what we are about to write: the event is then exactly what replay
                # will see (a Struct built with wrong field types is caught here, not at replay).
                event = decode_line(line)
            except (msgspec.MsgspecError, TypeError) as exc:
                raise ValueError(f"invalid {type} event: {exc}") from None
            new_state = apply(self.state, event)  # FoldError: nothing written
            offset = self._log.size
            try:
                self._log.append(line)
            except OSError as exc:  # disk full, read-only: nothing of it stays (append cuts back)
                raise io_error(exc, self._log.path, "write") from None
            self._after_append([(event, line, offset)], new_state)
            return event

    def copy_events(self, events: Iterable[Event], *, batch: int = 4096) -> int:
        """Append events copied from another log (a fork's prefix), keeping their ``at``,
        ``turn`` and data and renumbering ``seq`` to follow this log. Each is checked by
        the fold like any commit; one fsync per batch instead of one per event. A bad
        event raises FoldError/ValueError and nothing of its batch is written.
        Returns how many events were appended."""
        copied = 0
        pending: list[Event] = []
        for source in events:
            pending.append(source)
            if len(pending) >= batch:
                copied += self._copy_batch(pending)
                pending = []
        if pending:
            copied += self._copy_batch(pending)
        return copied

    def _copy_batch(self, sources: list[Event]) -> int:
        with self._lock:
            if self._log.closed:
                raise ValueError(f"session {self.dir.name} is closed")
            state = self.state
            prepared: list[tuple[Event, bytes, int]] = []
            offset = self._log.size
            for source in sources:
                if isinstance(source, SessionStart):
                    raise ValueError("a session/start cannot be copied into another session")
                line = encode_event(msgspec.structs.replace(source, seq=state.seq + 1))
                event = decode_line(line)
                state = apply(state, event)  # FoldError: nothing of this batch written
                prepared.append((event, line, offset))
                offset += len(line)
            try:
                self._log.append_many([line for _event, line, _offset in prepared])
            except OSError as exc:
                raise io_error(exc, self._log.path, "write") from None
            self._after_append(prepared, state)
            return len(prepared)

    def _after_append(self, appended: list[tuple[Event, bytes, int]], new_state: SessionState) -> None:
        """Bookkeeping once lines are durable: index, state, checkpoint, listeners."""
        if self.on_durable is not None:
            for event, _line, _offset in appended:
                self.on_durable(event)
        for event, _line, offset in appended:
            if event.seq % _INDEX_EVERY == 0:
                self._index_seqs.append(event.seq)
                self._index_offsets.append(offset)
        self.state = new_state
        self._last_line = appended[-1][1]
        self._since_checkpoint += len(appended)
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._checkpoint_quietly()
        for event, _line, _offset in appended:
            for fn in list(self._listeners):
                try:
                    fn(event)
                except Exception:
                    log.exception("session %s: listener %r failed on seq %d (ignored)", self.session_id, fn, event.seq)

    def add_listener(self, fn: Listener) -> Callable[[], None]:
        """Call ``fn(event)`` after each committed event; returns a function that removes it."""
        with self._lock:
            self._listeners.append(fn)

        def remove() -> None:
            with self._lock:
                try:
                    self._listeners.remove(fn)
                except ValueError:
                    pass

        return remove

    # ---- reading -------------------------------------------------------------------

    def events(self, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """Committed events with seq > after_seq, oldest first, at most ``limit``."""
        out: list[Event] = []
        self.each_event(out.append, after_seq, limit)
        return out

    def each_event(self, fn: Callable[[Event], None], after_seq: int = 0, limit: int | None = None) -> int:
        """Call ``fn(event)`` for each committed event with seq > after_seq, oldest first, at
        most ``limit``, as each is read (streaming: nothing is held, which matters for a
        long log). Returns how many events were read."""
        if limit is not None and limit <= 0:
            return 0
        count = 0
        after_seq = max(0, after_seq)
        with self._lock:
            start_seq, start_offset = self._line_start(after_seq + 1)
            for line_no, _offset, line in self._log.records(start_offset, start_seq):
                # In a replayed log, line number == seq.
                if line_no <= after_seq:
                    continue
                # A line under the checkpoint was not replayed at open: if it changed on
                # disk since, report it as replay would (never an internal error).
                try:
                    event = decode_line(line)
                except msgspec.MsgspecError as exc:
                    raise _reject(line_no, line, exc) from None
                if event.seq != line_no:
                    kind = "gap" if event.seq > line_no else "repeat"
                    raise ReplayError(event.seq, line_no, f"seq {kind}: expected {line_no}, got {event.seq}")
                fn(event)
                count += 1
                if limit is not None and count >= limit:
                    break
        return count

    def tool_call_ids(self) -> set[str]:
        """The ``callId`` of every ``tool/call`` in the log (the agent keeps call ids
        unique in a session). One pass over the bytes; only lines naming a tool call are
        decoded, so a long log costs about what reading it costs."""
        ids: set[str] = set()
        with self._lock:
            for line_no, _offset, line in self._log.records(0, 1):
                if b"tool/call" not in line:
                    continue
                try:
                    call = _decode_call_line(line)
                except msgspec.MsgspecError as exc:
                    raise _reject(line_no, line, exc) from None
                if call.type == "tool/call":
                    ids.add(call.data.callId)
        return ids

    def each_line(self, fn: Callable[[bytes], None]) -> None:
        """Call ``fn(line)`` for every committed line, oldest first, for a fold that decodes
        only the lines it needs (folds/plans.py). A line ``fn`` cannot decode (changed on
        disk under the checkpoint) is reported as replay would."""
        with self._lock:
            for line_no, _offset, line in self._log.records(0, 1):
                try:
                    fn(line)
                except msgspec.MsgspecError as exc:
                    raise _reject(line_no, line, exc) from None

    def _line_start(self, target: int) -> tuple[int, int]:
        """A (seq, offset) at or before line ``target`` to read forward from: the nearest
        indexed line below it, or, when the end of the log is nearer (a transcript that
        starts at the last compaction of a long session), ``target`` itself, found by
        reading backwards from the end. Found lines join the index."""
        i = bisect.bisect_right(self._index_seqs, target) - 1
        below_seq, below_offset = self._index_seqs[i], self._index_offsets[i]
        end_seq = self.state.seq + 1 if self.state is not None else 1
        if target <= below_seq or target > end_seq or end_seq - target >= target - below_seq:
            return below_seq, below_offset
        offset = find_line_start(self._log.fd, self._log.size, end_seq, target)
        self._index_seqs.insert(i + 1, target)
        self._index_offsets.insert(i + 1, offset)
        return target, offset

    @property
    def log_size(self) -> int:
        """Bytes of the log durable so far (the end of line ``state.seq``)."""
        return self._log.size

    # ---- caches beside the log (the chat's marks) ---------------------------------------

    def read_cache(self, name: str) -> bytes | None:
        with self._lock:
            return self._log.read_cache(name)

    def write_cache(self, name: str, data: bytes) -> None:
        """Replace a cache file of this session atomically (``dshd.log.CACHE_NAMES``)."""
        with self._lock:
            if not self._log.closed:
                self._log.write_cache(name, data)

    # ---- checkpoints and closing -----------------------------------------------------

    def checkpoint(self) -> None:
        """Write projection.json for the current state (atomic)."""
        with self._lock:
            if self.state is None:
                return
            self._log.write_checkpoint(encode_checkpoint(self.state, self._log.size, self._last_line))
            self._since_checkpoint = 0

    def _checkpoint_quietly(self) -> None:
        # The checkpoint is a cache: failing to write one never fails a committed event.
        try:
            self.checkpoint()
        except (OSError, DshError) as exc:  # disk full, read-only; unsafe-path: a link appeared
            log.error("session %s: checkpoint write failed (ignored; next open replays more): %s", self.session_id, exc)

    def close(self) -> None:
        """Write a checkpoint and release the lock. Idempotent."""
        with self._lock:
            if self._log.closed:
                return
            try:
                if self._since_checkpoint:
                    self._checkpoint_quietly()
            finally:
                self._log.close()

    @property
    def closed(self) -> bool:
        return self._log.closed

    def __enter__(self) -> "SessionStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
