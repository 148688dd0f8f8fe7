"""The escaping of text people read (dshd.formats.shown / shown_lines) and the redaction of
key pieces (dshd.models.errors.redact): every character of the list, and the controls
that must pass unchanged."""

from __future__ import annotations

from dshd.api.escape import shown, shown_lines
from dshd.models.errors import redact

ESCAPED = (
    [chr(c) for c in range(0x00, 0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
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
    for plain in ["plain.txt", "ünïcödé 漢字 🙂", "👨\u200d👩\u200d👧", "a\\u202eb", "tab\\t", ""]:
        assert shown(plain) == plain and shown_lines(plain) == plain


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
