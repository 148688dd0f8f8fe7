"""The example workspace's README walked in Neovim's own terminal UI (tmux) against the real
daemon, on a copy of `examples/workspace` (trusted through the user config): the plan sent back and
approved, a goal whose round 1 edits `http/client.py` (each edit allowed with `a` in its
float), whose round 2 calls the example's own MCP server (in the sandbox, no network), then
`R` on the edit's tool card rewinds it and the statusline shows the goal's tokens. Screens are
kept in artifacts/nvim/tui-example-*.txt; what happened is read from the files and the log.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import write_artifact as keep  # noqa: E402

from tests.editors.nvim.test_nvim_daemon import log_events, tui_editor  # noqa: E402
from tests.sandbox_support import needs_sandbox  # noqa: E402

pytestmark = [pytest.mark.editor, needs_sandbox]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace"
MCP_TOOL = "mcp__http-status__http_status"


def answer_float(tui, key: str) -> None:
    tui.keys("Escape", ":Dsh answer", "Enter")
    time.sleep(0.7)  # the float's guard against keys already in flight
    tui.keys(key)


def test_tui_the_example_readme_plan_goal_mcp_rewind_and_tokens(tmp_path):
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLE, workspace, ignore=shutil.ignore_patterns("sessions", "checkpoints.git", "__pycache__"))
    original = (workspace / "http" / "client.py").read_text(encoding="utf-8")
    # The README's other way to trust the folder: [trust] folders in the user config.
    (tmp_path / "xdg" / "dsh").mkdir(parents=True)
    (tmp_path / "xdg" / "dsh" / "config.toml").write_text(f"[trust]\nfolders = [{json.dumps(str(workspace))}]\n")
    tui = tui_editor(tmp_path, workspace, "example", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
                     args=["http/client.py"])
    try:
        tui.wait_for("client.py")
        tui.keys(":Dsh chat here", "Enter")
        tui.wait_for("your message")
        tui.keys("i", "/plan Add retries to the HTTP client", "C-s")
        tui.wait_for("waiting for you", timeout=60)
        answer_float(tui, "r")
        tui.wait_for("Feedback for the agent")
        tui.keys("Cap the backoff.", "Enter")
        tui.wait_for("(revised)", timeout=60)
        tui.wait_for("waiting for you", timeout=60)
        answer_float(tui, "a")
        tui.wait_for("Start a goal", timeout=60)

        tui.keys("Escape", ":Dsh goal create Retries for the HTTP client", "Enter")
        for _ in range(2):  # round 1's two edits, each asked in its float
            tui.wait_for("waiting for you", timeout=60)
            answer_float(tui, "a")
            time.sleep(0.5)
        screen = tui.wait_for("Done: `send` retries", timeout=90)
        keep("tui-example-goal-done.txt", screen)
        assert "class RetryPolicy" in (workspace / "http" / "client.py").read_text(encoding="utf-8")

        [session_id] = [p.name for p in (workspace / ".dsh" / "sessions").iterdir() if (p / "log.jsonl").exists()]
        events = log_events(workspace, session_id)
        names = {e["data"]["callId"]: e["data"]["name"] for e in events if e["type"] == "tool/call"}
        mcp = [e["data"] for e in events if e["type"] == "tool/result" and names[e["data"]["callId"]] == MCP_TOOL]
        assert [r["ok"] for r in mcp] == [True, True], mcp
        assert "503 Service Unavailable: retry" in str(mcp[0]["content"])
        # The MCP calls' cards are in the chat, titled by the server's own tool title, with
        # their results; the statusline counts the goal's tokens. The last screen line (the
        # command line) is left out.
        tui.keys("Escape", "gg", ":call search('^▸ HTTP status code · http-status')", "Enter", "zt")
        tui.keys("j", "za", ":echo ''", "Enter")  # the fold under the card head opens on its result
        time.sleep(0.5)
        body = tui.screen().splitlines()[:-1]
        keep("tui-example-mcp-card.txt", "\n".join(body))
        assert sum(line.startswith("▸ HTTP status code · http-status ✓") for line in body) == 2, body
        assert any("503 Service Unavailable: retry" in line for line in body), body
        status = body[-1]
        assert re.search(r"◎ 3/40 · [1-9][0-9.]*k tok · complete", status), status

        # Rewind: R on round 1's edit card shows the diff, f puts client.py back.
        tui.keys("gg", ":call search('^▸ .*client.py')", "Enter")
        tui.keys("R")
        screen = tui.wait_for("Rewind to here?")
        keep("tui-example-rewind-diff.txt", screen)
        assert "after rewind" in screen and "RetryPolicy" in screen
        time.sleep(0.7)
        tui.keys("f")
        screen = tui.wait_for("rewound 1 file: http/client.py")
        keep("tui-example-rewound.txt", screen)
        assert (workspace / "http" / "client.py").read_text(encoding="utf-8") == original
        assert [e["data"]["files"] for e in log_events(workspace, session_id) if e["type"] == "checkpoint/restored"] == [
            ["http/client.py"]]
    finally:
        keep("tui-example-last.txt", tui.screen())
        tui.kill()
