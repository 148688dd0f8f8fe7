"""`dshd doctor` and MCP servers (SPEC X-5): the servers a session would start (the user's,
and the workspace's only in a trusted folder, else named as ignored), started as a session
starts them, their state and tools, then stopped: no process left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.sandbox_support import needs_sandbox

TOY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "toy.py"


def doctor(root: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("dshd")
    return subprocess.run(
        [str(exe), "doctor", "--workspace", str(root), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, "XDG_CONFIG_HOME": str(home)},
    )  # fmt: skip


def toy_table(name: str, marker: str) -> str:
    """The SDK toy server, offering only its ``look`` tool; ``marker`` in its command line."""
    args = json.dumps([str(TOY), "--marker", marker])
    return f'[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\ntools = ["look"]\n'


def setup(tmp_path: Path, user: str, workspace_config: str = "", mcp_json: dict | None = None) -> tuple[Path, Path]:
    root, home = tmp_path / "ws", tmp_path / "home"
    (root / ".dsh").mkdir(parents=True)
    (root / ".dsh" / "config.toml").write_text(workspace_config)
    if mcp_json is not None:
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": mcp_json}))
    (home / "dsh").mkdir(parents=True)
    (home / "dsh" / "config.toml").write_text(user)
    return root, home


def running(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry.name))
            except OSError:
                pass
    return found


@needs_sandbox
def test_doctor_lists_the_users_server_with_its_tools_and_names_an_untrusted_workspaces_as_ignored(tmp_path):
    marker = f"doc-{os.getpid()}"
    root, home = setup(
        tmp_path,
        user=toy_table("toy", marker),
        workspace_config=toy_table("repo", marker + "-repo"),
        mcp_json={"cloned": {"command": sys.executable, "args": [str(TOY), "--marker", marker + "-json"]}},
    )
    done = doctor(root, home)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("mcp ")]
    assert lines[0] == "mcp       toy (user, stdio): ready, 1 tool: mcp__toy__look", done.stdout
    assert "mcp       repo (workspace, config.toml): ignored, the workspace is not trusted" in done.stdout
    assert "mcp       cloned (workspace, .mcp.json): ignored, the workspace is not trusted" in done.stdout
    assert done.stdout.endswith("healthy\n")
    assert not running(marker)  # started, read, stopped: nothing left


@needs_sandbox
def test_doctor_json_shows_a_failed_server_and_a_trusted_workspaces_server(tmp_path):
    marker = f"doc-{os.getpid()}-t"
    broken = f'[mcp.servers.broken]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", "import sys; sys.exit(3)"]\n'
    root, home = setup(tmp_path, user=broken, workspace_config=toy_table("repo", marker))
    (home / "dsh" / "config.toml").write_text(broken + f"\n[trust]\nfolders = [{json.dumps(str(root))}]\n")
    done = doctor(root, home, "--json")
    assert done.returncode == 1, done.stdout + done.stderr  # a failed server is unhealthy
    report = json.loads(done.stdout)
    assert report["healthy"] is False and report["trusted"] is True
    servers = {s["name"]: s for s in report["mcp"]["servers"]}
    assert (servers["broken"]["source"], servers["broken"]["state"]) == ("user", "failed") and servers["broken"]["reason"]
    assert servers["broken"]["tools"] == []
    repo = servers["repo"]
    assert (repo["source"], repo["transport"], repo["state"], repo["tools"]) == ("workspace", "stdio", "ready", ["mcp__repo__look"])
    assert report["mcp"]["plugin"] is True and report["mcp"]["ignored"] == []
    assert not running(marker)


def test_doctor_says_when_the_mcp_plugin_is_off(tmp_path):
    marker = f"doc-{os.getpid()}-off"
    root, home = setup(tmp_path, user='plugins = ["plan", "goals", "tools"]\n' + toy_table("toy", marker))
    done = doctor(root, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mcp       off: the mcp plugin is not in plugins" in done.stdout
    report = json.loads(doctor(root, home, "--json").stdout)
    assert report["mcp"] == {"plugin": False, "servers": [], "ignored": []}
    assert not running(marker)


@needs_sandbox
def test_doctor_never_shows_a_value_mcp_json_expanded(tmp_path, monkeypatch):
    """A trusted .mcp.json expands a listed variable into a command that does not exist and
    into the env of a server that prints it on stderr and exits: both fail, and neither the
    lines nor the JSON hold the value (${NAME} stands in its place)."""
    secret = "doc-secret-5b9d-never-shown"
    monkeypatch.setenv("DSHD_TEST_DOC_SECRET", secret)
    printer = "import os, sys; sys.stderr.write('token ' + os.environ['T'] + '\\n'); sys.exit(3)"
    mcp_json = {
        "missing": {"command": "/opt/${DSHD_TEST_DOC_SECRET}/srv", "args": ["--t=${DSHD_TEST_DOC_SECRET}"]},
        "printer": {"command": sys.executable, "args": ["-c", printer], "env": {"T": "${DSHD_TEST_DOC_SECRET}"}},
    }
    root, home = setup(tmp_path, user="", mcp_json=mcp_json)
    user = f'[trust]\nfolders = [{json.dumps(str(root))}]\n\n[mcp]\nexpandEnv = ["DSHD_TEST_DOC_SECRET"]\n'
    (home / "dsh" / "config.toml").write_text(user)
    text = doctor(root, home)
    as_json = doctor(root, home, "--json")
    assert secret not in text.stdout + text.stderr + as_json.stdout + as_json.stderr
    servers = {s["name"]: s for s in json.loads(as_json.stdout)["mcp"]["servers"]}
    assert servers["printer"]["state"] == "failed" and "token ${DSHD_TEST_DOC_SECRET}" in servers["printer"]["reason"]
    assert servers["missing"]["state"] == "failed" and "/opt/${DSHD_TEST_DOC_SECRET}/srv" in servers["missing"]["reason"]
    assert "mcp       printer (workspace, stdio): FAILED" in text.stdout


@needs_sandbox
def test_doctor_says_a_failed_server_once_and_whole_with_its_fix(tmp_path):
    """A package runner's server that cannot start in the sandbox: its reason ends with the
    fix (install it once, or sandbox = "none" knowingly). The doctor's report gives it once,
    whole; stderr does not repeat it (it did, and the report cut the fix off at 300 characters)."""
    user = '[mcp.servers.runner]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]\nstartupTimeoutS = 2\n'
    root, home = setup(tmp_path, user, workspace_config='plugins = ["mcp"]\n')
    done = doctor(root, home)
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("mcp       runner (user, stdio): FAILED: ")]
    reason = line.split("FAILED: ", 1)[1]
    assert len(reason) > 300 and reason.endswith('set sandbox = "none" for this server in your user config'), reason
    assert "…" not in reason
    both = done.stdout + done.stderr
    assert both.count("package runner") == 1 and "Traceback" not in done.stderr, both
    # Control: --json gives the same reason, so the text above is the server's whole reason.
    servers = json.loads(doctor(root, home, "--json").stdout)["mcp"]["servers"]
    assert [s["reason"] for s in servers if s["name"] == "runner"] == [reason]
