"""`.mcp.json` is read on the repository's say, so it is hostile input: it must be a regular
file inside the workspace of at most 256 KiB. A link out of the workspace (to a file, or
to /dev/zero), a FIFO, or a file one byte over the cap is an `invalid-config` error naming
the file and the rule, read at once and never followed. Positive control in the same test:
the same servers in a regular `.mcp.json` exactly at the cap are read and taken."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dshd.errors import DshError
from dshd.mcp.config import MCP_JSON_CAP, read_mcp_json

SERVERS = {"mcpServers": {"repo": {"command": "repo-server", "args": ["--serve"]}}}


def padded(size: int) -> bytes:
    """SERVERS as JSON, padded with spaces to exactly ``size`` bytes."""
    text = json.dumps(SERVERS).encode()
    return text + b" " * (size - len(text))


def refused(root: Path) -> str:
    started = time.monotonic()
    with pytest.raises(DshError) as caught:
        read_mcp_json(root)
    assert time.monotonic() - started < 2  # nothing blocked on a FIFO or read an endless file
    assert caught.value.kind == "invalid-config"
    assert caught.value.data["file"] == str(root.resolve() / ".mcp.json")
    return caught.value.message


def test_an_mcp_json_that_links_out_is_a_fifo_or_is_over_the_cap_is_not_read(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    path = root / ".mcp.json"
    # Control: a regular file exactly at the cap is read, and its server taken.
    path.write_bytes(padded(MCP_JSON_CAP))
    found = read_mcp_json(root)
    assert found is not None and found.servers["repo"]["command"] == "repo-server"

    path.write_bytes(padded(MCP_JSON_CAP + 1))
    message = refused(root)
    assert "over the size cap of 256 KiB" in message and "it was not read" in message, message

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(padded(100))  # what following the link would have taken
    path.unlink()
    os.symlink(elsewhere, path)
    assert "link" in refused(root)
    path.unlink()
    os.symlink("/dev/zero", path)
    assert "link" in refused(root)
    path.unlink()
    os.mkfifo(path)
    assert "FIFO" in refused(root)
