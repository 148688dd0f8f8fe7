"""Strict streaming replay of a session log, in full or from a projection checkpoint.

The checkpoint (``projection.json``) is a cache: the folded state plus the byte offset,
seq and line it covers, a fingerprint (length, sha256) of the last covered line, and a
sha256 of the checkpoint's own body. Anything that does not check out makes replay
ignore it and read the whole log, so deleting or damaging it changes no result.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import msgspec
from msgspec import Struct

from dshd.errors import DshError
from dshd.folds.events import (
    FORMAT_VERSION,
    AssistantMessage,
    CheckpointTaken,
    ContextCompact,
    Event,
    PermissionDecision,
    PlanMode,
    RequestHeader,
    SessionStart,
    ToolCall,
    ToolResult,
    TurnClose,
    TurnOpen,
    UserMessage,
)
from dshd.folds.plans import PLAN_TOOL
from dshd.folds.rules import (
    FoldError,
    _check_envelope_turn,
    apply,
    check_checkpoint,
    fold_context,
    fold_goal,
    fold_open_turn,
    fold_permission,
    fold_plan_mode,
)
from dshd.folds.state import ContextState, GoalState, PlanState, SessionState, TurnState
from dshd.folds.titles import title_from_prompt
from dshd.log import SessionLog, SessionReader, TornTail, find_complete_end, read_line_before, statekey
from dshd.log.sessionlog import open_log_file

_NO_DECISIONS: frozenset[str] = frozenset()
_NO_TURN = object()  # equal to no turn number

# Replay reads this much at a time and splits it into lines (bounded memory, few syscalls).
_BLOCK = 256 * 1024

# Bump when a fold's meaning changes (a checkpoint folded by older rules must not be trusted).
# A change in the *shape* of SessionState needs no bump: STATE_SCHEMA catches it.
# 2: titles are capped (TITLE_MAX) by the fold.
# 3: a session created without a title takes its first prompt's words (folds/titles.py).
CHECKPOINT_VERSION = 3
# The header carries an HMAC of the body made with this user's state key (dshd.log.statekey):
# a projection.json a clone brought (or another user's dshd wrote) is never taken as ours.
_CHECKPOINT_MAGIC = b"dshd-projection v2 hmac-sha256="
_CHECKPOINT_PURPOSE = "session projection v2"
STATE_SCHEMA = hashlib.sha256(msgspec.json.encode(msgspec.json.schema(SessionState))).hexdigest()[:16]


class ReplayError(DshError):
    """The first line a strict replay rejects: kind "replay-failed", data {seq, line, reason}."""

    def __init__(self, seq: int | None, line: int, reason: str) -> None:
        super().__init__("replay-failed", f"line {line} (seq {seq}): {reason}", seq=seq, line=line, reason=reason)
        self.seq = seq
        self.line = line
        self.reason = reason


class LineFingerprint(Struct, frozen=True, forbid_unknown_fields=True):
    length: int
    sha256: str


class Checkpoint(Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    formatVersion: int
    stateSchema: str  # STATE_SCHEMA of the writer
    offset: int  # byte offset just after the last covered line
    seq: int
    line: int
    last: LineFingerprint
    state: SessionState


@dataclass(frozen=True)
class ReplayResult:
    state: SessionState
    events: int  # events in the log (= state.seq)
    torn_tail: TornTail | None  # cut on open (SessionLog) or just found (read-only path)
    end: int  # byte offset after the last complete line
    last_line: bytes  # the last complete line, for the next checkpoint's fingerprint
    checkpoint: str  # "used" | "absent" | "disabled" | "ignored: <why>"
    tail_events: int  # events actually decoded and folded


class _SeqOnly(Struct):
    seq: int


_decode_event = msgspec.json.Decoder(Event).decode
_decode_seq = msgspec.json.Decoder(_SeqOnly).decode
_encode = msgspec.json.Encoder().encode
_decode_checkpoint = msgspec.json.Decoder(Checkpoint).decode


def fingerprint(line: bytes) -> LineFingerprint:
    return LineFingerprint(len(line), hashlib.sha256(line).hexdigest())


def encode_checkpoint(state: SessionState, offset: int, last_line: bytes) -> bytes:
    body = _encode(
        Checkpoint(
            CHECKPOINT_VERSION, FORMAT_VERSION, STATE_SCHEMA, offset, state.seq, state.seq, fingerprint(last_line), state
        )
    )
    return sign_checkpoint_body(body)


def sign_checkpoint_body(body: bytes) -> bytes:
    """A checkpoint file of ``body``: the header with its mark, then the body."""
    return _CHECKPOINT_MAGIC + statekey.mac(_CHECKPOINT_PURPOSE, body).encode() + b"\n" + body


def _load_checkpoint(raw: bytes | None, log_path: "int | Path", end: int) -> tuple[Checkpoint | None, str]:
    """The checkpoint if it matches the log up to ``end``; else None and why not."""
    if raw is None:
        return None, "absent"
    head, nl, body = raw.partition(b"\n")
    if not nl or not head.startswith(_CHECKPOINT_MAGIC):
        return None, "ignored: unknown header"
    try:
        ours = statekey.mac_ok(_CHECKPOINT_PURPOSE, body, head[len(_CHECKPOINT_MAGIC) :].decode("ascii", "replace"))
    except DshError as exc:  # no usable state key: nothing here can be told ours
        return None, f"ignored: no state key ({exc.message})"
    if not ours:  # damaged, or not written by this user's dshd on this machine
        return None, "ignored: checksum mismatch"
    try:
        cp = _decode_checkpoint(body)
    except msgspec.MsgspecError as exc:
        return None, f"ignored: undecodable ({exc})"
    if cp.version != CHECKPOINT_VERSION or cp.formatVersion != FORMAT_VERSION or cp.stateSchema != STATE_SCHEMA:
        return None, "ignored: version changed"
    if not (cp.seq == cp.line == cp.state.seq) or cp.seq < 1:
        return None, "ignored: inconsistent seq/line"
    if cp.offset > end or cp.offset < cp.last.length:
        return None, "ignored: offset outside the log"
    covered = read_line_before(log_path, cp.offset, cp.last.length)
    if covered is None or not covered.endswith(b"\n") or fingerprint(covered) != cp.last:
        return None, "ignored: last covered line differs"
    return cp, "used"


def _reject(line_no: int, line: bytes, exc: Exception | None = None) -> ReplayError:
    """The report for a line that does not decode. ``line`` is as on disk (with its newline);
    without ``exc`` the message comes from decoding it again (msgspec's wording can depend
    on the newline, and every reader must report the same text)."""
    if exc is None:
        try:
            _decode_event(line)
        except msgspec.MsgspecError as again:
            exc = again
    try:
        seq = _decode_seq(line).seq
    except msgspec.MsgspecError:
        seq = None
    return ReplayError(seq, line_no, str(exc))


def fold_lines(
    state: SessionState | None, records: Iterable[tuple[int, int, bytes]]
) -> tuple[SessionState | None, int, bytes | None, int]:
    """Decode and fold ``(line_no, offset, line)`` records strictly with :func:`apply`.

    Returns (state, lines folded, last line, end offset of it). Raises ReplayError at the
    first line that does not decode or may not follow. The reference for :func:`fold_file`.
    """
    count = 0
    line = None
    line_no = 0
    pos = 0
    decode = _decode_event
    try:
        for line_no, pos, line in records:
            event = decode(line)
            state = apply(state, event)
            count += 1
    except FoldError as exc:
        raise ReplayError(event.seq, line_no, exc.reason) from None
    except msgspec.MsgspecError as exc:
        raise _reject(line_no, line, exc) from None
    end = pos + len(line) if line is not None else 0
    return state, count, line, end


def _blocks(source: "int | Path", offset: int, end: int) -> Iterator[io.BytesIO]:
    """The lines in [offset, end) of the log (an fd, read with pread, or a path), one
    in-memory file of whole lines (each with its newline) per block read.

    Iterating a ``BytesIO`` cuts lines in C as a file does, and each line is dropped as
    the next is made, so the memory stays warm: about twice as fast as ``bytes.split``,
    which makes every line of the block first.
    """
    if not isinstance(source, int):
        fd = open_log_file(source)
        try:
            yield from _blocks(fd, offset, end)
        finally:
            os.close(fd)
        return
    pos = offset
    carry: list[bytes] = []  # pieces of a line longer than a block (joined once: no quadratic copy)
    while pos < end:
        chunk = os.pread(source, min(_BLOCK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            carry.append(chunk)
            continue
        if carry:
            carry.append(chunk[:cut])
            whole = b"".join(carry)
            carry = []
        else:
            whole = chunk if cut == len(chunk) else chunk[:cut]
        if cut < len(chunk):
            carry.append(chunk[cut:])
        yield io.BytesIO(whole)


def fold_file(
    state: SessionState | None, path: "int | Path", offset: int, line_no: int, end: int
) -> tuple[SessionState | None, int, bytes | None]:
    """Strictly fold the complete lines of ``path`` in [offset, end) after ``state``.

    ``offset`` is the start of line ``line_no``. The hot loop of replay: the same result
    and the same rejections as :func:`fold_lines` over :func:`apply` (a property test
    checks it), but it reads in blocks and keeps the whole state in plain locals, so the
    common events (headers, tool calls and results, messages, turns opening and closing
    in order) cost a few comparisons and build nothing. Anything else (line 1, a seq or
    turn mismatch, a step out of order, plan mode, goal changes, compactions, decisions,
    a SessionStart) goes through :func:`apply` on a state built from the locals, which
    holds the reference checks and reason texts; its result is unpacked again. Returns
    (state, lines folded, last line with its newline).

    A new event type needs nothing here: the fast paths name the classes they take, and
    every other class goes to :func:`apply` (so to ``rules._CONCERNS``). Give one a fast
    path only if it is frequent, and then keep the reference fold's checks exactly.
    """
    decode = _decode_event
    blocks = _blocks(path, offset, end)
    first_line_no = line_no
    last = None
    if state is None:
        # Line 1 goes through apply; afterwards the state lives in locals.
        first = next(blocks, None)
        if first is None:
            return None, 0, None
        line = first.readline()
        try:
            state = apply(None, decode(line))
        except FoldError as exc:
            raise ReplayError(_seq_of(line), line_no, exc.reason) from None
        except msgspec.MsgspecError:
            raise _reject(line_no, line) from None
        last = line
        blocks = itertools.chain([first], blocks)  # the rest of the first block
    folded_first = last is not None
    start_seq = state.seq
    # Line numbers are not counted per line: in a sound prefix, line = first line + events folded.
    line_base = first_line_no - (state.seq + 1) + (1 if folded_first else 0)
    session_id, forked_from, last_at = state.session_id, state.forked_from, state.last_at
    seq = state.seq
    title = state.title
    plan = state.plan
    plan_active, header_active = plan.active, plan.header_active
    # P-22: the plan of record and the plan calls waiting for a result (any of these
    # events goes through the reference fold: plan calls are rare).
    approved_call, approved_seq, reviewing = plan.approved_call, plan.approved_seq, plan.reviewing
    plan_tool = PLAN_TOOL
    turn = state.turn
    last_turn, turn_open, cause, decided = turn.last_turn, turn.open, turn.cause, turn.decided
    next_step = turn.step + 1  # the step the next request/header must have
    # The goal: its snapshot as folded, with the counters rounds, tokens and the round's
    # turn in locals (GoalState is rebuilt from them only when needed).
    goal = state.goal
    current, rounds, tokens, round_turn = goal.goal, goal.rounds_started, goal.tokens_used, goal.round_turn
    usage_turn = round_turn if current is not None else None  # the turn whose usage counts
    # The context fold: a mutable set of calls without a result (a frozenset at the end).
    context = state.context
    compact_seq, through_seq = context.compact_seq, context.through_seq
    calls = set(context.pending_calls)
    batch_from, quiet_from = context.batch_from, context.quiet_from
    # The turn an event's envelope must name to take a fast path: the open one, or none
    # (an object no turn number equals) while no turn is open.
    in_turn = last_turn if turn_open else _NO_TURN
    # Locals, not globals, in the loop. While a plan call waits for its result (rare),
    # results, turn ends and openings take the reference fold: no class is their fast one.
    header_cls, call_cls, assistant_cls, user_cls = RequestHeader, ToolCall, AssistantMessage, UserMessage
    checkpoint_cls = CheckpointTaken
    result_fast, close_fast, open_fast = (None, None, None) if reviewing else (ToolResult, TurnClose, TurnOpen)
    event = None
    line = last  # stays the last line folded when no line follows
    # The loop is shaped for CPython's specializing interpreter: every integer comparison
    # is followed by a short jump (a `break` to the reference fold or a `continue`), never
    # by a jump over the whole loop body, which would need EXTENDED_ARG and leave the
    # comparison unspecialized (a generic rich compare per event).
    try:
        for block in blocks:
            lines = enumerate(block, seq + 1)  # resumed where it stopped after each reference fold
            while True:
                for seq, line in lines:
                    event = decode(line)
                    if event.seq != seq:
                        break
                    cls = event.__class__
                    t = event.turn
                    if t != in_turn:
                        # Outside the open turn only a turn opening in order takes a fast path.
                        if cls is open_fast and not turn_open:
                            data = event.data
                            if t == data.turn == last_turn + 1:
                                # One name at a time: a tuple of five would be built and unpacked.
                                last_turn = in_turn = t
                                turn_open = True
                                next_step = 1
                                cause = data.cause
                                decided = _NO_DECISIONS
                                continue
                        break
                    # In the open turn, in order: the common events (most frequent first).
                    if cls is header_cls:
                        data = event.data
                        if data.step == next_step:
                            next_step += 1
                            header_active = data.planActive
                            continue
                        break
                    if cls is call_cls:
                        data = event.data
                        if data.name != plan_tool:
                            if not calls:
                                batch_from = seq
                            calls.add(data.callId)
                            continue
                        break
                    if cls is result_fast:
                        if calls:
                            try:
                                calls.remove(event.data.callId)
                            except KeyError:
                                continue  # not a call of the open batch: nothing to close
                            if not calls:
                                batch_from, quiet_from = 0, seq
                        continue
                    if cls is assistant_cls:
                        usage = event.data.usage
                        if usage is None or t != usage_turn:
                            continue
                        # The first estimated usage of a goal takes the reference fold (it
                        # marks the goal's tokens estimated); counting is all the rest need.
                        if not usage.estimated or goal.tokens_estimated:
                            tokens += usage.inputTokens + usage.outputTokens
                            continue
                        break
                    if cls is user_cls:
                        data = event.data
                        goal_round = data.goalRound
                        if goal_round is not None:
                            # The next round of the current active goal, within its caps;
                            # else the reference fold (which raises with the reason).
                            n = goal_round.round
                            if (
                                current is not None
                                and current.phase == "active"
                                and goal_round.goalId == current.id
                                and goal_round.revision == current.revision
                                and n == rounds + 1
                                and n <= current.maxRounds
                                and (current.maxTokens is None or tokens < current.maxTokens)
                            ):
                                rounds, round_turn = n, t
                            else:
                                goal = fold_goal(_goal_state(goal, rounds, tokens, round_turn), event)
                                current, rounds, tokens, round_turn = (
                                    goal.goal, goal.rounds_started, goal.tokens_used, goal.round_turn
                                )
                            usage_turn = round_turn if current is not None else None
                        if title is None and data.source == "user":
                            title = title_from_prompt(data.text)
                        continue
                    if cls is close_fast:
                        data = event.data
                        if data.turn == last_turn and (data.error is None or data.stopReason == "model-error"):
                            turn_open = False
                            next_step = 1
                            cause = None
                            decided = _NO_DECISIONS
                            in_turn = _NO_TURN
                            if calls:  # a batch ends with its turn
                                calls.clear()
                                batch_from, quiet_from = 0, seq
                            continue
                    if cls is checkpoint_cls:
                        # It changes nothing but seq, so only the reference's own check runs
                        # (on the open turn as it stands): one or two per tool step.
                        check_checkpoint(TurnState(last_turn, True, next_step - 1, cause, decided), event)
                        continue
                    break
                else:
                    break  # every line folded
                # Everything else: the reference fold, on the state as it stands.
                goal = _goal_state(goal, rounds, tokens, round_turn)
                state = apply(
                    SessionState(
                        session_id,
                        seq - 1,
                        PlanState(plan_active, header_active, approved_call, approved_seq, reviewing),
                        TurnState(last_turn, turn_open, next_step - 1, cause, decided),
                        goal,
                        title,
                        forked_from,
                        last_at,
                        ContextState(compact_seq, through_seq, frozenset(calls), batch_from, quiet_from),
                    ),
                    event,
                )
                title, forked_from = state.title, state.forked_from
                plan = state.plan
                plan_active, header_active = plan.active, plan.header_active
                approved_call, approved_seq, reviewing = plan.approved_call, plan.approved_seq, plan.reviewing
                turn = state.turn
                last_turn, turn_open, cause, decided = turn.last_turn, turn.open, turn.cause, turn.decided
                next_step = turn.step + 1
                result_fast, close_fast, open_fast = (None, None, None) if reviewing else (ToolResult, TurnClose, TurnOpen)
                in_turn = last_turn if turn_open else _NO_TURN
                goal = state.goal
                current, rounds, tokens, round_turn = goal.goal, goal.rounds_started, goal.tokens_used, goal.round_turn
                usage_turn = round_turn if current is not None else None
                context = state.context
                compact_seq, through_seq = context.compact_seq, context.through_seq
                calls = set(context.pending_calls)
                batch_from, quiet_from = context.batch_from, context.quiet_from
    except FoldError as exc:
        raise ReplayError(event.seq, line_base + seq, exc.reason) from None
    except msgspec.MsgspecError:
        raise _reject(line_base + seq, line) from None
    last = line
    if event is not None:
        goal = _goal_state(goal, rounds, tokens, round_turn)
        state = SessionState(
            session_id,
            seq,
            PlanState(plan_active, header_active, approved_call, approved_seq, reviewing),
            TurnState(last_turn, turn_open, next_step - 1, cause, decided),
            goal,
            title,
            forked_from,
            event.at,
            ContextState(compact_seq, through_seq, frozenset(calls), batch_from, quiet_from),
        )
    count = seq - start_seq + (1 if folded_first else 0)
    return state, count, last


def _goal_state(goal: GoalState, rounds: int, tokens: int, round_turn: int | None) -> GoalState:
    """``goal`` with the counters fold_file kept in locals."""
    if goal.rounds_started == rounds and goal.tokens_used == tokens and goal.round_turn == round_turn:
        return goal
    return msgspec.structs.replace(goal, rounds_started=rounds, tokens_used=tokens, round_turn=round_turn)


def _seq_of(line: bytes) -> int | None:
    try:
        return _decode_seq(line).seq
    except msgspec.MsgspecError:
        return None


def replay(
    source: SessionLog | SessionReader | str | os.PathLike, *, use_checkpoint: bool = True
) -> ReplayResult:
    """Strictly replay a session log.

    ``source`` is an open :class:`SessionLog` (its torn tail is already cut), a
    :class:`SessionReader` or a path to a ``log.jsonl``; the last two are read without
    locking or modifying anything (a torn tail is reported, not cut). With
    ``use_checkpoint`` the sibling ``projection.json`` is verified and, if it matches,
    only the tail after it is replayed. Raises :class:`ReplayError`; a log or checkpoint
    that is a link is :class:`~dshd.log.UnsafePath`.
    """
    if isinstance(source, (SessionLog, SessionReader)):
        return _replay(source, use_checkpoint)
    with SessionReader.open_path(source) as reader:
        return _replay(reader, use_checkpoint)


def _replay(source: SessionLog | SessionReader, use_checkpoint: bool) -> ReplayResult:
    if isinstance(source, SessionLog):
        fd = source.fd
        end = source.size
        torn = source.torn_tail
    else:
        fd = source.fd
        end, size = find_complete_end(fd)
        torn = TornTail(end, size - end, None) if size > end else None
    raw = source.read_checkpoint() if use_checkpoint else None
    status = "disabled"
    start_state = None
    offset, line_no = 0, 1
    last_line = b""
    if use_checkpoint:
        cp, status = _load_checkpoint(raw, fd, end)
        if cp is not None:
            start_state, offset, line_no = cp.state, cp.offset, cp.line + 1
            last_line = read_line_before(fd, cp.offset, cp.last.length) or b""
    state, count, tail_last = fold_file(start_state, fd, offset, line_no, end)
    if state is None:
        raise ReplayError(None, 1, "empty log: line 1 must be session/start")
    if tail_last is not None:
        last_line = tail_last
    return ReplayResult(state, state.seq, torn, end, last_line, status, count)
