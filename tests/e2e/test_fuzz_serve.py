"""`dshd serve` fuzzed from outside: well-formed requests of every method the daemon
serves (every dsh/* request, `initialize` again, LSP and `$/` methods, unknown ones),
mutated (a key dropped, a value of any JSON type, an unknown key, the whole params
replaced, the method renamed, a nested value changed), sent under any request id to ONE
live process. Every request is answered, with a result or an error that is not an
internal error (-32603 would be a bug), the process never dies, and stdout carries only
framed JSON-RPC. It runs twice: on `dshd serve`, and through `dshd connect` on the
workspace's shared daemon.

``DSHD_SERVE_FUZZ_EXAMPLES`` sets the number of requests (default 1500). A long run by
hand (``DSHD_SERVE_FUZZ_EXAMPLES=10000 pytest --timeout=0 tests/e2e/test_fuzz_serve.py``) needs
``--timeout=0``: 10,000 requests take 3-5 minutes on a busy machine, past the 300 s
pytest-timeout gives a test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from dshd_protocol import METHODS
from tests.request_mutations import fuzz_settings, mutated

from tests.shared_daemon_support import Runtime, alive, connect_command

from .conftest import write_workspace
from .raw_client import RawDaemon

EXAMPLES = int(os.environ.get("DSHD_SERVE_FUZZ_EXAMPLES", "1500"))
INVALID_REQUEST, METHOD_NOT_FOUND, INTERNAL_ERROR = -32600, -32601, -32603


class Live:
    """The daemon and the live session's current agent and goal ref (a fuzzed
    ``dsh/session/close`` retires the agent: reopening gives the next one)."""

    def __init__(self, d: RawDaemon, session_id: str) -> None:
        self.d, self.session_id = d, session_id
        self.daemon: int | None = None  # the shared daemon's pid (through `dshd connect`)
        self.refresh()

    def refresh(self) -> None:
        opened = self.d.request("dsh/session/open", {"sessionId": self.session_id}, timeout=30)
        self.agent_id = opened["agentId"]
        goal = opened.get("goal") or {"id": "g-0", "revision": 1}
        self.ref = {"id": goal["id"], "revision": goal["revision"]}


@pytest.fixture(scope="module", params=["serve", "connect"])
def live(request, tmp_path_factory):
    """``serve``: `dshd serve`; ``connect``: the same through `dshd connect` and the
    workspace's shared daemon (on a private runtime folder)."""
    root = write_workspace(tmp_path_factory.mktemp("serve-fuzz") / "ws", plugins=["plan", "goals", "tools"])
    (root / "notes.txt").write_text("one\n")
    runtime = Runtime() if request.param == "connect" else None
    d = RawDaemon(root) if runtime is None else RawDaemon(root, env=runtime.env, command=connect_command())
    try:
        assert "result" in d.initialize()
        session_id = d.request("dsh/session/create", {"title": "fuzzed"})["sessionId"]
        live = Live(d, session_id)
        live.daemon = runtime.daemon_pid() if runtime is not None else None
        yield live
        assert d.shutdown_and_exit() == 0
        assert d.stdout_faults == []
    finally:
        d.kill()
        if runtime is not None:
            runtime.stop()


def templates(live: Live) -> list[tuple[str, dict]]:
    a, ref, root = live.agent_id, live.ref, live.d.workspace.resolve().as_uri()
    return [
        ("dsh/session/create", {"title": "t"}),
        ("dsh/session/list", {}),
        ("dsh/session/open", {"sessionId": live.session_id}),
        ("dsh/session/fork", {"agentId": a, "atSeq": 1}),
        ("dsh/session/close", {"agentId": a}),
        ("dsh/session/events", {"agentId": a, "afterSeq": 0, "limit": 2}),
        ("dsh/agent/prompt", {"agentId": a, "text": "hi"}),
        ("dsh/agent/prompt", {"agentId": a, "text": "/plan"}),
        ("dsh/agent/steer", {"agentId": a, "text": "also"}),
        ("dsh/agent/cancel", {"agentId": a}),
        ("dsh/plan/set", {"agentId": a, "active": True}),
        ("dsh/plan/get", {"agentId": a}),
        ("dsh/plan/history", {"agentId": a}),
        ("dsh/goal/get", {"agentId": a}),
        ("dsh/goal/create", {"agentId": a, "objective": "o", "maxRounds": 1, "maxTokens": 1000}),
        ("dsh/goal/edit", {"agentId": a, "ref": ref, "maxRounds": 2}),
        ("dsh/goal/pause", {"agentId": a, "ref": ref}),
        ("dsh/goal/resume", {"agentId": a, "ref": ref}),
        ("dsh/goal/complete", {"agentId": a, "ref": ref}),
        ("dsh/goal/block", {"agentId": a, "ref": ref, "reason": {"code": "c", "message": "m"}}),
        ("dsh/goal/clear", {"agentId": a, "ref": ref}),
        ("dsh/goal/disarm", {"agentId": a}),
        ("dsh/goal/rounds", {"agentId": a}),
        ("dsh/permission/get", {"agentId": a}),
        ("dsh/permission/set", {"agentId": a, "sandbox": "read-only", "approve": ["write", "exec"]}),
        ("dsh/config/get", {}),
        ("dsh/chat/get", {"agentId": a, "afterSeq": 0, "limit": 200}),
        ("dsh/checkpoint/list", {"agentId": a}),
        ("dsh/checkpoint/diff", {"agentId": a, "seq": 1}),
        ("dsh/checkpoint/restore", {"agentId": a, "seq": 1, "files": True, "conversation": False, "force": False}),
        ("initialize", {"processId": None, "rootUri": root, "capabilities": {}}),
        ("workspace/executeCommand", {"command": "dsh.x", "arguments": [1]}),
        ("textDocument/didOpen", {"textDocument": {"uri": root + "/x.py", "languageId": "python", "version": 1, "text": "x"}}),
        ("$/setTrace", {"value": "verbose"}),
        ("$/cancelRequest", {"id": 1}),
        ("$/x", {"y": [1]}),
        ("dsh/nope", {"agentId": a}),
    ]


def renames(draw, method: str) -> list[str]:
    """Never shutdown or exit: those would end the run."""
    return [
        method + "x", "dsh/" + draw(st.text(max_size=6)), "$/" + draw(st.text(max_size=6)),
        method.upper(), "dsh/goal/changed", "dsh/questions/ask", "initialized", "textDocument/hover",
    ]


def test_every_request_method_has_a_template(live) -> None:
    served = {m for m, spec in METHODS.items() if spec.kind == "request"}
    assert served <= {method for method, _ in templates(live)}


def test_unknown_dollar_request_notification_methods_and_second_initialize_are_refused(live) -> None:
    """A `$/` request the daemon does not serve is -32601 (LSP: a `$/` notification may be
    ignored, a request must be answered), with or without params, and so is a
    notification's method sent with an id (it used to go unanswered: pygls ran it as the
    notification); a second initialize says why it is refused."""
    d = live.d
    for method, params in [("$/x", {}), ("$/x", None), ("foo", None)]:  # no params: it used to be -32603
        assert d.call(method, params, timeout=5)["error"]["code"] == METHOD_NOT_FOUND, (method, params)
    for method, params in [
        ("$/cancelRequest", {"id": 1}),
        ("$/setTrace", {"value": "off"}),
        ("initialized", {}),
        ("textDocument/didOpen", {"textDocument": {"uri": "file:///x.py", "languageId": "python", "version": 1, "text": ""}}),
        ("$/cancelRequest", {"id": [1]}),  # whatever its params hold: no request of that name
        ("textDocument/didOpen", None),
    ]:
        error = d.call(method, params, timeout=5)["error"]
        assert error["code"] == METHOD_NOT_FOUND and "is a notification" in error["message"], (method, error)
    again = d.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})["error"]
    assert again["code"] == INVALID_REQUEST and "initialize was already answered" in again["message"]
    assert "active" in d.request("dsh/plan/get", {"agentId": live.agent_id})


@pytest.mark.slow
@fuzz_settings(EXAMPLES)
@given(data=st.data())
def test_mutated_requests_are_always_answered(live, data) -> None:
    d = live.d
    requests = templates(live)
    # 0 mutations: the request as it is, doing real work (a turn, a goal's round, a fork)
    method, params = data.draw(mutated(requests, renames, st.just(0) | st.integers(1, 3)), label="request")
    event(f"method: {method if method in {m for m, _ in requests} else '(renamed)'}")
    # any id JSON-RPC allows (it also keeps hypothesis from running out of unmutated requests)
    msg_id = data.draw(st.integers(-(2**53), 2**53) | st.text(max_size=8), label="id")
    d.send({"jsonrpc": "2.0", "id": msg_id, "method": method, **({} if params is None else {"params": params})})
    answer = d.response(msg_id, timeout=30)
    if "error" in answer:
        event(f"error {answer['error']['code']}")
        assert answer["error"]["code"] != INTERNAL_ERROR, (method, params, answer)
    else:
        event("result")
    # Stop what a valid request may have started (a turn, a goal's rounds) before the next.
    live.refresh()
    assert d.call("dsh/agent/cancel", {"agentId": live.agent_id}, timeout=30).get("result", "error") is None
    assert d.proc.poll() is None
    assert live.daemon is None or alive(live.daemon)  # the shared daemon lives on too
    assert d.stdout_faults == []
    d.notifications.clear()  # news of earlier requests: not needed
    d.unmatched.clear()
