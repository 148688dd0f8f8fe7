"""Text formats every layer writes or checks, each defined once (this module imports
nothing of dshd):

- RFC 3339 UTC timestamps with milliseconds and ``Z`` (``2026-11-29T18:40:18.123Z``): the
  log envelope's ``at``, goal ``createdAt``/``updatedAt``/``clearedAt``, session times.
- lowercase-kebab-case codes (``round-budget-exhausted``): blocked reasons, error kinds.
  The wire package states the same rule as a JSON Schema pattern
  (``dshd_protocol.types.KEBAB_CASE``); a test checks the two agree.
"""

from __future__ import annotations

import re
import time

KEBAB_CASE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def is_kebab_case(code: object) -> bool:
    """True for a lowercase-kebab-case string: ``ci-down``, ``round-budget-exhausted``."""
    return isinstance(code, str) and KEBAB_CASE.fullmatch(code) is not None


def rfc3339_utc(ns: int) -> str:
    """``ns`` nanoseconds since the epoch as RFC 3339 UTC with milliseconds and ``Z``."""
    secs, rem = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem // 1_000_000:03d}Z"


def utc_now() -> str:
    """The current time as RFC 3339 UTC with milliseconds and ``Z``."""
    return rfc3339_utc(time.time_ns())
