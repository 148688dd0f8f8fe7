"""`${VAR}` in a workspace's `.mcp.json` expands only variables the person allowed: the real
config layers and `.mcp.json` reader. A variable the person's user config does not list in
`[mcp] expandEnv` is never expanded (a workspace file or the editor's settings listing it
is ignored, and said so); of the unlisted, only a few harmless names expand, and only in a
stdio server, never in what an HTTP server is sent. Positive controls in the same tests: the
same variable listed in the user config expands, and the harmless names do in a stdio
server."""

from __future__ import annotations

from pathlib import Path

from mcp_config_support import SECRET, load, specs, user, write_mcp_json, ws  # noqa: F401 - ws, user: fixtures

from dshd.agent.config_layers import EDITOR_SETTINGS
from dshd.mcp.config import read_mcp_json


def test_harmless_names_expand_in_a_stdio_server_only(ws):
    write_mcp_json(
        ws,
        {
            "run": {"command": "${HOME}/bin/srv", "args": ["--user=${USER}"], "env": {"T": "${TMPDIR}"}},
            "web": {"type": "http", "url": "https://mcp.example/${USER}"},
            "hdr": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"H": "${HOME:-no}"}},
        },
    )
    environ = {"HOME": "/home/pat", "USER": "pat", "TMPDIR": "/tmp/pat"}
    found = read_mcp_json(ws, environ)
    assert found is not None
    assert found.servers["run"] == {"command": "/home/pat/bin/srv", "args": ["--user=pat"], "env": {"T": "/tmp/pat"}}
    assert found.servers["hdr"]["headers"] == {"H": "no"}  # never sent off the machine unlisted
    assert "web" in dict(found.skipped) and "USER" in dict(found.skipped)["web"]



def test_expand_env_is_taken_from_the_user_config_only(ws, user, monkeypatch):
    monkeypatch.setenv("DSHD_TEST_API_TOKEN", SECRET)
    write_mcp_json(ws, {"web": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"A": "${DSHD_TEST_API_TOKEN:-unset}"}}})
    (ws / ".dsh" / "config.toml").write_text('[mcp]\nexpandEnv = ["DSHD_TEST_API_TOKEN"]\n')
    editor = {"mcp": {"expandEnv": ["DSHD_TEST_API_TOKEN"]}}
    loaded = load(ws, user, editor, trusted=True)
    assert dict(specs(loaded)["web"].headers) == {"A": "unset"}
    assert {(Path(i.file).name, i.key, i.untrusted) for i in loaded.ignored} == {
        ("config.toml", "mcp.expandEnv", False),
        (EDITOR_SETTINGS, "mcp.expandEnv", False),
    }
    assert all("user config" in i.why for i in loaded.ignored)
    assert loaded.config.mcp.expandEnv == []
    # From the user config it is taken (control).
    user.write_text('[mcp]\nexpandEnv = ["DSHD_TEST_API_TOKEN"]\n')
    loaded = load(ws, user, trusted=True)
    assert dict(specs(loaded)["web"].headers) == {"A": SECRET}
    assert loaded.config.mcp.expandEnv == ["DSHD_TEST_API_TOKEN"]
