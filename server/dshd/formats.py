"""Text formats every layer writes or checks, each defined once (this module imports
nothing of dshd):

- RFC 3339 UTC timestamps with milliseconds and ``Z`` (``2026-11-29T18:40:18.123Z``): the
  log envelope's ``at``, goal ``createdAt``/``updatedAt``/``clearedAt``, session times.
- lowercase-kebab-case codes (``round-budget-exhausted``): blocked reasons, error kinds.
  The rule is the protocol's (``dshd_protocol.ids``, standard library only), imported
  here for every layer, not restated.
- text a person reads (:func:`shown`, :func:`shown_lines`): control, bidirectional and
  line-break characters escaped, so what a person approves is what runs. Here (layer 0)
  so that the tools' listings use it as well as both doors; ``dshd.api.escape`` says more.
"""

from __future__ import annotations

import re
import time

from dshd_protocol.ids import is_kebab_case


def rfc3339_utc(ns: int) -> str:
    """``ns`` nanoseconds since the epoch as RFC 3339 UTC with milliseconds and ``Z``."""
    secs, rem = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem // 1_000_000:03d}Z"


def utc_now() -> str:
    """The current time as RFC 3339 UTC with milliseconds and ``Z``."""
    return rfc3339_utc(time.time_ns())


# ---- text people read (api/escape.py has the why) ---------------------------------------

_BIDI_AND_BREAKS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
# Invisible format characters that can hide text in what a person reads (soft hyphen, zero
# width space, word joiner and invisible operators, the deprecated shaping controls, BOM,
# interlinear annotations, tag characters) and lone surrogates (bytes a decoder could not
# read: written out with surrogateescape they would be raw bytes again, C1 among them).
_INVISIBLE = "\u00ad\u180e\u200b\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f"
_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_BREAKS}{_INVISIBLE}]")
_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_BREAKS}{_INVISIBLE}]")  # \t and \n kept
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


def shown(text: str) -> str:
    """``text`` as one line a person can trust: control, bidi and line-break characters escaped."""
    if _ONE_LINE.search(text) is None:
        return text
    return _ONE_LINE.sub(_escape, text)


def clip(text: str, width: int = 80) -> str:
    """One line, at most ``width`` characters."""
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 1] + "…"


def shown_lines(text: str) -> str:
    """``text`` with its lines and tabs kept, every other such character escaped."""
    if _LINES.search(text) is None:
        return text
    return _LINES.sub(_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON escapes a character past U+FFFF as its UTF-16 pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def shown_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) safe on a terminal and the same
    JSON value: every character :func:`shown_lines` escapes is written as a JSON escape.
    (Such a character can only be inside a string there: JSON's own syntax is ASCII, and
    ``json.dumps`` escapes C0 itself; a line break or tab outside strings is kept.)"""
    if _LINES.search(text) is None:
        return text
    return _LINES.sub(_json_escape, text)
