"""`dshd serve` fuzzed from outside: well-formed requests of every method the daemon
serves (every dsh/* request, `initialize` again, LSP and `$/` methods, unknown ones),
mutated (a key dropped, a value of any JSON type, an unknown key, the whole params
replaced, the method renamed, a nested value changed), sent to ONE live process. Every
request is answered, with a result or an error that is not an internal error (-32603
would be a bug), the process never dies, and stdout carries only framed JSON-RPC.

``DSHD_SERVE_FUZZ_EXAMPLES`` sets the number of requests (default 1500).
"""

from __future__ import annotations

import copy
import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dshd_protocol import METHODS

from .conftest import write_workspace
from .raw_client import RawDaemon

EXAMPLES = int(os.environ.get("DSHD_SERVE_FUZZ_EXAMPLES", "1500"))
INVALID_REQUEST, METHOD_NOT_FOUND, INTERNAL_ERROR = -32600, -32601, -32603

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


class Live:
    """The daemon and the live session's current agent and goal ref (a fuzzed
    ``dsh/session/close`` retires the agent: reopening gives the next one)."""

    def __init__(self, d: RawDaemon, session_id: str) -> None:
        self.d, self.session_id = d, session_id
        self.refresh()

    def refresh(self) -> None:
        opened = self.d.request("dsh/session/open", {"sessionId": self.session_id}, timeout=30)
        self.agent_id = opened["agentId"]
        goal = opened.get("goal") or {"id": "g-0", "revision": 1}
        self.ref = {"id": goal["id"], "revision": goal["revision"]}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = write_workspace(tmp_path_factory.mktemp("serve-fuzz") / "ws", plugins=["plan", "goals", "tools"])
    (root / "notes.txt").write_text("one\n")
    d = RawDaemon(root)
    assert "result" in d.initialize()
    session_id = d.request("dsh/session/create", {"title": "fuzzed"})["sessionId"]
    yield Live(d, session_id)
    assert d.shutdown_and_exit() == 0
    assert d.stdout_faults == []


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
        ("dsh/goal/get", {"agentId": a}),
        ("dsh/goal/create", {"agentId": a, "objective": "o", "maxRounds": 1, "maxTokens": 1000}),
        ("dsh/goal/edit", {"agentId": a, "ref": ref, "maxRounds": 2}),
        ("dsh/goal/pause", {"agentId": a, "ref": ref}),
        ("dsh/goal/resume", {"agentId": a, "ref": ref}),
        ("dsh/goal/complete", {"agentId": a, "ref": ref}),
        ("dsh/goal/block", {"agentId": a, "ref": ref, "reason": {"code": "c", "message": "m"}}),
        ("dsh/goal/clear", {"agentId": a, "ref": ref}),
        ("dsh/goal/disarm", {"agentId": a}),
        ("dsh/permission/get", {"agentId": a}),
        ("dsh/permission/set", {"agentId": a, "sandbox": "read-only", "approve": ["write", "exec"]}),
        ("dsh/config/get", {}),
        ("dsh/chat/get", {"agentId": a, "afterSeq": 0, "limit": 200}),
        ("initialize", {"processId": None, "rootUri": root, "capabilities": {}}),
        ("workspace/executeCommand", {"command": "dsh.x", "arguments": [1]}),
        ("textDocument/didOpen", {"textDocument": {"uri": root + "/x.py", "languageId": "python", "version": 1, "text": "x"}}),
        ("$/setTrace", {"value": "verbose"}),
        ("$/cancelRequest", {"id": 1}),
        ("$/x", {"y": [1]}),
        ("dsh/nope", {"agentId": a}),
    ]


@st.composite
def mutated(draw, live: Live):
    method, params = draw(st.sampled_from(templates(live)))
    params = copy.deepcopy(params)
    count = draw(st.integers(1, 3)) if draw(st.booleans()) else 0  # 0: as it is, doing real work
    event(f"mutations: {count}")
    for _ in range(count):
        how = draw(st.sampled_from(["drop", "retype", "add", "replace", "rename", "nested"]))
        event(f"mutation: {how}")
        keys = sorted(params) if isinstance(params, dict) else []
        if how == "drop" and keys:
            params.pop(draw(st.sampled_from(keys)))
        elif how == "retype" and keys:
            params[draw(st.sampled_from(keys))] = draw(json_values)
        elif how == "add" and isinstance(params, dict):
            params[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
        elif how == "replace":
            params = draw(json_values)
        elif how == "rename":  # never to shutdown or exit: those would end the run
            method = draw(st.sampled_from([
                method + "x", "dsh/" + draw(st.text(max_size=6)), "$/" + draw(st.text(max_size=6)),
                method.upper(), "dsh/goal/changed", "dsh/questions/ask", "initialized", "textDocument/hover",
            ]))
        elif how == "nested" and isinstance(params, dict):
            inner = [v for v in params.values() if isinstance(v, dict) and v]
            if inner:
                target = draw(st.sampled_from(inner))
                target[draw(st.sampled_from(sorted(target)))] = draw(json_values)
    return method, params


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
    ]:
        error = d.call(method, params, timeout=5)["error"]
        assert error["code"] == METHOD_NOT_FOUND and "is a notification" in error["message"], (method, error)
    again = d.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})["error"]
    assert again["code"] == INVALID_REQUEST and "initialize was already answered" in again["message"]
    assert "active" in d.request("dsh/plan/get", {"agentId": live.agent_id})


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_mutated_requests_are_always_answered(live, data) -> None:
    d = live.d
    method, params = data.draw(mutated(live), label="request")
    event(f"method: {method if method in {m for m, _ in templates(live)} else '(renamed)'}")
    answer = d.call(method, params, timeout=30)
    if "error" in answer:
        event(f"error {answer['error']['code']}")
        assert answer["error"]["code"] != INTERNAL_ERROR, (method, params, answer)
    else:
        event("result")
    # Stop what a valid request may have started (a turn, a goal's rounds) before the next.
    live.refresh()
    assert d.call("dsh/agent/cancel", {"agentId": live.agent_id}, timeout=30).get("result", "error") is None
    assert d.proc.poll() is None
    assert d.stdout_faults == []
    d.notifications.clear()  # news of earlier requests: not needed
    d.unmatched.clear()
