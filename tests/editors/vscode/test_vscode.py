"""The VS Code extension (editors/vscode), tested for real.

`./run test` installs the toolchain first (editors/vscode/scripts/setup.sh: Chromium, Node 24,
code-server's bundled VS Code, playwright-core, vsce, the extension's npm deps). These tests then:
type-check the extension, run its unit tests with node's test runner, package it with vsce, and
run its integration suites inside a real VS Code (the VS Code server from code-server, driven by
headless Chromium) - one against a missing dshd, one against the real dshd with the scripted model.
Screenshots and logs go to artifacts/vscode/.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXT = REPO / "editors" / "vscode"
CACHE = Path(os.environ.get("DSHD_VSCODE_CACHE", REPO / ".cache" / "vscode"))
NODE = CACHE / "node24" / "bin" / "node"
VSCODE_SERVER = CACHE / "cs" / "node_modules" / "code-server" / "lib" / "vscode" / "out" / "server-main.js"
VSCE = CACHE / "tools" / "node_modules" / ".bin" / "vsce"
ARTIFACTS = REPO / "artifacts" / "vscode"

missing = [p for p in (NODE, VSCODE_SERVER, VSCE, EXT / "node_modules") if not p.exists()]
pytestmark = pytest.mark.skipif(
    bool(missing), reason=f"VS Code toolchain not installed ({missing[0] if missing else ''}): run ./run setup"
)


def node_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run(cmd: list[str], *, timeout: float, cwd: Path = EXT, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env or node_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module")
def built() -> None:
    run([str(NODE), "scripts/build.mjs"], timeout=120)


def test_typecheck(built) -> None:
    run([str(NODE), "node_modules/typescript/bin/tsc", "--noEmit", "-p", "."], timeout=180)
    run([str(NODE), "node_modules/typescript/bin/tsc", "--noEmit", "-p", "webview"], timeout=180)  # the chat page (DOM)


def test_unit(built) -> None:
    units = sorted(str(p.relative_to(EXT)) for p in (EXT / "out" / "unit").glob("*.test.js"))
    assert units, "no unit tests were built"
    proc = run([str(NODE), "--test", *units], timeout=120)
    assert "# fail 0" in proc.stdout or "fail 0" in proc.stdout, proc.stdout[-3000:]


def test_vsce_package(built, tmp_path: Path) -> None:
    vsix = tmp_path / "dshd-vscode.vsix"
    run([str(VSCE), "package", "--allow-missing-repository", "--skip-license", "-o", str(vsix)], timeout=180)
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
    for name in ("extension/dist/extension.js", "extension/dist/webview.js", "extension/dist/chat.css",
                 "extension/media/dsh.svg", "extension/package.json"):
        assert name in names, sorted(names)
    # Bundled by esbuild: no node_modules and no sources in the package.
    assert not any(n.startswith("extension/node_modules/") or n.startswith("extension/src/") for n in names), sorted(names)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(vsix, ARTIFACTS / vsix.name)


# Quiet workbench for screenshots: no welcome page, no chat side bar.
WORKBENCH_SETTINGS = {
    "workbench.startupEditor": "none", "chat.disableAIFeatures": True, "workbench.tips.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
}


# These suites check one window with a daemon of its own (`dshd serve`: its crash is the window's
# daemon's crash); the shared daemon (`dshd connect`, the default) has suites of its own below.
OWN_DAEMON = {"dsh.server.mode": "serve"}


def write_settings(workspace: Path, **settings) -> None:
    (workspace / ".vscode").mkdir(exist_ok=True)
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({**WORKBENCH_SETTINGS, **settings}, indent=1))


def run_real_vscode(
    workspace: Path, suite: str, artifacts: Path, timeout_s: int, env: dict[str, str] | None = None,
    *, untrusted: bool = False, machine_settings: dict | None = None,
) -> dict:
    """Runs one suite in a real VS Code (`env`: more environment for it and the dshd it starts;
    `untrusted`: Workspace Trust on and the folder not trusted; `machine_settings`: the person's own
    settings, which a workspace cannot override); its screenshots and logs end up in `artifacts`."""
    own = workspace.parent / f"{workspace.name}-artifacts"  # this run's own, then copied over
    extra = ["--untrusted"] if untrusted else []
    if machine_settings:
        extra += ["--machine-settings", json.dumps(machine_settings)]
    proc = subprocess.run(
        [str(NODE), "scripts/run-vscode-tests.mjs", "--workspace", str(workspace), "--suite", suite,
         "--artifacts", str(own), "--timeout", str(timeout_s), *extra],
        cwd=EXT, env={**node_env(), **(env or {})}, capture_output=True, text=True, timeout=timeout_s + 60,
    )
    shutil.rmtree(artifacts, ignore_errors=True)
    shutil.copytree(own, artifacts)
    results_file = own / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else None
    assert proc.returncode == 0, f"real VS Code run failed ({proc.returncode}):\n{proc.stdout[-8000:]}\n{proc.stderr[-4000:]}"
    assert results and results["failed"] == 0 and results["passed"] > 0, results
    return results


def test_real_vscode_without_daemon(built, tmp_path: Path) -> None:
    """The configured dshd does not exist: a clear error with the fix, the status bar says so."""
    write_settings(tmp_path, **{"dsh.server.command": "/nonexistent/dshd"})
    results = run_real_vscode(tmp_path, "out/integration/withoutDaemon.js", ARTIFACTS / "no-daemon", 180)
    assert results["passed"] == 9


def test_real_vscode_with_daemon(built, tmp_path: Path) -> None:
    """The extension against the real dshd and the scripted model (fixture/script.json): activation,
    goal status from notifications, plan reviews (keep planning, closed, approved, daemon lost)."""
    fixture = EXT / "test" / "integration" / "fixture"
    (tmp_path / ".dsh").mkdir()
    shutil.copy(fixture / "config.toml", tmp_path / ".dsh" / "config.toml")
    shutil.copy(fixture / "script.json", tmp_path / "script.json")
    dshd = Path(sys.executable).with_name("dshd")
    assert dshd.exists(), f"no dshd beside {sys.executable}"
    write_settings(tmp_path, **{"dsh.server.command": str(dshd), **OWN_DAEMON})
    run_real_vscode(tmp_path, "out/integration/suite.js", ARTIFACTS / "daemon", 300)


def test_real_vscode_chat_view(built, tmp_path: Path) -> None:
    """The chat view against the real dshd and the scripted model (fixture/chat-script.json): prompts
    typed in its box, markdown that keeps model HTML as text under a strict CSP, Stop, a goal the
    agent blocks, plan reviews answered from the card and from the keyboard, the session picker."""
    fixture = EXT / "test" / "integration" / "fixture"
    (tmp_path / ".dsh").mkdir()
    shutil.copy(fixture / "chat-config.toml", tmp_path / ".dsh" / "config.toml")
    shutil.copy(fixture / "chat-script.json", tmp_path / "script.json")
    write_settings(tmp_path, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON})
    run_real_vscode(tmp_path, "out/integration/chat.js", ARTIFACTS / "chat", 300)


MODEL_KEY_ENV = "DSHD_VSCODE_TEST_MODEL_KEY"
RETRY_EXPLAINED = (
    "A RetryPolicy decides when to try again: it retries connection errors and 502, 503 and 504 "
    "answers, waits longer after each failure (doubling from half a second, capped at 30 seconds, "
    "with jitter so that many clients do not retry in step), and gives up after five attempts, "
    "raising the last error so that the caller sees what went wrong."
)


def test_real_vscode_model_provider(built, tmp_path: Path) -> None:
    """A real provider through the model settings: the workspace's settings name `openai` and a
    loopback server that speaks OpenAI's streaming Chat Completions (a real HTTP peer, scripted
    here); the key comes from the variable they name. Streamed text arrives in pieces, tokens show
    in the status bar, a 401 is a notification that never holds the key."""
    from loopback_models import Call, Failure, LoopbackModelServer, Reply

    key = "sk-vscode-" + secrets.token_hex(16)
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(text=RETRY_EXPLAINED, piece=6, chunk_delay=0.06),
            Reply(tool_calls=[Call("goal_complete", {})], usage=(1200, 40)),
            Reply(text="Documented the retry policy.", usage=(1300, 20)),
            Failure(401),
        )
        (tmp_path / ".dsh").mkdir()
        (tmp_path / ".dsh" / "config.toml").write_text('plugins = ["plan", "goals"]\n')
        write_settings(tmp_path, **{
            "dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON,
            "dsh.model.provider": "openai", "dsh.model.name": "loopback-model",
            "dsh.model.baseUrl": server.base_url, "dsh.model.apiKeyEnv": MODEL_KEY_ENV,
        })
        run_real_vscode(tmp_path, "out/integration/models.js", ARTIFACTS / "models", 240, env={MODEL_KEY_ENV: key})
        assert all(r.headers.get("authorization") == f"Bearer {key}" for r in server.requests)


PLAN_RETRIES = "# Plan: retries\n\n1. Add a RetryPolicy.\n2. Wrap send() in it.\n3. Retry on every exception.\n4. Add tests for the policy.\n"
PLAN_RETRIES_REVISED = "# Plan: retries (revised)\n\n1. Add a RetryPolicy with backoff capped at 30 seconds.\n2. Retry only connection errors and 502/503/504.\n"
PLAN_CACHE = "# Plan: a cache\n\n1. Measure first.\n2. Add an LRU cache.\n"
PLAN_DOCS = "# Plan: docs\n\n1. Document the retry policy.\n"
# A sentence that takes about three seconds to stream before its tool call: the question opens
# while the test is typing.
SLOW = {"piece": 3, "chunk_delay": 0.1}


def test_real_vscode_hands(built, tmp_path: Path) -> None:
    """A person's hands (issue 16) against the real dshd and a real HTTP model peer: a plan review,
    a command approval and an edit approval each open while the person is typing (in the chat's box,
    in an editor) and take none of the keys: no answer is given, the typed text is intact; closing a
    plan's tabs decides nothing; the header says "waiting for you" while a question is open; plan
    mode before a session; titles without `/plan`; the newest session reopens; the goal's round
    budget default, token budget and token figures."""
    from loopback_models import Call, LoopbackModelServer, Reply

    key = "sk-vscode-" + secrets.token_hex(16)
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(text="Here is my plan.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN_RETRIES})], piece=5, chunk_delay=0.12),
            Reply(tool_calls=[Call("exit_plan_mode", {"plan": PLAN_RETRIES_REVISED})]),
            Reply(text="Plan approved: starting with the RetryPolicy."),
            Reply(text="Let me think about the cache first.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN_CACHE})], **SLOW),
            Reply(text="Approved: measuring first."),
            Reply(text="I will write the marker file now.", tool_calls=[Call("run_command", {"command": "echo hi > marker.txt"})], **SLOW),
            Reply(text="Wrote marker.txt."),
            Reply(text="I will raise the timeout to thirty.", tool_calls=[Call("edit_file", {"path": "http/client.py", "oldText": "TIMEOUT = 10", "newText": "TIMEOUT = 30"})], **SLOW),
            Reply(text="Raised the timeout to 30 seconds."),
            Reply(text="Let me plan the docs before I write.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN_DOCS})], **SLOW),
            Reply(text="Approved: writing the docs."),
            Reply(text="Documented it.", tool_calls=[Call("goal_complete", {})], usage=(1200, 40)),
            Reply(text="The retry policy is documented.", usage=(1300, 20)),
        )
        (tmp_path / ".dsh").mkdir()
        (tmp_path / ".dsh" / "config.toml").write_text(
            'plugins = ["plan", "goals", "tools"]\n\n[goals]\nmaxRounds = 40\n\n[tools]\napprove = ["write", "exec"]\n'
        )
        write_settings(tmp_path, **{
            "dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON,
            "dsh.model.provider": "openai", "dsh.model.name": "loopback-model",
            "dsh.model.baseUrl": server.base_url, "dsh.model.apiKeyEnv": MODEL_KEY_ENV,
            # What the person types into an editor stays exactly what they typed.
            "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
            "editor.wordBasedSuggestions": "off", "editor.suggestOnTriggerCharacters": False,
        })
        run_real_vscode(tmp_path, "out/integration/hands.js", ARTIFACTS / "hands", 420, env={MODEL_KEY_ENV: key})


def test_real_vscode_untrusted_folder(built, tmp_path: Path) -> None:
    """A cloned repository the person has not trusted: its .vscode/settings.json names another
    dshd and bad arguments, its .dsh/config.toml another model server; VS Code ignores the first,
    the daemon (told `trusted: false`) the second, and says so once with a way to trust the folder."""
    (tmp_path / ".dsh").mkdir()
    (tmp_path / ".dsh" / "config.toml").write_text(
        'plugins = ["plan", "goals"]\n\n[model]\nprovider = "openai"\nmodel = "their-model"\nbaseUrl = "http://127.0.0.1:9/v1"\n'
    )
    write_settings(tmp_path, **{"dsh.server.command": "/nonexistent/dshd", "dsh.server.args": ["--not-an-option"]})
    run_real_vscode(tmp_path, "out/integration/untrusted.js", ARTIFACTS / "untrusted", 120, untrusted=True,
                    machine_settings={"dsh.server.command": str(Path(sys.executable).with_name("dshd")), **OWN_DAEMON})


def shared_daemon_pids(run_dir: Path) -> list[int]:
    """The live shared daemons under a runtime folder (each writes its pid into the lock it holds)."""
    pids = []
    for lock in (run_dir / "dshd").glob("*.lock") if (run_dir / "dshd").is_dir() else []:
        text = lock.read_text(errors="replace").strip()
        if text.isdigit() and Path(f"/proc/{text}").exists() and b"daemon" in Path(f"/proc/{text}/cmdline").read_bytes():
            pids.append(int(text))
    return pids


def test_real_vscode_shared_session(built, tmp_path: Path) -> None:
    """Several clients on one live session (issue 18): VS Code in its default mode (`dshd connect`,
    the workspace's shared daemon) and a second client, another `dshd connect` process spoken to
    from the suite, open one session: each sees the other attached (status bar, chat header) and the
    other's prompt and reply; a plan review and an approval go to both, the first answer counts
    (either side), the other's windows close with one line saying who answered what; VS Code
    attaching while a question is open is asked it; the other client leaving disappears from VS Code;
    kill -9 of the daemon mid-turn: VS Code reattaches to a fresh one, nothing runs by itself; with
    every client gone the daemon exits by itself."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fixture = EXT / "test" / "integration" / "fixture"
    (workspace / ".dsh").mkdir()
    shutil.copy(fixture / "shared-config.toml", workspace / ".dsh" / "config.toml")
    shutil.copy(fixture / "shared-script.json", workspace / "script.json")
    write_settings(workspace, **{"dsh.server.command": str(Path(sys.executable).with_name("dshd"))})
    # Short, under /tmp: a Unix socket's path may not exceed 107 bytes.
    run_dir = Path(tempfile.mkdtemp(prefix="dsh-rt-"))
    try:
        run_real_vscode(workspace, "out/integration/shared.js", ARTIFACTS / "shared", 300, env={"XDG_RUNTIME_DIR": str(run_dir)})
        # Every client gone, the daemon exits by itself ([daemon] idleTimeoutS = 5 in the workspace's config).
        deadline = time.monotonic() + 30
        while shared_daemon_pids(run_dir):
            assert time.monotonic() < deadline, f"the shared daemon is still running: {shared_daemon_pids(run_dir)}"
            time.sleep(0.2)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_wire_types_match_the_schema() -> None:
    """src/protocol.ts is what json-schema-to-typescript makes of the protocol's JSON Schema."""
    run([str(NODE), "scripts/gen-protocol.mjs", "--check"], timeout=120)
