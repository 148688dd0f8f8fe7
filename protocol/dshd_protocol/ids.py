"""The tokens of the protocol, defined once for the wire and the core: session ids and
lowercase-kebab-case codes. Standard library only: dshd's core (which imports no wire
type) checks and issues these from here.

Session ids: the only strings `sessionId` may hold on the wire.

A session id names a directory (`.dsh/sessions/<sessionId>/`), so the wire accepts only
tokens the daemon could have issued: ``s-`` followed by 26 characters of lowercase
Crockford base32 (``0-9`` and ``a-z`` without ``i l o u``). The 26 characters are a
ULID: 48 bits of milliseconds since the epoch, then 80 random bits, so ids sort by
creation time. Anything else (``../x``, ``/etc``, ``""``, upper case) is refused
before it comes near a path.
"""

from __future__ import annotations

import re
import secrets
import time

CROCKFORD_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
SESSION_ID_PREFIX = "s-"
SESSION_ID_PATTERN = r"^s-[0-9a-hjkmnp-tv-z]{26}$"

_session_id_re = re.compile(SESSION_ID_PATTERN)

# Codes (error kinds, a blocked goal's reason code, `round-budget-exhausted`). Anchored, as
# the schema writes it; checked with fullmatch (a trailing newline is not a code).
KEBAB_CASE = r"^[a-z0-9]+(-[a-z0-9]+)*$"
_kebab_re = re.compile(KEBAB_CASE)


def is_kebab_case(value: object) -> bool:
    """True for a lowercase-kebab-case string: ``ci-down``, ``round-budget-exhausted``."""
    return isinstance(value, str) and _kebab_re.fullmatch(value) is not None


def is_session_id(value: object) -> bool:
    """True when ``value`` is a string the daemon could have issued as a session id."""
    # fullmatch, not match: "$" would also accept a trailing newline.
    return isinstance(value, str) and _session_id_re.fullmatch(value) is not None


def new_session_id(*, now_ms: int | None = None) -> str:
    """A fresh session id (time-ordered, 80 random bits)."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    if not 0 <= ms < 1 << 48:
        raise ValueError(f"timestamp out of range: {ms}")
    value = (ms << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):  # 26 * 5 = 130 bits >= 128
        chars.append(CROCKFORD_ALPHABET[value & 31])
        value >>= 5
    return SESSION_ID_PREFIX + "".join(reversed(chars))
