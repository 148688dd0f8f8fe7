"""A stdio MCP server runs in the command sandbox: the REAL servers from npm
(tests/mcp/setup.sh installs them, pinned) under the real `dshd serve`, the scripted model
calling their tools. Sandboxed, server-filesystem cannot write the workspace's `.git`,
server-memory cannot write its file outside the workspace, and server-everything reaches
neither the host's loopback server nor the daemon's secrets. Positive control in each test:
the same server with `sandbox = "none"` (taken only from the person's user config) does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.e2e.support import read_log
from tests.e2e.test_mcp_real import calls, installed, new_session, prompt, results, results_list, start  # noqa: F401 - installed: a fixture
from tests.mcp_real_support import everything_argv, filesystem_argv, memory_argv, new_mark, server_toml
from tests.sandbox_support import needs_sandbox

# Every stdio server runs in bubblewrap by default: these tests need it like the commands'.
pytestmark = [pytest.mark.mcp, needs_sandbox]


@pytest.fixture
def outside():
    """A folder outside the workspace that the sandbox shows (read-only): not under /tmp,
    which the sandbox replaces with a private one."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    folder = Path(tempfile.mkdtemp(prefix="dshd-mcp-outside-", dir=base))
    yield folder
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()



async def test_a_sandboxed_filesystem_server_writes_only_the_workspace(daemons, tmp_path, outside):
    """server-filesystem is given a folder outside the workspace too. dshd offers the
    workspace as the one MCP root, which server-filesystem takes as its allowed folders, so
    it refuses the outside write itself; the sandbox holds where the server's own check
    would let a write through: the workspace's .git, read-only in the sandbox (EROFS). The
    control: the same server run with sandbox = "none" writes there."""
    root = daemons.root
    (root / ".git").mkdir(parents=True)
    boxed, open_mark = new_mark(), new_mark()
    servers = server_toml("fs", filesystem_argv(root, outside), boxed) + server_toml(
        "fsopen", filesystem_argv(root, outside), open_mark, sandbox="none"
    )
    client = await start(
        daemons, tmp_path, servers,
        [
            calls(("mcp__fs__write_file", {"path": str(root / "inside.txt"), "content": "in"})),
            calls(("mcp__fs__write_file", {"path": str(outside / "escaped.txt"), "content": "out"})),
            calls(("mcp__fs__write_file", {"path": str(root / ".git" / "planted"), "content": "hook"})),
            calls(("mcp__fsopen__write_file", {"path": str(root / ".git" / "control"), "content": "control"})),
            {"text": "done"},
        ],
        approve=lambda params: {"outcome": "allow-once"},
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    outcomes = results_list(read_log(root, sid))
    assert [(name, r["ok"]) for name, r in outcomes] == [
        ("mcp__fs__write_file", True), ("mcp__fs__write_file", False),
        ("mcp__fs__write_file", False), ("mcp__fsopen__write_file", True),
    ]  # fmt: skip
    assert (root / "inside.txt").read_text() == "in"
    assert not (outside / "escaped.txt").exists()
    escaped = outcomes[1][1]["content"]
    assert "outside allowed directories" in escaped or "EROFS" in escaped, escaped
    planted = outcomes[2][1]["content"]
    assert "EROFS" in planted and "read-only file system" in planted, planted
    assert not (root / ".git" / "planted").exists()
    assert (root / ".git" / "control").read_text() == "control"



async def test_a_sandboxed_memory_server_cannot_write_its_file_outside_the_workspace(daemons, tmp_path, outside):
    """server-memory keeps its knowledge graph in the file MEMORY_FILE_PATH names, here a
    folder outside the workspace. Sandboxed, its write there fails with EROFS and the file
    never appears; the control, the same server with sandbox = "none", writes it."""
    boxed, open_mark = new_mark(), new_mark()
    entity = {"entities": [{"name": "dshd", "entityType": "daemon", "observations": ["runs agents"]}]}
    servers = server_toml("mem", memory_argv(boxed), boxed, env={"MEMORY_FILE_PATH": str(outside / "boxed.jsonl")}) + server_toml(
        "memopen", memory_argv(open_mark), open_mark, env={"MEMORY_FILE_PATH": str(outside / "open.jsonl")}, sandbox="none"
    )
    client = await start(
        daemons, tmp_path, servers,
        [calls(("mcp__mem__create_entities", entity)), calls(("mcp__memopen__create_entities", entity)), {"text": "done"}],
        approve=lambda params: {"outcome": "allow-once"},
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    outcomes = results_list(read_log(daemons.root, sid))
    assert [(name, r["ok"]) for name, r in outcomes] == [
        ("mcp__mem__create_entities", False), ("mcp__memopen__create_entities", True),
    ], outcomes  # fmt: skip
    refused = outcomes[0][1]["content"]
    assert "EROFS" in refused or "read-only file system" in refused.lower(), refused
    assert not (outside / "boxed.jsonl").exists()
    assert "runs agents" in (outside / "open.jsonl").read_text()



class OneFileServer:
    """An HTTP server on the host's 127.0.0.1 answering every GET with one small file."""

    BODY = b"the host's own page\n"

    def __enter__(self) -> "OneFileServer":
        import http.server
        import threading

        body = self.BODY

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/page.txt"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()



async def test_a_sandboxed_server_reaches_no_network_and_none_of_the_daemons_secrets(daemons, tmp_path):
    """server-everything's gzip-file-as-resource fetches a URL (openWorldHint: it asks):
    sandboxed, the host's loopback server is out of reach; with sandbox = "none" the same
    fetch works. get-env shows the server's environment: its own env, never the daemon's
    secrets."""
    boxed, open_mark = new_mark(), new_mark()
    secret = "sk-daemon-" + new_mark()
    servers = server_toml("everything", everything_argv(boxed), boxed) + server_toml(
        "open", everything_argv(open_mark), open_mark, sandbox="none"
    )
    with OneFileServer() as page:
        fetch = {"name": "page.gz", "data": page.url, "outputType": "resource"}
        client = await start(
            daemons, tmp_path, servers,
            [
                calls(("mcp__everything__gzip-file-as-resource", fetch), ("mcp__open__gzip-file-as-resource", fetch),
                      ("mcp__everything__get-env", {})),
                {"text": "done"},
            ],
            approve=lambda params: {"outcome": "allow-once"},
            env={"DSHD_E2E_DAEMON_SECRET": secret},
        )  # fmt: skip
        sid, agent = await new_session(client)
        await prompt(client, agent)
    got = results(read_log(daemons.root, sid))
    assert got["mcp__everything__gzip-file-as-resource"]["ok"] is False, got
    assert got["mcp__open__gzip-file-as-resource"]["ok"] is True, got
    assert "resource" in got["mcp__open__gzip-file-as-resource"]["content"]
    env = got["mcp__everything__get-env"]["content"]
    assert boxed in env and secret not in env and "DSHD_E2E_DAEMON_SECRET" not in env
