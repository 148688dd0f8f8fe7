"""`dshd acp` fuzzed from outside: well-formed requests of every ACP method dshd serves,
mutated (a key dropped, a value of any JSON type, an unknown key, the whole params
replaced, the method renamed), sent to one live process. Every request is answered, with
a result or an error that is not an internal error (-32603 would be a bug), the process
never dies, and stdout carries nothing but JSON-RPC lines. It runs twice: on
`dshd acp --stdio`, and through `dshd acp` on the workspace's shared daemon.

``DSHD_ACP_FUZZ_EXAMPLES`` sets the number of requests (default 1500). A long run by
hand (``DSHD_ACP_FUZZ_EXAMPLES=10000 pytest --timeout=0 tests/acp_door/test_fuzz.py``) needs
``--timeout=0``: 10,000 requests take 3-5 minutes on a busy machine, past the 300 s
pytest-timeout gives a test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.acp_door.raw import RawAcp
from tests.e2e.conftest import write_workspace
from tests.request_mutations import fuzz_settings, mutated
from tests.shared_daemon_support import Runtime

EXAMPLES = int(os.environ.get("DSHD_ACP_FUZZ_EXAMPLES", "1500"))
INTERNAL_ERROR = -32603


@pytest.fixture(scope="module", params=["stdio", "shared"])
def agent(request, tmp_path_factory):
    """``stdio``: `dshd acp --stdio`; ``shared``: `dshd acp`, the forwarder to the
    workspace's shared daemon (on a private runtime folder)."""
    root = write_workspace(tmp_path_factory.mktemp("acp-fuzz") / "ws", plugins=["plan", "goals", "tools"])
    (root / "notes.txt").write_text("one\n")
    runtime = Runtime() if request.param == "shared" else None
    raw = RawAcp(root, root.parent / "dshd-acp.stderr", shared_env=runtime.env if runtime else None)
    try:
        raw.initialize()
        sid = raw.request("session/new", {"cwd": str(root), "mcpServers": []})["result"]["sessionId"]
        yield raw, root, sid
        assert raw.close() == 0
        assert raw.stdout_faults == []
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()
        if runtime is not None:
            runtime.stop()


def templates(root: str, sid: str) -> list[tuple[str, dict]]:
    ref = {"id": "g-0", "revision": 1}
    return [
        ("session/new", {"cwd": root, "mcpServers": []}),
        ("session/load", {"cwd": root, "sessionId": sid, "mcpServers": []}),
        ("session/list", {"cwd": root}),
        ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/prompt", {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": "file:///x", "text": "t"}}]}),
        ("session/set_mode", {"sessionId": sid, "modeId": "plan"}),
        ("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "default"}),
        ("_session/goal", {"sessionId": sid, "action": "set", "objective": "o", "maxRounds": 1}),
        ("_session/goal", {"sessionId": sid, "action": "block", "ref": ref, "reason": {"code": "c", "message": "m"}}),
        ("_session/goal", {"sessionId": sid, "action": "edit", "ref": ref, "objective": "p"}),
        ("initialize", {"protocolVersion": 1}),
    ]


def renames(draw, method: str) -> list[str]:
    return [method + "x", "session/" + draw(st.text(max_size=6)), "_" + method, "$/x"]


@pytest.mark.slow
@fuzz_settings(EXAMPLES)
@given(data=st.data())
def test_mutated_requests_are_always_answered(agent, data):
    raw, root, sid = agent
    # 0 mutations: the request as it is, doing real work (a turn, a goal, a mode change)
    method, params = data.draw(mutated(templates(str(root), sid), renames, st.just(0) | st.integers(1, 3)), label="request")
    event(f"method: {method}")
    # any id JSON-RPC allows (it also keeps hypothesis from running out of unmutated requests)
    msg_id = data.draw(st.integers(-(2**53), 2**53) | st.text(max_size=8), label="id")
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    raw.send(message)
    answer = raw.answer(msg_id, timeout=30)
    # Stop what a valid request may have started (a turn, a goal's rounds) before the next.
    raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    if "error" in answer:
        event(f"error {answer['error']['code']}")
        assert answer["error"]["code"] != INTERNAL_ERROR, (method, params, answer)
    else:
        event("result")
    assert raw.proc.poll() is None
    raw.received.clear()  # updates of earlier requests: not needed
