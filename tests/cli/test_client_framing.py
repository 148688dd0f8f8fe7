"""The LSP framing dshd goal and dshd run share (dshd/client_framing.py): whole
messages off any split of the bytes, lengths in bytes, bad frames named."""

from __future__ import annotations

import pytest

from dshd.client_framing import FramingError, Frames, frame


def test_a_frame_counts_bytes_and_reads_back_over_any_split():
    first, second = {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo ✓"}}, {"jsonrpc": "2.0", "method": "x"}
    data = frame(first) + frame(second)
    head, _, body = frame(first).partition(b"\r\n\r\n")
    assert head == b"Content-Length: %d" % len(body) and len(body) > len(body.decode())  # bytes, not characters
    for cut in range(len(data) + 1):  # every split point, as reads may deliver them
        frames = Frames(data[:cut])
        got = []
        while (message := frames.next()) is not None:
            got.append(message)
        frames.feed(data[cut:])
        while (message := frames.next()) is not None:
            got.append(message)
        assert got == [first, second], cut


def test_bad_frames_are_named_not_tracebacks():
    with pytest.raises(FramingError, match="without Content-Length"):
        Frames(b"Content-Type: x\r\n\r\n{}").next()
    for body in (b"[1]", b"not json"):
        with pytest.raises(FramingError, match="not a JSON-RPC message"):
            Frames(b"Content-Length: %d\r\n\r\n%s" % (len(body), body)).next()
    # Control: the same header block with a Content-Length reads.
    assert Frames(b"Content-Type: x\r\nContent-Length: 2\r\n\r\n{}").next() == {}
