"""`dshd acp`: serve the Agent Client Protocol on stdio for the workspace in the
current folder, until the client closes stdin.

Logs go to stderr (level ``DSHD_LOG_LEVEL``, default WARNING); stdout carries protocol
messages only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from dshd.acp.door import AcpDoor
from dshd.acp.transport import LineTransport
from dshd.agent.questions import ANSWER_TIMEOUT_S
from dshd.transport.stdio import open_stdin_reader, stdio_streams
from dshd.models.errors import RedactingFormatter


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dshd acp",
        description="Serve the Agent Client Protocol (ACP v1) on stdio for the workspace in the current folder.",
    )
    parser.add_argument(
        "--question-timeout",
        type=float,
        default=ANSWER_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long a plan review or an approval waits for the person before it fails closed (default {ANSWER_TIMEOUT_S:g})",
    )
    return parser


async def serve(stdin, stdout, root: Path, *, question_timeout_s: float) -> None:
    transport = LineTransport(await open_stdin_reader(stdin), stdout)
    door = AcpDoor(root, question_timeout_s=question_timeout_s)
    connection = door.connect(transport)
    try:
        await connection.main_loop()
    finally:
        await door.shutdown()
        await connection.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.question_timeout <= 0:
        _parser().error("--question-timeout must be positive")
    level = logging.getLevelName(os.environ.get("DSHD_LOG_LEVEL", "WARNING").upper())
    stream = logging.StreamHandler()
    # Scrubs every key the door has read out of stderr (and any piece of one).
    stream.setFormatter(RedactingFormatter("dshd %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[stream])
    stdin, stdout = stdio_streams()
    try:
        asyncio.run(serve(stdin, stdout, Path.cwd(), question_timeout_s=args.question_timeout))
    except KeyboardInterrupt:
        pass
    return 0
