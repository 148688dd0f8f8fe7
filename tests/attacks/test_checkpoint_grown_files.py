"""Files grown past the size cap in the middle of a snapshot: a racing command grows files in
the one window the size check cannot see (after dshd's lstat, before git reads them), and
the real shadow repository leaves them out. Controls in the same tests: a file at the cap,
and the neighbours of the grown one, are kept; the grown file back under the cap is taken
by the next snapshot."""

from __future__ import annotations

import os
from pathlib import Path

from dshd.checkpoints import FileChange
from tests.checkpoints.test_shadow import _blob_size, _RacedShadow, tree_listing, workspace, write  # noqa: F401 - workspace: a fixture


def test_a_file_grown_past_the_cap_while_git_reads_it_is_left_out(workspace: Path):
    write(workspace, "tracked.txt", "small\n")
    write(workspace, "link", b"")
    os.unlink(workspace / "link")
    os.symlink("x" * 100, workspace / "link")  # a link's blob (its target) is over this cap: links are kept
    shadow = _RacedShadow(workspace, {}, max_file_bytes=64)
    first = shadow.snapshot()
    assert {"tracked.txt", "link", "README.md"} <= set(tree_listing(workspace, first.tree))

    write(workspace, "tracked.txt", "changed\n")
    write(workspace, "new.txt", "new\n")
    write(workspace, "stays.txt", "stays\n")
    # Each lstat saw a few bytes; git then reads them far over the cap (and one still under it).
    shadow.grow = {"tracked.txt": 4096, "new.txt": 1 << 20, "stays.txt": 64}
    second = shadow.snapshot()
    listed = tree_listing(workspace, second.tree)
    assert "tracked.txt" not in listed and "new.txt" not in listed
    assert "stays.txt" in listed and _blob_size(workspace, second.tree, "stays.txt") == 64  # at the cap: kept
    assert "link" in listed and listed["link"] == "120000"
    assert second.files == len(listed) == first.files  # tracked.txt out, stays.txt in
    assert shadow.changes(first.tree, second.tree) == [FileChange("stays.txt", "added"),
                                                       FileChange("tracked.txt", "deleted")]

    write(workspace, "new.txt", "small again\n")  # back under the cap: in the next one
    third = shadow.snapshot()
    assert "new.txt" in tree_listing(workspace, third.tree) and "tracked.txt" not in tree_listing(workspace, third.tree)
    assert third.files == second.files + 1



def test_a_grown_file_among_many_new_ones_is_left_out(workspace: Path):
    for n in range(300):  # more paths than go on ls-tree's command line, and a bulk check-in
        write(workspace, f"many/f{n:03d}.txt", f"{n}\n")
    shadow = _RacedShadow(workspace, {"many/f150.txt": 8192}, max_file_bytes=1024)
    snapshot = shadow.snapshot()
    listed = tree_listing(workspace, snapshot.tree)
    assert "many/f150.txt" not in listed and "many/f149.txt" in listed and "many/f151.txt" in listed
    assert snapshot.files == len(listed) == 300 - 1 + 3
