"""A request whose ``id`` is ``null`` is answered -32600 Invalid Request with ``"id": null``
(docs/protocol.md: an id that is not a string or a number), on both doors of real
daemons: `dshd serve` (dsh over stdio), the shared daemon through `dshd connect`, and
`dshd acp --stdio`. The daemon runs the request's method for nobody, and goes on serving."""

from __future__ import annotations

import pytest

from tests.acp_door.raw import RawAcp
from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon
from tests.shared_daemon_support import Runtime, connect_command

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("via", ["serve", "connect"])
def test_a_dsh_request_with_a_null_id_is_an_invalid_request(tmp_path, via):
    workspace = write_workspace(tmp_path / "ws")
    runtime = Runtime() if via == "connect" else None
    daemon = RawDaemon(workspace, env=runtime.env if runtime else None, command=connect_command() if runtime else None)
    try:
        assert "result" in daemon.initialize()
        # Before: the request ran and its answer went out with "id": null (a session made for nobody).
        daemon.send({"jsonrpc": "2.0", "id": None, "method": "dsh/session/create", "params": {}})
        answer = daemon.next_response()
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        assert "null" in answer["error"]["message"]
        assert daemon.request("dsh/session/list", {})["sessions"] == []  # nothing was created
        assert daemon.proc.poll() is None
    finally:
        daemon.proc.stdin.close()
        daemon.proc.wait(10)
        if runtime is not None:
            runtime.stop()


def test_an_acp_request_with_a_null_id_is_an_invalid_request(tmp_path):
    workspace = write_workspace(tmp_path / "ws")
    raw = RawAcp(workspace, tmp_path / "acp.stderr")
    try:
        assert "result" in raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": None, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
        answer = raw.next()
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        assert raw.request("session/list", {})["result"] == {"sessions": []}  # nothing was created
        assert raw.proc.poll() is None
    finally:
        raw.close()
    assert raw.stdout_faults == []
