"""A headless run (`dshd run`) through the workspace's shared daemon, watched by a real
Neovim attached to the same session: the person in Neovim sees `dshd run` attached,
answers the run's approval in the approval float, and the run goes on and exits 0; the
same run with nobody attached is refused at once (exit 3, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import write_artifact  # noqa: E402

from tests.editors.nvim.test_nvim_shared import (  # noqa: E402
    chat_lines,
    go_answer,
    log_events,
    new_session,
    shared,  # noqa: F401 - the fixture
    wait_for_chat,
)

pytestmark = pytest.mark.slow

DSHD = Path(sys.executable).with_name("dshd")
WRITE = {"text": "Writing it.", "toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\n"}}]}


def dshd_run(shared, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSHD_")}
    env.update(XDG_RUNTIME_DIR=str(shared.runtime), XDG_CONFIG_HOME=str(shared.tmp_path / "config-home"))
    return subprocess.Popen([str(DSHD), "run", *args], cwd=shared.workspace, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_neovim_answers_the_approval_of_a_headless_run_on_its_session(shared):  # noqa: F811
    shared.start([WRITE, {"text": "Written by the run."}, WRITE, {"text": "Not written."}])
    a = shared.editor("nvim A")
    session_id = new_session(a)
    a.typed("Dsh chat")  # the person watches the conversation
    run = dshd_run(shared, "write a.txt", "--session", session_id, "--json")
    # The person sees who else is on the session, then the run's approval.
    a.wait_for("vim.deep_equal(require('dsh.state').others(), {'dshd run'})", timeout=60, what="dshd run attached")
    a.wait_for("#require('dsh.approvals').list() == 1", timeout=60, what="the run's approval float")
    go_answer(a, "approvals")
    a.feed("a")  # allow once
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert lines[0]["via"] == "daemon" and lines[0]["sessionId"] == session_id
    assert lines[-1]["exitCode"] == 0 and not lines[-1].get("personNeeded")
    assert (shared.workspace / "a.txt").read_text(encoding="utf-8") == "x\n"
    [decision] = [e["data"] for e in log_events(shared.workspace, session_id) if e["type"] == "permission/decision"]
    assert decision["outcome"] == "allow-once"
    # Neovim showed the run's conversation live, and the run has left the session.
    wait_for_chat(a, "Written by the run.")
    a.wait_for("vim.deep_equal(require('dsh.state').others(), {})", timeout=20, what="dshd run gone")
    write_artifact("headless-run-watched-chat.txt", "\n".join(chat_lines(a)) + "\n")

    # Control: the same run in a session nobody is attached to is refused at once.
    (shared.workspace / "a.txt").unlink()
    alone = dshd_run(shared, "write a.txt", "--json")
    out, err = alone.communicate(timeout=60)
    assert alone.returncode == 3, err.decode()
    result = json.loads(out.decode().splitlines()[-1])
    assert [n["kind"] for n in result["personNeeded"]] == ["permission"]
    assert not (shared.workspace / "a.txt").exists()
    assert a.lua("return #require('dsh.approvals').list()") == 0  # Neovim was not asked for another session
