"""Bad bytes and bad params on the wire never stop the daemon (SPEC 6).

1. Garbage on stdin (random bytes, broken Content-Length headers, bodies that are not
   JSON or not JSON-RPC): each gets the JSON-RPC answer it deserves (-32700 / -32600 /
   -32601 / -32602) or none when no frame can be delimited, and the next request is
   answered. Sent with our own framing (tests/e2e/raw_client.py), not pytest-lsp; to
   `dshd serve` and through `dshd connect` (pipes handed over, and bytes copied).
2. A hypothesis property over thousands of malformed params for every request method,
   against ONE daemon: it never crashes, never writes a session log, and answers
   -32602 with ``data.kind == "invalid-params"`` naming exactly the broken field.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dshd_protocol import METHODS
from dshd_protocol.strategies import malformed_wire

from tests.shared_daemon_support import Runtime, connect_command

from .conftest import write_workspace
from .raw_client import RawDaemon, log_events, log_path

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def still_serving(d: RawDaemon) -> None:
    """A request after the garbage is answered, and nothing stray came before it."""
    assert "sessions" in d.request("dsh/session/list", {}, timeout=5)
    assert d.unmatched == [], d.unmatched
    assert d.proc.poll() is None


def expect_error(d: RawDaemon, code: int, msg_id: Any) -> dict:
    reply = d.next_response(timeout=5)
    assert reply.get("id", "absent") == msg_id and reply["error"]["code"] == code, reply
    return reply["error"]


REQUEST = json.dumps({"jsonrpc": "2.0", "id": "lost", "method": "dsh/session/list", "params": {}}).encode()

# (what, bytes, expected (code, id) answer or None when no frame can be delimited)
GARBAGE: list[tuple[str, bytes, tuple[int, Any] | None]] = [
    ("one random byte", random.Random(1).randbytes(1), None),
    ("random bytes", random.Random(2).randbytes(300), None),
    ("lots of random bytes", random.Random(3).randbytes(20_000), None),
    ("random text lines", b"\r\n".join(random.Random(4).randbytes(40).hex().encode() for _ in range(5)), None),
    ("blank lines", b"\r\n\r\n\n\n", None),
    ("headers without Content-Length", b"Content-Type: application/json\r\nX-Foo: bar\r\n\r\n", None),
    ("a 100 kB header line", b"X-Junk: " + b"a" * 100_000 + b"\r\n\r\n", None),
    ("non-numeric Content-Length", b"Content-Length: abc\r\n\r\n" + REQUEST, None),
    ("negative Content-Length", b"Content-Length: -5\r\n\r\n" + REQUEST, None),
    ("Content-Length over the limit", b"Content-Length: 99999999999999\r\n\r\n" + REQUEST, None),
    ("empty Content-Length", b"Content-Length:\r\n\r\n" + REQUEST, None),
    ("Content-Length shorter than the body", b"Content-Length: 10\r\n\r\n" + REQUEST, (PARSE_ERROR, None)),
    ("non-JSON body", frame(b"hello, daemon"), (PARSE_ERROR, None)),
    ("truncated JSON body", frame(b'{"jsonrpc": "2.0", "id": 3, "method": '), (PARSE_ERROR, None)),
    ("empty body", frame(b""), (PARSE_ERROR, None)),
    ("NaN id (not JSON)", frame(b'{"jsonrpc": "2.0", "id": NaN, "method": "dsh/session/list", "params": {}}'), (PARSE_ERROR, None)),
    ("id 1e999", frame(b'{"jsonrpc": "2.0", "id": 1e999, "method": "dsh/session/list", "params": {}}'), (PARSE_ERROR, None)),
    ("Infinity in params", frame(b'{"jsonrpc": "2.0", "id": 16, "method": "dsh/session/events", "params": {"agentId": "a", "limit": Infinity}}'), (PARSE_ERROR, None)),
    ("invalid UTF-8 body", frame(b"\xff\xfe\xfd\x00"), (PARSE_ERROR, None)),
    ("JSON array", frame(b"[1, 2, 3]"), (INVALID_REQUEST, None)),
    ("JSON nested 100000 deep", frame(b"[" * 100_000 + b"]" * 100_000), (PARSE_ERROR, None)),
    ("params nested 900 deep", frame(b'{"jsonrpc": "2.0", "id": 15, "method": "dsh/session/create", "params": {"title": '
                                     + b"[" * 900 + b"]" * 900 + b"}}"), (INVALID_PARAMS, 15)),
    ("JSON-RPC batch", frame(b"[" + REQUEST + b"]"), (INVALID_REQUEST, None)),
    ("JSON string", frame(b'"dsh/session/list"'), (INVALID_REQUEST, None)),
    ("JSON null", frame(b"null"), (INVALID_REQUEST, None)),
    ("empty object", frame(b"{}"), (INVALID_REQUEST, None)),
    ("no jsonrpc member", frame(b'{"id": 7, "method": "dsh/session/list", "params": {}}'), (INVALID_REQUEST, 7)),
    ("jsonrpc 1.0", frame(b'{"jsonrpc": "1.0", "id": 8, "method": "dsh/session/list"}'), (INVALID_REQUEST, 8)),
    ("method not a string", frame(b'{"jsonrpc": "2.0", "id": 9, "method": 5}'), (INVALID_REQUEST, 9)),
    ("id an object", frame(b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "dsh/session/list"}'), (INVALID_REQUEST, None)),
    ("id a boolean", frame(b'{"jsonrpc": "2.0", "id": true, "method": "dsh/session/list"}'), (INVALID_REQUEST, None)),
    ("unknown method", frame(b'{"jsonrpc": "2.0", "id": 10, "method": "dsh/nope", "params": {}}'), (METHOD_NOT_FOUND, 10)),
    ("params a string", frame(b'{"jsonrpc": "2.0", "id": 11, "method": "dsh/session/list", "params": "x"}'), (INVALID_PARAMS, 11)),
    ("params an array", frame(b'{"jsonrpc": "2.0", "id": 12, "method": "dsh/session/create", "params": [1]}'), (INVALID_PARAMS, 12)),
    ("a notification's method as a request", frame(b'{"jsonrpc": "2.0", "id": 13, "method": "dsh/goal/changed", "params": {}}'), (METHOD_NOT_FOUND, 13)),
    ("a server request's method from the client", frame(b'{"jsonrpc": "2.0", "id": 14, "method": "dsh/questions/ask", "params": {}}'), (METHOD_NOT_FOUND, 14)),
    ("notification of an unknown method", frame(b'{"jsonrpc": "2.0", "method": "dsh/nope"}'), None),
    ("a request method as a notification, bad params", frame(b'{"jsonrpc": "2.0", "method": "dsh/plan/set", "params": {"active": "x"}}'), None),
    ("response to nothing", frame(b'{"jsonrpc": "2.0", "id": 4242, "result": {"answers": []}}'), None),
    ("cancel of nothing", frame(b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 777}}'), None),
]


@pytest.fixture(params=["serve", "connect", "connect-copy"])
def door(request):
    """How the garbage reaches the daemon: `dshd serve`; `dshd connect` handing its pipes
    to the shared daemon; `dshd connect` copying every byte itself."""
    runtime = None if request.param == "serve" else Runtime()
    if request.param == "connect-copy":
        runtime.extra["DSHD_CONNECT_COPY"] = "1"

    def start(workspace: Path) -> RawDaemon:
        if runtime is None:
            return RawDaemon(workspace)
        return RawDaemon(workspace, env=runtime.env, command=connect_command())

    yield start
    if runtime is not None:
        runtime.stop()


def test_garbage_on_the_wire_is_answered_or_skipped(workspace: Path, door) -> None:
    write_workspace(workspace, replies=[{"text": "still here"}])
    with door(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {"title": "robust"})
        size = log_path(workspace, created["sessionId"]).stat().st_size
        for what, data, answer in GARBAGE:
            d.send_bytes(data)
            if answer is not None:
                error = expect_error(d, *answer)
                if answer[0] == INVALID_PARAMS:
                    assert error["data"]["kind"] == "invalid-params" and error["data"]["field"] in ("params", "title"), what
            try:
                still_serving(d)
            except Exception as exc:  # name the case that broke it
                raise AssertionError(f"after {what}: {exc!r}") from exc
        # Nothing was written by any of it, and the session still works.
        assert log_path(workspace, created["sessionId"]).stat().st_size == size
        result = d.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "are you there"})
        assert result == {"turn": 1, "stopReason": "end-turn"}
        assert log_events(workspace, created["sessionId"])[-2]["data"]["text"] == "still here"
        assert d.shutdown_and_exit() == 0
    assert d.stdout_faults == []


def test_garbage_split_across_writes_and_glued_to_requests(workspace: Path, door) -> None:
    """Frames cut at odd places and glued together: each whole frame is answered."""
    with door(workspace) as d:
        d.initialize()
        requests = b"".join(
            frame(json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "dsh/session/list", "params": {}}).encode())
            for i in range(5)
        )
        for start in range(0, len(requests), 7):  # 7-byte writes: headers and bodies cut anywhere
            d.send_bytes(requests[start : start + 7])
        assert [d.response(100 + i)["id"] for i in range(5)] == [100, 101, 102, 103, 104]
        # Garbage immediately followed by a frame (no newline in between).
        d.send_bytes(b"\x00garbage\x7f" + frame(REQUEST.replace(b'"lost"', b'"glued"')))
        assert "result" in d.response("glued", timeout=5)
        assert d.shutdown_and_exit() == 0
    assert d.stdout_faults == []


def test_big_unicode_pipelined_and_cancelled_requests(workspace: Path) -> None:
    """A 3.5 MB non-BMP text (Content-Length counts bytes, not characters), 300 requests
    in one write, and a $/cancelRequest of a running prompt."""
    write_workspace(workspace, replies=[{"text": "slow", "delayMs": 60_000}, {"text": "ok"}])
    with RawDaemon(workspace) as d:
        d.initialize()
        created = d.request("dsh/session/create", {"title": "Ünïcødé 🌍"})
        agent, sid = created["agentId"], created["sessionId"]

        d.send({"jsonrpc": "2.0", "id": "p1", "method": "dsh/agent/prompt", "params": {"agentId": agent, "text": "slow"}})
        deadline = time.monotonic() + 10
        while not any(e["type"] == "request/header" for e in log_events(workspace, sid)):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        d.notify("$/cancelRequest", {"id": "p1"})
        reply = d.response("p1", timeout=5)  # answered, not left hanging
        assert reply.get("result") == {"turn": 1, "stopReason": "cancelled"} or reply["error"]["code"] == -32800, reply
        assert log_events(workspace, sid)[-1]["data"] == {"turn": 1, "stopReason": "cancelled"}

        big = "é🌍\u0301" * 500_000
        assert d.request("dsh/agent/prompt", {"agentId": agent, "text": big}, timeout=30) == {"turn": 2, "stopReason": "end-turn"}
        texts = [e["data"]["text"] for e in log_events(workspace, sid) if e["type"] == "user/message"]
        assert texts == ["slow", big]
        assert d.request("dsh/session/list", {})["sessions"][0]["title"] == "Ünïcødé 🌍"

        requests = b"".join(
            frame(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "dsh/plan/get", "params": {"agentId": agent}}).encode())
            for i in range(300)
        )
        d.send_bytes(requests)
        replies = [d.next_response(timeout=10) for _ in range(300)]
        assert sorted(r["id"] for r in replies) == list(range(1000, 1300))
        assert all(r["result"] == {"active": False} for r in replies)
        assert d.shutdown_and_exit() == 0
    assert d.stdout_faults == []


# ---- the property -----------------------------------------------------------------------

REQUEST_METHODS = sorted(m for m, spec in METHODS.items() if spec.kind == "request")


@pytest.fixture(scope="module")
def live_daemon(tmp_path_factory):
    """One daemon for the whole property: a live session with a goal that is blocked
    (its one round ran), so nothing runs by itself and every log write would be ours."""
    root = write_workspace(tmp_path_factory.mktemp("fuzz") / "ws")
    d = RawDaemon(root)
    d.initialize()
    first = d.request("dsh/session/create", {"title": "fuzzed"})
    second = d.request("dsh/session/create", {})
    d.request("dsh/goal/create", {"agentId": first["agentId"], "objective": "o", "maxRounds": 1})
    for _ in range(200):
        goal = d.request("dsh/goal/get", {"agentId": first["agentId"]})
        if goal["phase"] == "blocked":
            break
        time.sleep(0.02)
    assert goal["phase"] == "blocked"
    yield d, root, first, second, goal
    assert d.shutdown_and_exit() == 0
    assert d.stdout_faults == []


def _substitute_live_ids(params: Any, field: str, live: dict) -> Any:
    """Put the live agent/session/ref where the value is well formed, so that a daemon
    that accepted the broken params would really act (and write)."""
    if not isinstance(params, dict):
        return params
    for key, value in live.items():
        if key in params and not (field == key or field.startswith(key + ".") or field.startswith(key + "[")):
            params[key] = value
    return params


@settings(
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
)
@pytest.mark.slow
@given(data=st.data())
def test_malformed_params_are_invalid_params_naming_the_field(live_daemon, data) -> None:
    d, root, first, second, goal = live_daemon
    method = data.draw(st.sampled_from(REQUEST_METHODS), label="method")
    params, fault = data.draw(malformed_wire(METHODS[method].params), label="params")
    live = {"agentId": first["agentId"], "sessionId": first["sessionId"], "ref": {"id": goal["id"], "revision": goal["revision"]}}
    params = _substitute_live_ids(params, fault.field, live)
    event(f"fault: {fault.kind}")
    event(f"method: {method}")
    logs = sorted((root / ".dsh" / "sessions").glob("*/log.jsonl"))
    sizes = [p.stat().st_size for p in logs]

    reply = d.call(method, params, timeout=10)

    assert "error" in reply, (method, params, fault, reply)
    error = reply["error"]
    assert error["code"] == INVALID_PARAMS, (method, params, fault, error)
    assert error["data"]["kind"] == "invalid-params"
    assert error["data"]["field"] == (fault.field or "params"), (method, params, fault, error)
    assert d.proc.poll() is None
    assert sorted((root / ".dsh" / "sessions").glob("*/log.jsonl")) == logs  # no new session
    assert [p.stat().st_size for p in logs] == sizes
