"""Options a client picks blindly are safe (issue 30).

ACP clients pick a permission option by its kind, not by reading it: CodeCompanion.nvim's
Accept takes the option whose kind is ``allow_once``, acpx's ``y`` (and ``--approve-all``)
the first ``allow_once``. Every request dshd sends has at most one option per kind, so
such a pick on a plan review approves the plan and nothing more; starting a goal is the
person's own ``/goal``. A plan review's tool call never goes back from ``in_progress``
to ``pending`` on the wire.

- Both SDK clients (the official Python and TypeScript SDKs), answering as CodeCompanion
  does: it maps each kind to an option (a later option of a kind replaces an earlier one)
  and its Accept answers with the ``allow_once`` one; its dialog labels each option by its
  kind alone ("2 Allow"), so the person never reads the names. (CodeCompanion itself is a
  Neovim plugin published on GitHub and luarocks, neither of which this machine's set-up
  can install from: this is a client of our own that picks the same way, not CodeCompanion.)
- acpx 0.19.1 (pinned, tests/acp_door/setup.sh), the real CLI: ``--approve-all``, and its
  interactive ``y`` typed on a terminal (a pty).
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.acp_door.clients import NODE, NODE_CACHE, AcpError, dshd_acp_command
from tests.acp_door.support import PLAN, idle, selected, tool_call, wait_log
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.shared_daemon_support import Runtime

ACPX = NODE_CACHE / "acp-client" / "node_modules" / ".bin" / "acpx"
TOOLS = ["plan", "goals", "tools"]
EXIT_WITH_PLAN = {"toolCalls": [tool_call("exit_plan_mode", plan=PLAN)]}
EDIT = {"toolCalls": [tool_call("edit_file", path="notes.txt", oldText="one", newText="two")]}
OBJECTIVE = 'Carry out the approved plan "Plan: add the parser tests"'
STATUS_RANK = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


def codecompanion_accept(params: dict) -> dict:
    """CodeCompanion's Accept: the option its kind map holds for allow_once (the map is
    built in order, so the last option of a kind wins)."""
    by_kind = {}
    for option in params["options"]:
        by_kind[option["kind"]] = option["optionId"]
    return selected(by_kind["allow_once"])


def first_of_kind(kind: str):
    """acpx's pick: the first option of the kind."""
    return lambda params: selected(next(o["optionId"] for o in params["options"] if o["kind"] == kind))


def kinds_offered(request: dict) -> list[str]:
    return [o["kind"] for o in request["options"]]


def statuses_on_the_wire(client, call_id: str) -> list[str]:
    """Every status the client was told for this call, updates and permission requests
    alike, in the order they arrived."""
    told = []
    for what, params in client.wire:
        call = params["toolCall"] if what == "permission" else params["update"]
        if call.get("toolCallId") == call_id and "status" in call:
            told.append(call["status"])
    return told


def monotonic(statuses: list[str]) -> bool:
    ranks = [STATUS_RANK[s] for s in statuses]
    return ranks == sorted(ranks)


def test_the_monotonic_check_sees_a_status_going_back():
    # Control for the probe: the sequence the door sent before (the review's request said
    # pending after in_progress) is caught.
    assert not monotonic(["pending", "in_progress", "pending", "completed"])
    assert monotonic(["pending", "pending", "in_progress", "in_progress", "completed"])


async def test_a_blind_allow_once_pick_approves_the_plan_and_starts_no_goal(clients):
    root = write_workspace(clients.workspace, [EXIT_WITH_PLAN, EDIT, {"text": "done"}], plugins=TOOLS)
    (root / "notes.txt").write_text("one\n")
    client = await clients.start()
    client.answer_permission = codecompanion_accept
    sid = (await client.new_session())["sessionId"]
    await client.set_mode(sid, "plan")

    assert (await client.prompt(sid, "plan the parser tests, then do it"))["stopReason"] == "end_turn"

    # Every request of the session (the plan review, the edit's approval): one option per kind.
    review, approval = client.permission_requests
    for request in client.permission_requests:
        assert len(kinds_offered(request)) == len(set(kinds_offered(request))), request["options"]
        # So the first allow_once (acpx) and the last (CodeCompanion) are one option.
        assert first_of_kind("allow_once")(request) == codecompanion_accept(request)
    assert [o["optionId"] for o in review["options"]] == ["approve", "keep-planning"]
    assert kinds_offered(approval) == ["allow_once", "allow_always", "reject_once"]

    events = await wait_log(root, sid, idle)
    assert [r["data"].get("review", {}).get("outcome") for r in of_type(events, "tool/result")] == ["approved", None]
    assert of_type(events, "goal/change") == []  # approving the plan started no goal
    assert (root / "notes.txt").read_text() == "two\n"  # the edit allowed once ran
    assert "send /goal" in client.agent_text(sid)  # how to start one, in the chat

    # The status of every call only moves forward on the wire; the review's request says
    # in_progress (it was told so when the plan tool started).
    plan_call = review["toolCall"]["toolCallId"]
    told = statuses_on_the_wire(client, plan_call)
    assert told[0] == "pending" and told[-1] == "completed" and "in_progress" in told, told
    assert review["toolCall"]["status"] == "in_progress"
    for call in client.tool_calls(sid):
        assert monotonic(statuses_on_the_wire(client, call["toolCallId"])), (call["toolCallId"], statuses_on_the_wire(client, call["toolCallId"]))


def goal_done(events: list[dict]) -> bool:
    return idle(events) and any(e["data"].get("op") == "complete" for e in of_type(events, "goal/change"))


async def test_goal_command_starts_a_goal_for_the_approved_plan(clients):
    write_workspace(
        clients.workspace,
        [
            EXIT_WITH_PLAN,
            {"text": "Planned"},
            {"toolCalls": [tool_call("goal_complete")]},  # the goal's round 1
            {"text": "goal is done"},
        ],
    )
    client = await clients.start()
    client.answer_permission = first_of_kind("allow_once")
    sid = (await client.new_session())["sessionId"]
    commands = await client.wait_update(lambda u: u["update"]["sessionUpdate"] == "available_commands_update", timeout=10)
    assert "goal" in [c["name"] for c in commands["update"]["availableCommands"]]

    # Nothing approved yet: /goal says so and creates nothing.
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, "/goal")
    assert err.value.code == -32602 and err.value.data["field"] == "prompt" and "no approved plan" in err.value.message

    await client.set_mode(sid, "plan")
    assert (await client.prompt(sid, "plan the parser tests"))["stopReason"] == "end_turn"
    assert of_type(read_log(clients.workspace, sid), "goal/change") == []

    assert (await client.prompt(sid, "/goal"))["stopReason"] == "end_turn"
    events = await wait_log(clients.workspace, sid, goal_done)
    [created] = [e for e in of_type(events, "goal/change") if e["data"]["op"] == "create"]
    assert created["data"]["goal"]["objective"] == OBJECTIVE
    assert "Goal started" in client.agent_text(sid)
    # The client heard the goal as any goal change.
    await client.wait_update(lambda u: ((u["update"].get("_meta") or {}).get("goal") or {}).get("phase") == "complete", timeout=10)


async def test_goal_command_with_an_objective_and_with_a_goal_standing(clients):
    write_workspace(clients.workspace, [{"text": "round one", "delayMs": 3000}])
    client = await clients.start()
    sid = (await client.new_session())["sessionId"]
    assert (await client.prompt(sid, "/goal Ship the parser"))["stopReason"] == "end_turn"
    events = await wait_log(clients.workspace, sid, lambda ev: of_type(ev, "goal/change"))
    assert [e["data"]["goal"]["objective"] for e in of_type(events, "goal/change")] == ["Ship the parser"]
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, "/goal Another one")
    assert "cannot create a goal" in err.value.message
    # /goals is another word: an unknown command, not /goal.
    with pytest.raises(AcpError) as err:
        await client.prompt(sid, "/goals")
    assert err.value.code == -32602
    assert [e["data"]["goal"]["objective"] for e in of_type(read_log(clients.workspace, sid), "goal/change") if e["data"]["op"] == "create"] == ["Ship the parser"]


# ---- acpx, the real CLI ----------------------------------------------------------------------

needs_acpx = pytest.mark.skipif(not ACPX.exists() or not NODE.exists(), reason="acpx not installed: run tests/acp_door/setup.sh")


def _acpx_env(tmp_path: Path) -> dict:
    home = tmp_path / "home"  # acpx keeps its state under $HOME
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}"}


def _acpx_args(workspace: Path, *flags: str, shared: bool = False) -> list[str]:
    agent = " ".join(dshd_acp_command(shared=shared))
    # `/plan <message>` turns plan mode on and sends the message: the model presents a plan.
    return [str(ACPX), "--agent", agent, "--cwd", str(workspace), *flags, "--format", "text", "--timeout", "60",
            "exec", "/plan add the parser tests"]  # fmt: skip


def _only_session(workspace: Path) -> list[dict]:
    [session] = [p.name for p in (workspace / ".dsh" / "sessions").iterdir() if p.name.startswith("s-")]
    return read_log(workspace, session)


def _assert_approved_and_no_goal(workspace: Path, out: str) -> None:
    events = _only_session(workspace)
    assert [r["data"]["review"]["outcome"] for r in of_type(events, "tool/result")] == ["approved"]
    assert [e["data"]["active"] for e in of_type(events, "plan/mode")] == [True, False]
    assert of_type(events, "goal/change") == []
    assert "Starting the work" in out and "send /goal" in out


@needs_acpx
@pytest.mark.parametrize("shared", [False, True], ids=["stdio", "shared-daemon"])
def test_acpx_approve_all_approves_the_plan_and_starts_no_goal(tmp_path: Path, shared: bool):
    # `dshd acp --stdio`, and `dshd acp` as editors run it: the forwarder to the workspace's
    # shared daemon (in a private runtime folder).
    workspace = write_workspace(tmp_path / "ws", [EXIT_WITH_PLAN, {"text": "Starting the work"}])
    runtime = Runtime() if shared else None
    try:
        env = {**_acpx_env(tmp_path), **(runtime.env if runtime else {})}
        ran = subprocess.run(_acpx_args(workspace, "--approve-all", shared=shared), env=env, cwd=workspace,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert ran.returncode == 0, (ran.stdout, ran.stderr)
        if runtime is not None:
            assert runtime.daemon_pids(), "the session did not run in the shared daemon"
        _assert_approved_and_no_goal(workspace, ran.stdout)
    finally:
        if runtime is not None:
            runtime.stop()


@needs_acpx
def test_acpx_y_on_a_terminal_approves_the_plan_and_starts_no_goal(tmp_path: Path):
    # acpx asks on the terminal only when its stdin and stderr are one: a pty for both.
    workspace = write_workspace(tmp_path / "ws", [EXIT_WITH_PLAN, {"text": "Starting the work"}])
    leader, follower = pty.openpty()
    acpx = subprocess.Popen(_acpx_args(workspace), env=_acpx_env(tmp_path), cwd=workspace,
                            stdin=follower, stderr=follower, stdout=subprocess.PIPE, text=True)  # fmt: skip
    os.close(follower)
    screen, answered = b"", False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and acpx.poll() is None:
            if not select.select([leader], [], [], 0.2)[0]:
                continue
            try:
                screen += os.read(leader, 4096)
            except OSError:  # the terminal closed: acpx is done
                break
            if not answered and b"(y/N)" in screen:
                os.write(leader, b"y\n")
                answered = True
        out, _ = acpx.communicate(timeout=60)
    finally:
        if acpx.poll() is None:
            acpx.kill()
            acpx.wait()
        os.close(leader)
    assert answered, screen.decode(errors="replace")
    assert b"Allow Plan: add the parser tests [switch_mode]?" in screen
    assert acpx.returncode == 0, (out, screen.decode(errors="replace"))
    _assert_approved_and_no_goal(workspace, out)
