"""The workspace tools end to end: the real dshd over stdio, the scripted model calling each
tool, the results read from the session log and the workspace on disk. Sandbox cases assert
the errno the command met (and run the same probe unsandboxed); where bubblewrap cannot run
they are skipped with the reason, and the fail-closed case runs everywhere."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.sandbox_support import CONNECT, PYTHON, WRITE, Listener, fake_failing_bwrap, gone, needs_sandbox, processes_with, sleeper

TOOLS = ["plan", "goals", "tools"]


@pytest.fixture
def daemons(daemons):
    """The [tools] tables here are the test's own settings (a person's, not a cloned
    repository's): trust the workspace so that guarded keys such as approve = [] apply."""
    daemons.trusted = True
    return daemons


def calls(*pairs: tuple[str, dict]) -> dict:
    return {"toolCalls": [{"name": name, "arguments": args} for name, args in pairs]}


def tools_workspace(root: Path, replies: list[dict], tools_table: str = 'approve = []') -> Path:
    write_workspace(root, replies=replies, plugins=TOOLS, extra_config=f"\n[tools]\n{tools_table}\n")
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text("def greet():\n    return 'hi'\n")
    (root / "src" / "util.py").write_text("GREETING = 'hi'\n")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.py").write_text("GREETING = 'stale'\n")
    (root / ".gitignore").write_text("build/\n")
    return root


async def run_turn(client, text: str = "go") -> tuple[str, str]:
    created = await client.request("dsh/session/create", {})
    result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": text}, timeout=120)
    assert result["stopReason"] == "end-turn", result
    return created["sessionId"], created["agentId"]


def results(events: list[dict]) -> list[dict]:
    names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
    return [{"name": names[e["data"]["callId"]], **e["data"]} for e in of_type(events, "tool/result")]


@pytest.mark.slow
async def test_every_tool_happy_path(workspace, daemons):
    tools_workspace(
        workspace,
        [
            calls(("list_files", {}), ("list_files", {"path": "src", "pattern": "app.*"})),
            calls(("read_file", {"path": "src/app.py"}), ("search", {"pattern": "GREET", "ignoreCase": True, "glob": "*.py"})),
            calls(("edit_file", {"path": "src/app.py", "oldText": "'hi'", "newText": "'hello'"}),
                  ("write_file", {"path": "docs/notes.md", "content": "# Notes\n"})),
            calls(("run_command", {"command": "cat src/app.py docs/notes.md; echo err >&2; exit 3"})),
            {"text": "done"},
        ],
    )
    client = await daemons.start()
    sid, _ = await run_turn(client)
    out = {r["name"] + str(i): r for i, r in enumerate(results(read_log(workspace, sid)))}
    listed, listed_src, read, found, edited, written, ran = out.values()
    assert listed["ok"] and listed["content"].splitlines()[1:] == [".gitignore", "script.json", "src/app.py", "src/util.py"]
    assert listed_src["content"] == "1 files under src matching 'app.*'\nsrc/app.py"
    assert read["content"] == "src/app.py: lines 1-2 of 2\n     1\tdef greet():\n     2\t    return 'hi'\n"
    # build/ is gitignored: its GREETING is not found; matches are path:line:text.
    assert found["content"].splitlines()[1:] == ["src/app.py:1:def greet():", "src/util.py:1:GREETING = 'hi'"]
    assert edited["ok"] and "+    return 'hello'" in edited["content"]
    assert written["ok"] and (workspace / "docs" / "notes.md").read_text() == "# Notes\n"
    assert not ran["ok"] and ran["content"].startswith("exit code 3 (workspace-write sandbox, network off)")
    assert "return 'hello'" in ran["content"] and "# Notes" in ran["content"] and "err" in ran["content"]


async def test_the_catalogue_the_model_sees(workspace, daemons):
    tools_workspace(workspace, [{"text": "hi"}])
    client = await daemons.start()
    sid, _ = await run_turn(client)
    [header] = of_type(read_log(workspace, sid), "request/header")
    assert header["data"]["tools"] == [
        "edit_file", "exit_plan_mode", "goal_block", "goal_complete", "list_files", "read_file",
        "run_command", "search", "write_file",
    ]


@pytest.mark.slow
async def test_escapes_are_failed_results_naming_the_rule(workspace, daemons):
    (workspace.parent / "secret.txt").write_text("s3cret\n")
    tools_workspace(
        workspace,
        [
            calls(
                ("read_file", {"path": "../secret.txt"}),
                ("read_file", {"path": str(workspace.parent / "secret.txt")}),
                ("read_file", {"path": "out/secret.txt"}),
                ("write_file", {"path": ".dsh/config.toml", "content": "plugins = []\n"}),
                ("edit_file", {"path": ".git/HEAD", "oldText": "main", "newText": "evil"}),
                ("run_command", {"command": "true", "cwd": "../"}),
                ("list_files", {"path": "out"}),
            ),
            {"text": "ok"},
        ],
    )
    (workspace / "out").symlink_to(workspace.parent)
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config_before = (workspace / ".dsh" / "config.toml").read_text()
    client = await daemons.start()
    sid, _ = await run_turn(client)
    outcomes = results(read_log(workspace, sid))
    assert [r["ok"] for r in outcomes] == [False] * 7
    rules = ["outside the workspace"] * 3 + [".dsh/", ".git/", "outside the workspace", "outside the workspace"]
    for result, rule in zip(outcomes, rules):
        assert rule in result["content"], result
        assert "s3cret" not in result["content"]
    assert (workspace / ".dsh" / "config.toml").read_text() == config_before
    assert (workspace / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"


@pytest.mark.slow
@needs_sandbox
async def test_read_only_commands_meet_erofs_in_the_workspace_and_home(workspace, daemons):
    home_target = Path(os.environ.get("HOME", "/root")) / f".dsh-e2e-probe-{os.getpid()}"
    write = lambda target: ("run_command", {"command": f"{PYTHON} probe.py {target}"})  # noqa: E731
    tools_workspace(workspace, [calls(write("src/new.txt"), write(home_target)), {"text": "ok"}], 'sandbox = "read-only"\napprove = []')
    (workspace / "probe.py").write_text(WRITE)
    client = await daemons.start()
    sid, _ = await run_turn(client)
    for result in results(read_log(workspace, sid)):
        assert result["content"].splitlines()[1] == "EROFS", result
        assert result["content"].startswith("exit code 0 (read-only sandbox")
    assert not (workspace / "src" / "new.txt").exists() and not home_target.exists()


@pytest.mark.slow
@needs_sandbox
async def test_workspace_write_commands_write_the_workspace_only(workspace, daemons):
    home_target = Path(os.environ.get("HOME", "/root")) / f".dsh-e2e-probe-{os.getpid()}"
    probes = ["src/new.txt", ".git/config", ".dsh/evil", str(home_target)]
    tools_workspace(
        workspace,
        [calls(*[("run_command", {"command": f"{PYTHON} probe.py {t}"}) for t in probes]), {"text": "ok"}],
    )
    (workspace / "probe.py").write_text(WRITE)
    (workspace / ".git").mkdir()
    client = await daemons.start()
    sid, _ = await run_turn(client)
    seen = [r["content"].splitlines()[1] for r in results(read_log(workspace, sid))]
    assert seen == ["OK", "EROFS", "EROFS", "EROFS"]
    assert (workspace / "src" / "new.txt").read_text() == "x"
    assert not (workspace / ".git" / "config").exists() and not home_target.exists()


@pytest.mark.slow
@needs_sandbox
async def test_network_is_refused_unless_enabled(workspace, daemons, tmp_path):
    with Listener() as listener:
        command = f"{PYTHON} probe.py {listener.port}"
        tools_workspace(workspace, [calls(("run_command", {"command": command})), {"text": "ok"}])
        (workspace / "probe.py").write_text(CONNECT)
        client = await daemons.start()
        sid, _ = await run_turn(client)
        [refused] = results(read_log(workspace, sid))
        assert refused["content"].splitlines()[1] == "ECONNREFUSED"
        await client.stop()

        other = tools_workspace(tmp_path / "net-on", [calls(("run_command", {"command": command})), {"text": "ok"}],
                                "network = true\napprove = []")
        (other / "probe.py").write_text(CONNECT)
        daemons.root = other
        client = await daemons.start()
        sid, _ = await run_turn(client)
        [allowed] = results(read_log(other, sid))
        assert allowed["content"].splitlines()[1] == "OK"
        assert "network on" in allowed["content"].splitlines()[0]


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [pytest.param("workspace-write", marks=needs_sandbox), "full-access"])
async def test_a_command_past_its_timeout_is_killed_with_its_children(workspace, daemons, sandbox):
    marker = f"dsh-e2e-timeout-{sandbox}-{os.getpid()}"
    command = f"{sleeper(marker)} & {sleeper(marker)} & echo started; wait"
    tools_workspace(
        workspace, [calls(("run_command", {"command": command, "timeoutMs": 1500})), {"text": "ok"}],
        f'sandbox = "{sandbox}"\nnetwork = true\napprove = []',
    )
    client = await daemons.start()
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert not result["ok"] and result["content"].startswith("timed out after 1500 ms")
    assert "started" in result["content"]
    assert await gone(marker) == []


@pytest.mark.slow
async def test_cancel_kills_a_running_command(workspace, daemons):
    marker = f"dsh-e2e-cancel-{os.getpid()}"
    tools_workspace(workspace, [calls(("run_command", {"command": sleeper(marker)})), {"text": "never"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = []')
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}))
    deadline = asyncio.get_running_loop().time() + 10
    while not processes_with(marker):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    await client.request("dsh/agent/cancel", {"agentId": created["agentId"]})
    assert (await asyncio.wait_for(prompt, 10))["stopReason"] == "cancelled"
    assert await gone(marker) == []


async def test_shutdown_kills_a_running_command(workspace, daemons):
    marker = f"dsh-e2e-shutdown-{os.getpid()}"
    tools_workspace(workspace, [calls(("run_command", {"command": sleeper(marker)})), {"text": "never"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = []')
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}))
    while not processes_with(marker):
        await asyncio.sleep(0.05)
    assert await client.stop() == 0
    await asyncio.gather(prompt, return_exceptions=True)
    assert await gone(marker) == []


async def test_no_sandbox_means_the_command_does_not_run(workspace, daemons, tmp_path):
    """Fail closed: where bubblewrap cannot build a sandbox (here a bwrap that fails as
    Ubuntu's does under AppArmor), run_command says why and how to fix it, and runs nothing."""
    fake = fake_failing_bwrap(tmp_path / "fake-bin")
    tools_workspace(workspace, [calls(("run_command", {"command": "touch ran.txt"})), {"text": "ok"}])
    client = await daemons.start(env={"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    sid, _ = await run_turn(client)
    [result] = results(read_log(workspace, sid))
    assert not result["ok"] and result["content"].startswith("Not run: no sandbox can be built here")
    assert "setting up uid map: Permission denied" in result["content"] and "To fix it" in result["content"]
    assert not (workspace / "ran.txt").exists()


async def test_run_command_asks_with_the_command_and_folder(workspace, daemons):
    tools_workspace(workspace, [calls(("run_command", {"command": "echo hi > made.txt", "cwd": "src"})), {"text": "ok"}],
                    'sandbox = "full-access"\nnetwork = true\napprove = ["exec"]')
    asked: list[dict] = []
    client = await daemons.start(approve=lambda p: asked.append(p) or {"outcome": "reject", "feedback": "not now"})
    sid, _ = await run_turn(client)
    [params] = asked
    assert params["tool"] == "run_command" and params["mutability"] == "exec"
    assert params["command"] == "echo hi > made.txt" and params["cwd"] == str((workspace / "src").resolve())
    assert params["title"] == "Run `echo hi > made.txt`" and "diff" not in params
    assert not (workspace / "src" / "made.txt").exists()
    [result] = results(read_log(workspace, sid))
    assert not result["ok"] and "not now" in result["content"]
