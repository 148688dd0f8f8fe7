"""The stdio plumbing both front doors share (their framings differ: LSP headers in
daemon/transport.py, one JSON object per line in acp/transport.py).

- :func:`stdio_streams`: the protocol's stdin and stdout, with file descriptor 1 then
  pointed at stderr, so a stray print() (or a child process) can never corrupt the
  protocol stream;
- :func:`open_stdin_reader`: a StreamReader over stdin (asyncio's pipe transport for
  pipes, sockets and terminals; a thread for a regular file, which epoll cannot poll);
- :func:`decode_json`: strict JSON (Python's json also takes NaN, Infinity and 1e999,
  which are not JSON and could not be echoed back as JSON).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import stat
import sys
from typing import Any, BinaryIO

MAX_MESSAGE = 64 * 1024 * 1024  # the most one message may take (bytes)


def _not_json_number(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999: would be echoed back as Infinity, which is not JSON
        raise ValueError(f"{text} is out of range")
    return value


def decode_json(body: bytes) -> Any:
    """Strict JSON; raises ValueError (or RecursionError for absurd nesting)."""
    return json.loads(body, parse_constant=_not_json_number, parse_float=_finite_float)


async def open_stdin_reader(stdin: BinaryIO, limit: int = MAX_MESSAGE) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    mode = os.fstat(stdin.fileno()).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        return reader

    def pump() -> None:
        while chunk := stdin.read1(65536):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    loop.run_in_executor(None, pump)
    return reader


def stdio_streams() -> tuple[BinaryIO, BinaryIO]:
    stdin = sys.stdin.buffer
    sys.stdout.flush()
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # fd 1 now means stderr, also for child processes and C code
    sys.stdout = sys.stderr
    return stdin, stdout
