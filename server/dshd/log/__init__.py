"""Layer 1: append-only session log, lock, torn tail, checkpoint file. Knows nothing of plans or goals."""

from dshd.log.sessionlog import (
    CACHE_NAMES,
    CHECKPOINT_NAME,
    LOCK_NAME,
    LOG_NAME,
    SESSION_FILES,
    SessionLocked,
    SessionLog,
    SessionReader,
    TornTail,
    find_complete_end,
    find_line_start,
    iter_records,
    read_line_before,
)
from dshd.log.safefs import UnsafePath, io_error

__all__ = [
    "CACHE_NAMES",
    "CHECKPOINT_NAME",
    "LOCK_NAME",
    "LOG_NAME",
    "SESSION_FILES",
    "SessionLocked",
    "SessionLog",
    "SessionReader",
    "UnsafePath",
    "io_error",
    "TornTail",
    "find_complete_end",
    "find_line_start",
    "iter_records",
    "read_line_before",
]
