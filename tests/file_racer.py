"""A racer, run as its own process: swaps a workspace folder for a symbolic link to an
outside folder and back, as fast as it can, until it is sent SIGTERM; then writes how many
swaps it made to ``count_file``.

    python tests/file_racer.py <folder> <outside> <count_file>

With renameat2(RENAME_EXCHANGE) the folder and a prepared link trade places atomically, so
the name is always there (a folder or a link). Where the exchange is not available it falls
back to rename-away / rename-link-in, which leaves short gaps with no folder at all.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def main() -> None:
    folder, outside, count_file = sys.argv[1:4]
    link = folder + ".racer-link"
    away = folder + ".racer-away"
    os.symlink(outside, link)
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    a, b = os.fsencode(folder), os.fsencode(link)
    exchange = renameat2 is not None and renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0
    swaps = 1 if exchange else 0
    if exchange:
        renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)  # back: the folder is in place
        swaps += 1
    print("exchange" if exchange else "rename", flush=True)  # the parent waits for this line
    while not stop:
        if exchange:
            renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)  # folder -> link
            renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)  # link -> folder
        else:
            os.rename(folder, away)
            os.rename(link, folder)
            os.rename(folder, link)
            os.rename(away, folder)
        swaps += 2
    # Leave the folder in place, whatever the moment of the signal.
    if os.path.islink(folder):
        if exchange:
            renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
        else:
            os.rename(folder, link)
    if os.path.isdir(away) and not os.path.exists(folder):
        os.rename(away, folder)
    if os.path.islink(link):
        os.unlink(link)
    with open(count_file, "w") as f:
        f.write(str(swaps))


if __name__ == "__main__":
    main()
