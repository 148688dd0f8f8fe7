"""A long session's log for the editors' chat-page tests: a sound log of `turns` turns
(turn/open, user/message "question N", request/header, assistant/message "answer N",
turn/close: 5 events each), written line by line beside a workspace, opened through the
daemon like any session. Three chat items a turn (the question, the answer, the turn's end)."""

from __future__ import annotations

from pathlib import Path

from dshd.folds import events as ev

SESSION_ID = "s-01m8edpages000000000000000"
AT = "2026-12-01T10:00:00.000Z"


def write_long_session(workspace: Path, turns: int, session_id: str = SESSION_ID) -> int:
    """Writes the log; returns its last seq."""
    folder = workspace / ".dsh" / "sessions" / session_id
    folder.mkdir(parents=True)
    lines: list[bytes] = []
    seq = 0

    def emit(cls, data, turn=None) -> None:
        nonlocal seq
        seq += 1
        lines.append(ev.encode_event(cls(seq=seq, at=AT, turn=turn, data=data)))

    emit(ev.SessionStart, ev.SessionStartData(sessionId=session_id, formatVersion=1, title="long"))
    for turn in range(1, turns + 1):
        emit(ev.TurnOpen, ev.TurnOpenData(turn=turn, cause="prompt"), turn)
        emit(ev.UserMessage, ev.UserMessageData(text=f"question {turn}", source="user"), turn)
        emit(ev.RequestHeader, ev.RequestHeaderData(step=1, planActive=False, sections=["base:system"], tools=[]), turn)
        emit(ev.AssistantMessage, ev.AssistantMessageData(text=f"answer {turn}"), turn)
        emit(ev.TurnClose, ev.TurnCloseData(turn=turn, stopReason="end-turn"), turn)
    (folder / "log.jsonl").write_bytes(b"".join(lines))
    return seq
