"""Chat marks: where the chat of a long log can be projected from without reading what
comes before, so a page costs the page and not the log.

A mark is a turn boundary of the log (just before a ``turn/open``, no turn open, nothing
outside a turn waiting) with what the chat carries across it (``ChatCarry``): the byte
offset of the next line, and a fingerprint of the line before it. A projection resumed
there (``ChatProjection.resumed``) gives every later item exactly as a projection of the
whole log does, so the items between two marks can be projected on their own.

Marks are recorded by any projection that reads past the last one (every ``MARK_EVERY``
events at least, at the next boundary), the live chat included, and for a session a door
follows with no chat open (``ChatMarks.follow``); they are kept per session in
``chat-marks.json`` beside the log: a cache like ``projection.json``. A mark is trusted
only when its HMAC (this user's state key, the session id) is ours and only while the line
before it is still the line it was made after (length and sha256),
checked when a read starts or ends at it; the first one that is not ends the list (the
log changed under it) and the page is read again from the marks left. Mark 0 (the log's
start, nothing carried) is always there.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import logging
import weakref
from typing import Any

import msgspec

from dshd.api.chat import ChatCarry, ChatProjection
from dshd.errors import DshError
from dshd.folds import ReplayError
from dshd.folds.events import TurnOpen
from dshd.log import iter_records, read_line_before, statekey

MARK_EVERY = 500  # events at least between two marks: a page reads at most about this many more
MARKS_NAME = "chat-marks.json"
MARKS_VERSION = 1
SAVE_EVERY = 8  # live marks recorded between two writes of the file (and one at close)
# A session followed with no chat open catches its marks up only over at most this many
# events (a longer unmarked stretch, e.g. a log from before marks, waits for a first look).
FOLLOW_GAP = 4 * MARK_EVERY

log = logging.getLogger(__name__)


def read_log_lines(source, offset: int = 0, line_no: int = 1, end: int | None = None):
    """(line_no, offset, line, event as a plain dict) from ``offset`` (the start of line
    ``line_no``) to ``end``, streamed; a line that is not JSON, or out of place, is reported
    as a replay would."""
    decode = msgspec.json.Decoder().decode
    for number, start, line in iter_records(source, offset, line_no, end):
        try:
            event = decode(line)
        except msgspec.DecodeError as exc:
            raise ReplayError(None, number, f"malformed JSON: {exc}") from None
        if not isinstance(event, dict) or event.get("seq") != number:
            raise ReplayError(None, number, f"expected the event with seq {number}")
        yield number, start, line, event


class ChatMark(msgspec.Struct, frozen=True, gc=False):
    seq: int  # the last event before the boundary: a resumed projection reads from seq + 1
    offset: int  # where line seq + 1 starts
    line_length: int = 0  # the fingerprint of line seq (none for mark 0)
    line_sha256: str = ""
    carry: ChatCarry = ChatCarry()
    # An HMAC of the rest with this user's state key (dshd.log.statekey) and the session id:
    # a marks file a clone brought, or one copied from another session, is never taken as ours.
    mac: str = ""


class _MarksFile(msgspec.Struct):
    version: int
    marks: list[ChatMark]


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_MarksFile).decode

START = ChatMark(seq=0, offset=0)


_MARK_PURPOSE = "chat mark v1"


def _mark_mac(session_id: str, mark: ChatMark) -> str:
    unsigned = msgspec.structs.replace(mark, mac="")
    return statekey.mac(_MARK_PURPOSE, session_id.encode() + b"\0" + _encode(unsigned))


def _mark_is_ours(session_id: str, mark: ChatMark) -> bool:
    try:
        return mark.mac == _mark_mac(session_id, mark) and bool(mark.mac)
    except DshError:  # no usable state key: nothing read here can be told ours
        return False


def line_fingerprint(line: bytes) -> tuple[int, str]:
    return len(line), hashlib.sha256(line).hexdigest()


class ChatMarks:
    """The marks of one open session (shared by every connection following it)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.marks: list[ChatMark] = [START]
        self._seqs: list[int] = [0]
        self._unsaved = 0
        self._loaded = False
        self._checked: set[int] = set()  # marks found to match the log (mark 0 always does)
        self._in_flight: asyncio.Future | None = None  # the write off the loop, while it runs
        self._following = False
        self._tools: Any = None

    def load(self) -> None:
        """Read the marks file once (a missing, unreadable or foreign one: only mark 0)."""
        if self._loaded:
            return
        self._loaded = True
        try:
            raw = self.store.read_cache(MARKS_NAME)
        except (OSError, DshError) as exc:
            log.warning("chat marks of %s not read (%s): the chat is projected from the start", self.store.session_id, exc)
            return
        if not raw:
            return
        try:
            data = _decode(raw)
        except msgspec.MsgspecError:
            return
        if data.version != MARKS_VERSION:
            return
        last_seq = self.store.state.seq
        for mark in data.marks:
            if mark.seq <= self.marks[-1].seq or mark.seq >= last_seq:
                break
            self.marks.append(mark)
            self._seqs.append(mark.seq)
        # Checked as they are used (one read each): the last one now, the others when a
        # page reads from them; the first that fails ends the list.
        while len(self.marks) > 1 and not self.check(len(self.marks) - 1):
            pass

    def check(self, index: int) -> bool:
        """Whether mark ``index`` still matches the log; if not, it and every later one go."""
        if index == 0 or index in self._checked:
            return index < len(self.marks)
        if index < len(self.marks) and self._still_true(self.marks[index]):
            self._checked.add(index)
            return True
        del self.marks[index:], self._seqs[index:]
        self._checked = {i for i in self._checked if i < index}
        return False

    def _still_true(self, mark: ChatMark) -> bool:
        if not _mark_is_ours(self.store.session_id, mark):
            return False
        try:
            line = read_line_before(self.store.log_fd, mark.offset, mark.line_length)
        except OSError:
            return False
        return line is not None and line.endswith(b"\n") and line_fingerprint(line) == (mark.line_length, mark.line_sha256)

    @property
    def last(self) -> ChatMark:
        return self.marks[-1]

    def index_at_or_before(self, seq: int) -> int:
        """The last mark whose seq is at most ``seq``."""
        return bisect.bisect_right(self._seqs, seq) - 1

    def due(self, seq: int) -> bool:
        """Whether a boundary after event ``seq`` is far enough past the last mark to be one."""
        return seq - self.marks[-1].seq >= MARK_EVERY

    def add(self, seq: int, offset: int, line: bytes, carry: ChatCarry) -> bool:
        """Record a boundary after event ``seq`` (``line`` is that event's line, ``offset``
        where the next starts), if due; True when recorded."""
        if not self.due(seq):
            return False
        length, digest = line_fingerprint(line)
        mark = ChatMark(seq=seq, offset=offset, line_length=length, line_sha256=digest, carry=carry)
        try:
            mark = msgspec.structs.replace(mark, mac=_mark_mac(self.store.session_id, mark))
        except DshError as exc:  # kept for this process; unmarked, a later one reads past it
            log.warning("chat mark of %s not signed: %s", self.store.session_id, exc.message)
        self.marks.append(mark)
        self._seqs.append(seq)
        self._checked.add(len(self.marks) - 1)
        self._unsaved += 1
        return True

    def save(self, *, force: bool = False, wait: bool = False) -> None:
        """Write the file when marks were added (every SAVE_EVERY of them, or ``force``):
        off the event loop when one runs (the write ends with an fsync), unless ``wait``.
        A cache: a failed write is logged, never raised."""
        in_flight = self._in_flight is not None and not self._in_flight.done()
        if self.store.closed or not (self._unsaved or (wait and in_flight)):
            return
        if not force and self._unsaved < SAVE_EVERY:
            return
        data = _encode(_MarksFile(MARKS_VERSION, self.marks[1:]))
        self._unsaved = 0
        try:
            loop = None if wait else asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._write(data)  # (a write still in flight may land after it: an older list, still true)
        else:
            self._in_flight = loop.run_in_executor(None, self._write, data)

    def _write(self, data: bytes) -> None:
        try:
            self.store.write_cache(MARKS_NAME, data)  # under the store's lock: one write at a time
        except (OSError, DshError, ValueError) as exc:
            log.error("chat marks of %s not written (ignored; the next look reads more): %s", self.store.session_id, exc)


    # ---- following a session with no chat open ---------------------------------------------

    def follow(self, agent: Any) -> None:
        """Keep the marks current while ``agent`` runs, whether or not anyone reads its chat
        (a headless or ACP-only run): at each due turn/open, the few hundred events since the
        last mark are projected (soon after, on the loop) and the boundary is recorded; while
        the stretch since the last mark is longer than FOLLOW_GAP (a log from before marks,
        until a first look reads it) nothing is read."""
        if self._following:
            return
        self._following = True
        self._tools = agent.tools

        def on_event(event: Any) -> None:
            if isinstance(event, TurnOpen) and self.due(event.seq - 1):
                try:
                    asyncio.get_running_loop().call_soon(self.catch_up, event.seq - 1)
                except RuntimeError:
                    self.catch_up(event.seq - 1)

        agent.add_event_listener(on_event)
        agent.on_close(lambda: self.save(force=True, wait=True))

    def catch_up(self, seq: int) -> None:
        """Project from the last mark through event ``seq`` and record the due boundaries on
        the way (the one after ``seq`` included: the caller saw a turn/open follow it)."""
        if self.store.closed or not self.due(seq) or seq - self.last.seq > FOLLOW_GAP:
            return
        start = self.last
        projection = ChatProjection.resumed(start.carry, start.seq, self._tools) if start.seq else ChatProjection(self._tools)
        previous = None
        try:
            for line_no, offset, line, event in read_log_lines(self.store.log_fd, start.offset, start.seq + 1):
                if previous is not None and event.get("type") == "turn/open" and self.due(line_no - 1) and projection.resumable():
                    self.add(line_no - 1, offset, previous, projection.carry())
                if line_no > seq:
                    break
                projection.apply_event(event)
                previous = line
        except (OSError, ReplayError) as exc:
            log.warning("chat marks of %s not caught up: %s", self.store.session_id, exc)
            return
        self.save()


_of_store: "weakref.WeakKeyDictionary[Any, ChatMarks]" = weakref.WeakKeyDictionary()


def marks_of(store: Any) -> ChatMarks:
    """The one ChatMarks of this open session (loaded on first use)."""
    marks = _of_store.get(store)
    if marks is None:
        marks = _of_store[store] = ChatMarks(store)
    marks.load()
    return marks
