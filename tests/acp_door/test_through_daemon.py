"""`dshd acp` as a forwarder: an official ACP SDK client (Python and TypeScript) through the
workspace's shared daemon, and a dsh client (`dshd connect`) on the same daemon and the
same live session: a turn prompted over ACP streams to the dsh client; one daemon serves
both. Real processes, a private $XDG_RUNTIME_DIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp_door.clients import CLIENTS
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import Runtime, connect_command, daemons_of

pytestmark = pytest.mark.slow


@pytest.fixture
def runtime():
    r = Runtime()
    yield r
    r.stop()


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_an_acp_client_and_a_dsh_client_share_one_daemon_and_one_live_session(
    tmp_path: Path, runtime: Runtime, kind: str
) -> None:
    workspace = write_workspace(tmp_path / "ws", replies=[{"text": "hello from the shared daemon"}])
    acp_client = CLIENTS[kind](workspace, tmp_path / "acp.stderr")
    acp_client.shared_env = runtime.env
    await acp_client.start()
    dsh = None
    try:
        await acp_client.initialize()
        session_id = (await acp_client.new_session())["sessionId"]
        pid = runtime.daemon_pid()
        dsh = RawDaemon(workspace, env=runtime.env, command=connect_command())
        assert "result" in dsh.initialize()
        opened = dsh.request("dsh/session/open", {"sessionId": session_id})  # the live session: no session-locked
        assert opened["sessionId"] == session_id
        assert runtime.daemon_pids() == [pid] and daemons_of(workspace) == [pid]
        answer = await acp_client.prompt(session_id, "hi")
        assert answer["stopReason"] == "end_turn"
        chunks = [u["update"] for u in acp_client.updates if u["update"].get("sessionUpdate") == "agent_message_chunk"]
        assert "".join(c["content"]["text"] for c in chunks) == "hello from the shared daemon"
        dsh.request("dsh/session/list", {})  # what the daemon sent the dsh client so far is read
        seen = [n["params"]["event"] for n in dsh.notifications if n["method"] == "dsh/session/event"]
        said = [e["data"]["text"] for e in seen if e["type"] == "assistant/message"]
        assert said == ["hello from the shared daemon"], seen
        assert dsh.shutdown_and_exit() == 0
    finally:
        if dsh is not None:
            dsh.kill()
        await acp_client.close()
