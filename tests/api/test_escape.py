"""The escaping of text people read (dshd.formats.shown / shown_lines) and the redaction of
key pieces (dshd.models.errors.redact): every character of the list, and the controls
that must pass unchanged."""

from __future__ import annotations

import io
import json
import logging
import sys

from dshd.api.escape import ShownStream, shown, shown_json, shown_lines
from dshd.models.errors import RedactingFormatter, redact

ESCAPED = (
    [chr(c) for c in range(0x00, 0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
    # invisible format characters, tags, lone surrogates (undecodable bytes)
    + ["\u00ad", "\u180e", "\u200b", "\ufeff", "\ufff9", "\ufffb", "\U000e0001", "\U000e0041", "\U000e007f"]
    + [chr(c) for c in range(0x2060, 0x2065)] + [chr(c) for c in range(0x206A, 0x2070)]
    + ["\ud800", "\udc9b", "\udfff"]
)  # fmt: skip


def test_every_listed_character_is_escaped_and_ordinary_text_passes() -> None:
    for char in ESCAPED:
        one, lines = shown(f"a{char}b"), shown_lines(f"a{char}b")
        assert char not in one and one.startswith("a\\") and one.endswith("b"), repr(char)
        if char in "\n\t":
            assert lines == f"a{char}b"  # a text of lines keeps its lines and tabs
        else:
            assert char not in lines and lines == one, repr(char)
    assert shown("rtl\u202etxt.exe") == "rtl\\u202etxt.exe"
    assert shown("echo one\necho two\r") == "echo one\\necho two\\r"
    # Controls: text without such characters is returned as it is (emoji joiners included).
    for plain in ["plain.txt", "ünïcödé 漢字 🙂", "👨\u200d👩\u200d👧", "a\\u202eb", "tab\\t", "", "✌\ufe0f", "\u200c"]:
        assert shown(plain) == plain and shown_lines(plain) == plain and shown_json(plain) == plain
    assert shown("\U000e0041") == "\\U000e0041"  # past U+FFFF: eight digits


def test_json_text_keeps_its_value_and_loses_every_control() -> None:
    value = {"name": "x" + " ".join(ESCAPED) + "é漢🙂", "list": ["\x9b[2J", "\u202e"], "n": 1}
    for text in (json.dumps(value, ensure_ascii=False), json.dumps(value, ensure_ascii=False, indent=2)):
        safe = shown_json(text)
        assert json.loads(safe) == value  # the same value, surrogates and tags included
        assert not any(char in safe for char in ESCAPED if char not in "\n\t")
        assert "é漢🙂" in safe  # what needs no escape stays readable
    # Control: JSON alone leaves C1 and bidi controls raw.
    assert "\x9b" in json.dumps(value, ensure_ascii=False) and "\u202e" in json.dumps(value, ensure_ascii=False)


def test_a_shown_stream_escapes_every_write_and_keeps_lines() -> None:
    buffer = io.StringIO()
    stream = ShownStream(buffer)
    print("a\x1b]0;title\x07", "b\u202e", file=stream)
    stream.writelines(["c\x9b\n", "d\te\n"])
    stream.flush()
    assert buffer.getvalue() == "a\\u001b]0;title\\u0007 b\\u202e\nc\\u009b\nd\te\n"
    as_json = io.StringIO()
    print(json.dumps({"t": "\x9b"}, ensure_ascii=False), file=ShownStream(as_json, shown_json))
    assert as_json.getvalue() == '{"t": "\\u009b"}\n'


def test_a_log_record_is_one_escaped_line_and_its_traceback_keeps_its_lines() -> None:
    hostile = "x\x1b[2J\x9b\u202e\x07\nFORGED: approved"
    formatter = RedactingFormatter("%(levelname)s %(name)s: %(message)s")
    record = logging.LogRecord("dshd.mcp", logging.WARNING, __file__, 1, "tool %s left out", (hostile,), None)
    assert formatter.format(record) == "WARNING dshd.mcp: tool x\\u001b[2J\\u009b\\u202e\\u0007\\nFORGED: approved left out"
    try:
        raise ValueError(hostile)
    except ValueError:
        record = logging.LogRecord("dshd", logging.ERROR, __file__, 1, "failed: %s", (hostile,), sys.exc_info())
    text = formatter.format(record)
    assert text.splitlines()[0] == "ERROR dshd: failed: x\\u001b[2J\\u009b\\u202e\\u0007\\nFORGED: approved"
    assert "Traceback (most recent call last):" in text.splitlines()[1]  # its lines kept
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text  # the exception's text one line
    assert text.splitlines()[-1] == "ValueError: x\\u001b[2J\\u009b\\u202e\\u0007\\nFORGED: approved"
    assert not any(c in text for c in "\x1b\x9b\u202e\x07")
    try:  # a chain: the cause's text and the context's, one line each too
        try:
            raise OSError(hostile)
        except OSError as inner:
            raise RuntimeError(hostile) from inner
    except RuntimeError:
        record = logging.LogRecord("dshd", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    chained = formatter.format(record)
    assert "OSError: x" in chained and "RuntimeError: x" in chained
    assert not any(line.startswith("FORGED") for line in chained.splitlines()), chained
    # Control: logging's own formatter writes the record as it came.
    plain = logging.LogRecord("dshd", logging.ERROR, __file__, 1, "failed: %s", (hostile,), None)
    assert hostile in logging.Formatter("%(message)s").format(plain)


def test_any_twelve_characters_of_the_key_are_redacted_and_nothing_else() -> None:
    key = "sk-test-Qw7Rt9Yu1Io3Pa5Sd"
    for echoed in [key, key[:-2], key[2:], key[5:17], f"x{key}y"]:
        text = f"the server said: {echoed} (request 7f3a2b9c1d0e)"
        out = redact(text, key)
        assert "[redacted]" in out and "(request 7f3a2b9c1d0e)" in out, out
        assert not any(key[i : i + 12] in out for i in range(len(key) - 11)), out
    assert redact(f"{key[:11]} and {key[-11:]}", key) == f"{key[:11]} and {key[-11:]}"  # 11: not a piece
    assert redact("unrelated 0123456789ab", key) == "unrelated 0123456789ab"
    assert redact(f"a{key}b{key[3:15]}c", key) == "a[redacted]b[redacted]c"
    assert redact("short: abcd!", "abcd") == "short: [redacted]!"  # a short key: where it occurs whole
