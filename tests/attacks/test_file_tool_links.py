"""tools/safepath.py and the file tools on it (H-2): after the one resolve, every open goes
through directory handles, so a link where the resolved path had a folder or a file fails
with unsafe-path and nothing outside is read or written. Each refusal has its allowed twin
in the same test (the same call on a plain folder, or through a link that stays inside)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dshd.agent.tools import Policy, ToolContext
from dshd.tools import files, safepath, search


def ctx(root: Path) -> ToolContext:
    return ToolContext("call-1", 1, 1, root, Policy("workspace-write", False, ()), None)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "data.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("OUTSIDE\n")
    return root


def test_a_folder_swapped_after_the_resolve_is_unsafe(ws):
    outside = ws.parent / "outside"
    target = ws / "sub" / "data.txt"  # resolved while sub/ was a folder
    assert safepath.read_bytes(ws, target, 100) == b"inside\n"  # allowed twin
    safepath.write_atomically(ws, ws / "sub" / "new.txt", b"n\n")
    assert (ws / "sub" / "new.txt").read_bytes() == b"n\n"
    os.rename(ws / "sub", ws / "sub-real")
    (ws / "sub").symlink_to(outside)
    for probe in (
        lambda: safepath.read_bytes(ws, target, 100),
        lambda: safepath.write_atomically(ws, ws / "sub" / "new.txt", b"x"),
        lambda: safepath.write_atomically(ws, ws / "sub" / "deeper" / "new.txt", b"x"),
        lambda: safepath.lstat(ws, target),
    ):
        with pytest.raises(safepath.UnsafePath) as caught:
            probe()
        assert str(caught.value).startswith("unsafe-path: sub:")
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    assert (outside / "data.txt").read_text() == "OUTSIDE\n"


def test_a_file_swapped_for_a_link_is_unsafe_and_the_link_is_replaced_not_followed(ws):
    outside = ws.parent / "outside" / "data.txt"
    (ws / "sub" / "data.txt").unlink()
    (ws / "sub" / "data.txt").symlink_to(outside)
    with pytest.raises(safepath.UnsafePath, match="unsafe-path: sub/data.txt"):
        safepath.read_bytes(ws, ws / "sub" / "data.txt", 100)
    with pytest.raises(safepath.UnsafePath, match="unsafe-path: sub/data.txt"):
        safepath.write_atomically(ws, ws / "sub" / "data.txt", b"x")
    assert outside.read_text() == "OUTSIDE\n"


async def test_the_tools_follow_a_link_that_stays_inside_and_refuse_one_that_leads_out(ws):
    (ws / "inner").symlink_to(ws / "sub")
    (ws / "out").symlink_to(ws.parent / "outside")
    inside = await files.read_file(ctx(ws), {"path": "inner/data.txt"})
    assert inside.ok and "inside" in inside.content
    wrote = await files.write_file(ctx(ws), {"path": "inner/made.txt", "content": "m\n"})
    assert wrote.ok and (ws / "sub" / "made.txt").read_text() == "m\n"
    for tool, args in [
        (files.read_file, {"path": "out/data.txt"}),
        (files.write_file, {"path": "out/made.txt", "content": "m\n"}),
        (files.edit_file, {"path": "out/data.txt", "oldText": "OUTSIDE", "newText": "x"}),
        (search.list_files, {"path": "out"}),
        (search.search, {"pattern": "OUTSIDE", "path": "out"}),
    ]:
        out = await tool(ctx(ws), args)
        assert not out.ok and "unsafe-path" in out.content and "out" in out.content, (tool, out)
        assert "OUTSIDE\n" not in out.content
    assert sorted(p.name for p in (ws.parent / "outside").iterdir()) == ["data.txt"]


async def test_a_fifo_is_refused_without_blocking_and_a_regular_file_reads(ws):
    os.mkfifo(ws / "sub" / "pipe")
    started = time.monotonic()
    out = await files.read_file(ctx(ws), {"path": "sub/pipe"})
    assert not out.ok and "FIFO" in out.content and time.monotonic() - started < 2
    edit = await files.edit_file(ctx(ws), {"path": "sub/pipe", "oldText": "a", "newText": "b"})
    assert not edit.ok and "FIFO" in edit.content
    write = await files.write_file(ctx(ws), {"path": "sub/pipe", "content": "x"})
    assert not write.ok and "FIFO" in write.content
    assert (await files.read_file(ctx(ws), {"path": "sub/data.txt"})).ok


def test_read_bytes_reads_no_more_than_the_cap(ws):
    (ws / "big.txt").write_bytes(b"x" * 1001)
    with pytest.raises(safepath.TooBig, match="over the size cap of 1000 bytes"):
        safepath.read_bytes(ws, ws / "big.txt", 1000)
    assert safepath.read_bytes(ws, ws / "big.txt", 1001) == b"x" * 1001


async def test_a_listing_and_a_search_show_only_what_is_really_inside(ws):
    """ripgrep opens by name; what it reports is checked through handles. A folder swapped
    between ripgrep's walk and the check: its paths and lines are dropped and counted."""
    listed = await search.list_files(ctx(ws), {"path": "sub"})
    assert listed.ok and listed.content.splitlines()[1:] == ["sub/data.txt"]
    with safepath.Folders(ws) as folders:
        assert folders.entry("sub/data.txt") is not None and folders.read("sub/data.txt", 100) == b"inside\n"
    os.rename(ws / "sub", ws / "sub-real")
    (ws / "sub").symlink_to(ws.parent / "outside")
    with safepath.Folders(ws) as folders:
        assert folders.entry("sub/data.txt") is None and folders.read("sub/data.txt", 100) is None
    assert search._is_there([b"inside"], 1, b"inside") and not search._is_there([b"inside"], 1, b"OUTSIDE")
    long_line = b"x" * 600
    assert search._is_there([long_line], 1, b"x" * 500 + search.PREVIEW_MARK)
    assert not search._is_there([b"y" * 600], 1, b"x" * 500 + search.PREVIEW_MARK)


async def test_search_keeps_real_matches_long_lines_and_crlf_included(ws):
    """The check on ripgrep's output must not drop what is really there."""
    (ws / "sub" / "long.txt").write_text("y" * 700 + " needle\n")
    (ws / "sub" / "crlf.txt").write_bytes(b"first\r\nneedle here\r\n")
    (ws / "sub" / "plain.txt").write_text("a\nneedle\n")
    out = await search.search(ctx(ws), {"pattern": "needle"})
    assert out.ok and "left out" not in out.content, out.content
    lines = out.content.splitlines()
    assert lines[0].startswith("3 matches")
    assert lines[1].startswith("sub/crlf.txt:2:needle here") and lines[3] == "sub/plain.txt:2:needle"
    assert lines[2].startswith("sub/long.txt:1:yyyy") and "omitted end of long line" in lines[2]
    listed = await search.list_files(ctx(ws), {"path": "sub", "pattern": "*.txt"})
    assert listed.ok and "left out" not in listed.content and len(listed.content.splitlines()) == 5


async def test_a_file_where_a_folder_should_be_is_named_plainly(ws):
    out = await files.write_file(ctx(ws), {"path": "sub/data.txt/inner.txt", "content": "x"})
    assert not out.ok and out.content == "sub/data.txt: not a folder", out.content
    assert (ws / "sub" / "data.txt").read_text() == "inside\n"
    assert (await files.write_file(ctx(ws), {"path": "sub/fresh/inner.txt", "content": "x"})).ok
