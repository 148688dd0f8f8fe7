"""The real CodeCompanion.nvim against `dshd acp --stdio`: its Accept on a plan review
approves the plan and starts no goal (issue 30's blind pick).

CodeCompanion (pinned, unchanged, in tests/fixtures/vendor/ with plenary.nvim) runs in a
real headless Neovim, with an ACP adapter whose command is `dshd acp --stdio`. The person
opens a chat, sends ``\\plan add the parser tests`` (CodeCompanion's trigger for the agent's
own commands: it sends ``/plan ...``), and when CodeCompanion shows its approval prompt
presses its Accept key (``g2``) in the chat buffer. CodeCompanion answers with the option
whose kind is ``allow_once`` (it labels each option by its kind alone, so nobody reads the
names). The session log then shows the plan approved, plan mode off and no goal.

The control shows the probe sees a goal when there is one: in the same chat the person
sends ``\\goal``, and a goal for the approved plan is created and runs to completion.

The test only observes CodeCompanion: it records each permission request CodeCompanion
was handed and the option it answered with, then calls CodeCompanion's own code.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pynvim
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import dshd_binary, nvim_binary, write_artifact  # noqa: E402

from tests.acp_door.support import PLAN, tool_call  # noqa: E402
from tests.e2e.conftest import write_workspace  # noqa: E402
from tests.e2e.support import of_type, read_log  # noqa: E402

pytestmark = pytest.mark.slow

VENDOR = Path(__file__).resolve().parents[2] / "fixtures" / "vendor"
CODECOMPANION = VENDOR / "codecompanion.nvim"
PLENARY = VENDOR / "plenary.nvim"
OBJECTIVE = 'Carry out the approved plan "Plan: add the parser tests"'

# CodeCompanion set up as its docs say (adapters.acp.<name> = a function returning an ACP
# adapter; interactions.chat.adapter names the default), its ACP adapter running dshd.
_SETUP = r"""
local codecompanion, plenary, dshd = ...
vim.opt.rtp:prepend(plenary)
vim.opt.rtp:prepend(codecompanion)
vim.cmd('runtime plugin/plenary.vim')
vim.cmd('runtime plugin/codecompanion.lua')
require('codecompanion').setup({
  adapters = {
    acp = {
      dshd = function()
        return {
          name = 'dshd',
          formatted_name = 'dshd',
          type = 'acp',
          roles = { llm = 'assistant', user = 'user' },
          opts = { vision = false },
          commands = { default = { dshd, 'acp', '--stdio' } },
          defaults = { mcpServers = {}, timeout = 20000 },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
            clientInfo = { name = 'CodeCompanion.nvim', version = '1.0.0' },
          },
          handlers = {
            setup = function(self) return true end,
            auth = function(self) return true end,
            form_messages = function(self, messages, capabilities)
              return require('codecompanion.adapters.acp.helpers').form_messages(self, messages, capabilities)
            end,
            on_exit = function(self, code) end,
          },
        }
      end,
    },
  },
  interactions = { chat = { adapter = 'dshd' } },
})

-- Observe (never replace) CodeCompanion's permission handling: what it was handed, and
-- the option it answered with.
_G.cc_test = { requests = {} }
local permission = require('codecompanion.interactions.chat.acp.request_permission')
local confirm = permission.confirm
permission.confirm = function(chat, request)
  local seen = { options = vim.deepcopy(request.options), tool_call = vim.deepcopy(request.tool_call) }
  table.insert(_G.cc_test.requests, seen)
  local respond = request.respond
  request.respond = function(option_id, cancelled)
    seen.answer = option_id or vim.NIL
    seen.cancelled = cancelled
    return respond(option_id, cancelled)
  end
  return confirm(chat, request)
end
"""


class CodeCompanion:
    """A real headless Neovim with the vendored CodeCompanion and plenary loaded."""

    def __init__(self, workspace: Path, home: Path) -> None:
        # Neovim's (and CodeCompanion's) state and data go under the test's own folder.
        env = [f"XDG_{kind}_HOME={home / kind.lower()}" for kind in ("CONFIG", "DATA", "STATE", "CACHE")]
        self.nvim = pynvim.attach(
            "child", argv=["env", *env, nvim_binary(), "--embed", "--headless", "--clean", "-n", "-i", "NONE"]
        )
        self.nvim.options["columns"] = 120
        self.nvim.options["lines"] = 40
        self.nvim.chdir(str(workspace))
        self.nvim.exec_lua(_SETUP, str(CODECOMPANION), str(PLENARY), dshd_binary())

    def lua(self, code: str, *args):
        return self.nvim.exec_lua(code, *args)

    def wait_for(self, lua_expr: str, what: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            value = self.lua(f"return {lua_expr}")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; chat:\n" + "\n".join(self.chat_lines()))
            time.sleep(0.1)

    def wait_for_chat(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in "\n".join(self.chat_lines()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {text!r} in the chat:\n" + "\n".join(self.chat_lines()))
            time.sleep(0.1)

    def chat_lines(self) -> list[str]:
        return self.lua(
            "local chat = require('codecompanion').last_chat()"
            " return chat and vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false) or {}"
        )

    def send(self, text: str) -> None:
        """Type the message at the end of the chat buffer and send it with CodeCompanion's
        send key (<CR> in Normal mode), as a person would."""
        self.nvim.input("<Esc>Go" + text.replace("<", "<lt>") + "<Esc>")
        self.wait_for(f"vim.api.nvim_get_mode().mode == 'n' and vim.fn.getline('$') == {json.dumps(text)}", "the typed message")
        self.nvim.input("<CR>")

    def close(self) -> None:
        try:
            self.nvim.command("qa!")
        except Exception:  # noqa: BLE001 - Neovim exits while answering
            pass
        self.nvim.close()


def only_session(workspace: Path) -> str:
    sessions = workspace / ".dsh" / "sessions"
    if not sessions.is_dir():
        return ""
    names = [p.name for p in sessions.iterdir() if p.name.startswith("s-")]
    return names[0] if len(names) == 1 else ""


def wait_log(workspace: Path, done, what: str, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    events: list[dict] = []
    while time.monotonic() < deadline:
        session = only_session(workspace)
        if session:
            events = read_log(workspace, session)
            if done(events):
                return events
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; log: {[e['type'] for e in events]}")


def turns_closed(n: int):
    return lambda events: len(of_type(events, "turn/close")) >= n


@pytest.fixture
def codecompanion(tmp_path: Path):
    workspace = write_workspace(
        tmp_path / "ws",
        [
            {"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]},
            {"text": "Starting the work"},
            {"toolCalls": [tool_call("goal_complete")]},  # the goal's round 1 (the control)
            {"text": "goal is done"},
        ],
    )
    editor = CodeCompanion(workspace, tmp_path / "home")
    try:
        yield editor, workspace
    finally:
        write_artifact("codecompanion-plan-review-chat.txt", "\n".join(editor.chat_lines()) + "\n")
        editor.close()


def test_codecompanion_accept_on_a_plan_review_approves_the_plan_and_starts_no_goal(codecompanion):
    cc, workspace = codecompanion
    cc.nvim.command("CodeCompanionChat")
    # dshd lists its commands once the session is open; only then does CodeCompanion turn
    # \plan into /plan.
    cc.wait_for(
        "(function() local chat = require('codecompanion').last_chat()"
        " if not chat then return false end"
        " for _, c in ipairs(require('codecompanion.interactions.chat.acp.commands').get_commands_for_buffer(chat.bufnr)) do"
        " if c.name == 'plan' then return true end end return false end)()",
        "dshd's commands in CodeCompanion",
    )
    cc.send("\\plan add the parser tests")

    # CodeCompanion's approval prompt for the plan review, its Accept on g2.
    cc.wait_for("#_G.cc_test.requests == 1", "the plan review's permission request")
    cc.wait_for(
        "vim.fn.maparg('g2', 'n', false, true).desc == 'Accept' and vim.bo.filetype == 'codecompanion'",
        "CodeCompanion's Accept key in the chat buffer",
    )
    assert any(line == "- `g2` - Accept" for line in cc.chat_lines()), cc.chat_lines()
    cc.nvim.input("g2")

    events = wait_log(workspace, turns_closed(1), "the turn to end after the approval")
    # CodeCompanion was handed exactly the options dshd sends for a plan review (one per
    # kind) and answered with the allow_once one.
    [review] = cc.lua("return _G.cc_test.requests")
    assert review["tool_call"]["kind"] == "switch_mode" and review["tool_call"]["title"] == "Plan: add the parser tests"
    assert [(o["optionId"], o["kind"]) for o in review["options"]] == [("approve", "allow_once"), ("keep-planning", "reject_once")]
    assert review["answer"] == "approve" and review["cancelled"] is False

    # The session log: the plan approved (by CodeCompanion), plan mode off, no goal.
    [result] = of_type(events, "tool/result")
    assert result["data"]["review"] == {"outcome": "approved", "client": "CodeCompanion.nvim"}
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True, False]
    assert of_type(events, "goal/change") == []
    chat = "\n".join(cc.chat_lines())
    assert "You selected: Accept" in chat and "send /goal" in chat and "Starting the work" in chat
    time.sleep(1)  # nothing more comes: no goal starts late
    assert of_type(read_log(workspace, only_session(workspace)), "goal/change") == []

    # Control: the probe sees a goal when the person asks for one, with \goal (/goal).
    cc.send("\\goal")
    events = wait_log(
        workspace,
        lambda ev: turns_closed(2)(ev) and any(e["data"]["op"] == "complete" for e in of_type(ev, "goal/change")),
        "the goal started by \\goal to complete",
    )
    created = [e["data"]["goal"]["objective"] for e in of_type(events, "goal/change") if e["data"]["op"] == "create"]
    assert created == [OBJECTIVE]
    cc.wait_for_chat("Goal started (at most 256 rounds): " + OBJECTIVE)
    assert len(cc.lua("return _G.cc_test.requests")) == 1  # asked once, answered once
