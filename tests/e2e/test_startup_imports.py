"""`dshd serve` answers initialize without importing what it does not use on the way:
no pygls, no lsprotocol (its types module was most of the start-up), no model SDK, no
ACP SDK, no pathspec (the tools load with the first agent).

The real daemon under ``python -X importtime``: every import is written to stderr as it
happens, and so is the daemon's INFO log line of initialize, so the lines before that
line are the imports on the way to the answer. Control: a request naming an LSP
notification method makes the daemon import lsprotocol (to tell it is one), and the same
probe sees that import after the answer.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .raw_client import RawDaemon

NOT_BEFORE_INITIALIZE = ("lsprotocol", "pygls", "openai", "anthropic", "acp", "pathspec")
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.M)


def imported(text: str) -> set[str]:
    return {name.split(".")[0] for name in IMPORTED.findall(text)}


def test_initialize_is_answered_before_anything_heavy_is_imported(workspace: Path) -> None:
    command = [sys.executable, "-X", "importtime", "-m", "dshd", "serve"]
    with RawDaemon(workspace, command=command, log_level="INFO") as d:
        assert "capabilities" in d.initialize()["result"]
        d.notify("initialized", {})
        # Control: an LSP notification's method sent with an id needs lsprotocol's table.
        error = d.call("textDocument/didOpen", {"textDocument": {}}, timeout=30)["error"]
        assert error["code"] == -32601 and "is a notification" in error["message"]
        assert d.request("dsh/session/list", {}) == {"sessions": []}
        assert d.shutdown_and_exit() == 0
        stderr = bytes(d.stderr_bytes).decode(errors="replace")
    at_initialize = stderr.index("dshd.daemon: workspace ")
    before, after = stderr[:at_initialize], stderr[at_initialize:]
    assert {"dshd", "dshd_protocol", "msgspec", "asyncio"} <= imported(before)  # the probe reads imports
    assert imported(before) & set(NOT_BEFORE_INITIALIZE) == set()
    assert "lsprotocol" in imported(after)
