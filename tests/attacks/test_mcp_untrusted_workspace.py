"""A workspace's MCP servers in a folder the person has not trusted: the REAL server from npm
(tests/mcp/setup.sh) named by a cloned repository's `.mcp.json` and `.dsh/config.toml`,
under the real `dshd serve`. Untrusted, neither starts (no process) and both are named as
ignored; positive control in the same test: the same files in a trusted folder start both."""

from __future__ import annotations

import asyncio

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.e2e.test_mcp_real import gone, installed, new_session, prompt, shown  # noqa: F401 - installed: a fixture
from tests.mcp_real_support import everything_argv, mcp_json, new_mark, server_processes, server_toml
from tests.sandbox_support import needs_sandbox

pytestmark = [pytest.mark.mcp, needs_sandbox]


async def test_an_untrusted_workspace_starts_none_of_its_servers(daemons, tmp_path):
    root = daemons.root
    from_json, from_toml = new_mark(), new_mark()
    write_workspace(
        root, replies=[{"text": "hi"}, {"text": "hi again"}], plugins=["mcp"],
        extra_config="\n" + server_toml("repo_clock", everything_argv(from_toml), from_toml),
    )  # fmt: skip
    (root / ".mcp.json").write_text(mcp_json({"repo_everything": (everything_argv(from_json), from_json)}))

    client = await daemons.start()
    sid, agent = await new_session(client)
    await prompt(client, agent)
    await asyncio.sleep(0.5)  # time enough for a server that was (wrongly) started to show
    assert server_processes(from_json) == [] and server_processes(from_toml) == []
    [header] = of_type(read_log(root, sid), "request/header")
    assert not any(t.startswith("mcp__") for t in header["data"]["tools"])
    # Named as ignored: in the config report and in the message the person is shown.
    report = await client.request("dsh/config/get", {})
    assert report["trusted"] is False
    ignored = " ".join(f"{i['file']} {i['key']}" for i in report["ignored"])
    assert "repo_everything" in ignored and ".mcp.json" in ignored and "repo_clock" in ignored, report["ignored"]
    assert any("repo_everything" in m and "repo_clock" in m for m in shown(client)), shown(client)
    await client.stop()

    # The control: the same files in a trusted folder start both servers.
    daemons.trusted = True
    trusted = await daemons.start()
    sid, agent = await new_session(trusted)
    await prompt(trusted, agent)
    assert server_processes(from_json) and server_processes(from_toml)
    [header] = of_type(read_log(root, sid), "request/header")
    assert "mcp__repo_everything__echo" in header["data"]["tools"] and "mcp__repo_clock__echo" in header["data"]["tools"]
    await trusted.stop()
    assert await gone(from_json) == [] and await gone(from_toml) == []
