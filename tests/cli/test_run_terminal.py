"""`dshd run` on a terminal reads right: the real command under a real pty (stdout and
stderr on one terminal, as in a shell), its raw bytes replayed through a terminal emulator
(pyte), and every line of the model's reply found whole on the emulated screen, while the
progress line (round, tokens, tool) is drawn during the reply. A reply streamed slowly,
in many small deltas, over real HTTP (the loopback OpenAI server): each delta is a chat
item upsert, each upsert a chance for the progress line to be drawn over an open line.

The control replays the bytes the run wrote before the fix (the progress line drawn with
``\\r ESC[K`` over the start of a partial line) and shows the emulated screen cut the
line as the issue reported (`ent.py`: ...`)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pyte
import pytest
from loopback_models import Call, LoopbackModelServer, Reply

from tests.e2e.test_headless import DSHD, Headless, loopback_workspace

pytestmark = pytest.mark.slow

COLUMNS, ROWS = 150, 60
REPLY = (
    "I read `http/client.py`: it opens one connection for each request and never retries.\n"
    "Retries belong in `send()`, around the request and its timeout, with a backoff.\n"
    "The tests in `tests/test_client.py` cover the happy path only; a flaky server is next."
)


@pytest.fixture
def headless(tmp_path: Path):
    h = Headless(tmp_path)
    yield h
    h.close()


@pytest.fixture
def loopback():
    with LoopbackModelServer("openai") as server:
        yield server


def on_terminal(headless: Headless, root: Path, *args: str, stdout_too: bool = True, timeout: float = 60) -> tuple[int, bytes, bytes]:
    """(exit status, what the terminal received, stdout when it was a pipe): the run's
    stderr (and stdout, when ``stdout_too``) on the slave of a pty sized COLUMNS x ROWS."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    child = subprocess.Popen(
        [str(DSHD), "run", *args], cwd=root, env={**headless.env, "TERM": "xterm"}, stdin=subprocess.DEVNULL,
        stdout=slave if stdout_too else subprocess.PIPE, stderr=slave, start_new_session=True,
    )
    os.close(slave)
    shown, piped = b"", b""
    deadline = time.monotonic() + timeout
    try:
        streams = [master] + ([] if stdout_too else [child.stdout.fileno()])
        while streams:
            if time.monotonic() > deadline:
                raise AssertionError(f"dshd run did not end in {timeout} s: {shown[-2000:]!r}")
            ready, _, _ = select.select(streams, [], [], 0.5)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    chunk = b""
                if not chunk:
                    streams.remove(fd)
                elif fd == master:
                    shown += chunk
                else:
                    piped += chunk
        code = child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        os.close(master)
    return code, shown, piped


def screen_of(raw: bytes) -> list[str]:
    """The terminal's lines after ``raw``, as a person reads them (trailing blanks dropped)."""
    screen = pyte.Screen(COLUMNS, ROWS)
    stream = pyte.ByteStream(screen)
    stream.feed(raw)
    return [row.rstrip() for row in screen.display]


def missing_lines(reply: str, rows: list[str]) -> list[str]:
    """The reply's lines that are not, whole, one line of the screen."""
    return [line for line in reply.splitlines() if line not in rows]


def test_a_slow_many_delta_reply_shows_every_line_whole_with_the_progress_line_drawn(tmp_path, headless, loopback):
    loopback.script(
        Reply(tool_calls=[Call("read_file", {"path": "src/app.py"})], usage=(40, 6), chunk_delay=0.02),
        Reply(text=REPLY, usage=(120, 60), piece=5, chunk_delay=0.03),
    )
    root = loopback_workspace(tmp_path, headless, loopback)
    code, raw, _ = on_terminal(headless, root, "Where do retries go?")
    assert code == 0, raw.decode(errors="replace")
    rows = screen_of(raw)
    assert missing_lines(REPLY, rows) == [], "\n".join(rows)
    assert b"Traceback" not in raw
    # The progress line was on: drawn (round/turn, tokens) while the reply streamed, not
    # only before or after it, so the check above saw it at work.
    text = raw.decode()
    first, last = text.index("I read"), text.index("The tests in")
    assert re.search(r"\r\x1b\[Kturn 1 · \d+ tokens", text[first:last]), repr(text)
    assert "running read_file" in text[:first]
    assert len(loopback.requests) == 2
    # Nothing of the progress line is left on the screen once the run ended.
    assert not any("tokens" in row for row in rows), "\n".join(rows)


def test_stdout_piped_is_unchanged_while_stderr_shows_the_progress_line(tmp_path, headless, loopback):
    loopback.script(
        Reply(tool_calls=[Call("read_file", {"path": "src/app.py"})], usage=(40, 6)),
        Reply(text=REPLY, usage=(120, 60), piece=5, chunk_delay=0.02),
    )
    root = loopback_workspace(tmp_path, headless, loopback)
    code, raw, piped = on_terminal(headless, root, "Where do retries go?", stdout_too=False)
    assert code == 0, raw.decode(errors="replace")
    assert piped.decode() == REPLY + "\n"  # the bytes a file or `| less` gets: the reply, nothing more
    # stderr's terminal shows the progress line, drawn in place, cleared at the end.
    assert re.search(r"turn 1 · \d+ tokens", raw.decode()) and raw.count(b"\r\x1b[K") >= 3
    assert screen_of(raw) == [""] * ROWS


def test_control_the_old_drawing_cuts_the_start_of_a_partial_line():
    """The bytes the run wrote before the fix, for one line streamed in two deltas with
    one progress update between them: the screen shows `ent.py`: ...`, the check fails."""
    line = "I read `http/client.py`: it opens one connection for each request and never retries."
    old = (
        b"\r\x1b[Kturn 1 \xc2\xb7 46 tokens"  # the progress line, before any text
        + b"\r\x1b[K" + line[:16].encode()  # cleared, then the first delta ("I read `http/cl", no newline yet)
        + b"\r\x1b[Kturn 1 \xc2\xb7 46 tokens"  # the progress redrawn over the open line
        + b"\r\x1b[K" + line[16:].encode() + b"\r\n"  # cleared, and the rest of the line
    )
    rows = screen_of(old)
    assert missing_lines(line, rows) == [line]
    assert rows[0] == line[16:] and rows[0].startswith("ent.py`:")
    # The same pieces drawn as the run draws them now (no progress over an open line) pass.
    now = b"\r\x1b[Kturn 1 \xc2\xb7 46 tokens" + b"\r\x1b[K" + line[:16].encode() + line[16:].encode() + b"\r\n"
    assert missing_lines(line, screen_of(now)) == []
