"""Protocol edges of `dshd serve`, over raw stdio (tests/e2e/raw_client.py).

A second ``initialize`` is -32600 "already initialized" whatever its params hold: odd ones
(that fail to structure, which before initialize is -32602) included.
"""

from __future__ import annotations

import pytest

import os

from tests.e2e.conftest import write_workspace
from tests.e2e.raw_client import RawDaemon

INVALID_REQUEST, INVALID_PARAMS = -32600, -32602

ODD_PARAMS = [
    None,
    [],
    [1, 2],
    "initialize",
    7,
    {},
    {"processId": "not a number", "rootUri": 5, "capabilities": []},
    {"processId": None, "rootUri": None, "capabilities": {"experimental": {"dsh": "yes"}}},
    {"processId": None, "rootUri": "file:///elsewhere", "capabilities": {}, "initializationOptions": {"config": 3}},
    {"capabilities": {"general": {"positionEncodings": [None]}}, "trace": "loud"},
]


@pytest.mark.slow
def test_a_second_initialize_is_already_initialized_whatever_its_params(tmp_path) -> None:
    root = write_workspace(tmp_path / "ws")
    # Control: the same odd params before initialize do fail to structure (-32602), so the
    # -32600 below comes from the "already initialized" rule, not from the params.
    with RawDaemon(root) as fresh:
        odd = fresh.call("initialize", {"processId": "not a number", "rootUri": 5, "capabilities": []})
        assert odd["error"]["code"] == INVALID_PARAMS, odd
        assert "result" in fresh.initialize()  # and a good first one still works after it
        assert fresh.shutdown_and_exit() == 0

    with RawDaemon(root) as d:
        first = d.initialize()
        assert "result" in first and first["result"]["capabilities"]["experimental"]["dsh"]["version"] == 1
        good_again = {"processId": os.getpid(), "rootUri": root.resolve().as_uri(), "capabilities": {}}
        for params in [good_again, *ODD_PARAMS]:
            answer = d.call("initialize", params, timeout=10)
            assert "result" not in answer, (params, answer)
            assert answer["error"]["code"] == INVALID_REQUEST, (params, answer)
            assert "already initialized" in answer["error"]["message"], (params, answer)
        # Under any id JSON-RPC allows, and the daemon still serves its workspace.
        for msg_id in ["init-again", 0, -(2**53)]:
            d.send({"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": {"odd": True}})
            assert d.response(msg_id, timeout=10)["error"]["code"] == INVALID_REQUEST
        assert d.request("dsh/session/list", {})["sessions"] == []
        assert d.proc.poll() is None and d.stdout_faults == []
        assert d.shutdown_and_exit() == 0
