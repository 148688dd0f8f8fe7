"""The real daemon speaks the protocol: one scenario over stdio touches every method, and
every message the daemon sends (results, errors, notifications, server requests) must
validate against the checked-in JSON Schema and read back with the strict codec.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dshd_protocol import ERROR_CODES, METHODS, PROTOCOL_VERSION, from_wire, parse_params
from dshd_protocol import types as T
from dshd_protocol.schema import load_schema
from dshd_protocol.strategies import malformed_wire
from tests.e2e.raw_client import RawDaemon

SCHEMA = load_schema()
PLAN = "# Plan: cache the parser\n\n1. Add an LRU.\n2. Measure.\n"


def _validator(subschema: dict) -> Draft202012Validator:
    return Draft202012Validator({"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], **subschema})


ERROR_DATA = _validator({"$ref": "#/$defs/ErrorData"})


class Checked:
    """A RawDaemon whose every incoming dsh/* message is checked against the protocol."""

    def __init__(self, daemon: RawDaemon) -> None:
        self.d = daemon
        self.seen: set[str] = set()
        self.asked: list[dict] = []
        self.permits: list[dict] = []
        daemon.answer = self._answer
        daemon.permit = self._permit

    def _answer(self, params: dict) -> dict:
        self._check_params("dsh/questions/ask", params)
        self.asked.append(params)
        return {"answers": [{"id": q["id"], "choice": "approve"} for q in params["questions"]]}

    def _permit(self, params: dict) -> dict:
        self._check_params("dsh/permission/ask", params)
        self.permits.append(params)
        result = {"outcome": "allow-once"}
        _validator(SCHEMA["methods"]["dsh/permission/ask"]["result"]).validate(result)
        return result

    def _check_params(self, method: str, params: Any) -> None:
        _validator(SCHEMA["methods"][method]["params"]).validate(params)
        parse_params(method, params)
        self.seen.add(method)

    def request(self, method: str, params: dict) -> Any:
        result = self.d.request(method, params, timeout=30)
        _validator(SCHEMA["methods"][method]["result"]).validate(result)
        from_wire(METHODS[method].result, result)
        self.seen.add(method)
        return result

    def error(self, method: str, params: Any) -> dict:
        reply = self.d.call(method, params, timeout=30)
        assert "error" in reply, (method, reply)
        error = reply["error"]
        ERROR_DATA.validate(error["data"])
        assert error["code"] == ERROR_CODES[error["data"]["kind"]], error
        return error

    def check_notifications(self) -> list[dict]:
        for message in self.d.notifications:
            if message["method"].startswith("dsh/"):
                self._check_params(message["method"], message["params"])
        return [m for m in self.d.notifications if m["method"].startswith("dsh/")]

    def wait_for_goal_op(self, op: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.d.request("dsh/plan/get", {"agentId": self.agent}, timeout=30)  # pumps the inbox
            ops = [n["params"]["op"] for n in self.d.notifications if n["method"] == "dsh/goal/changed"]
            if ops.count(op) >= count:
                return
            time.sleep(0.05)
        raise TimeoutError(f"no goal/changed {op!r} x{count}; saw {ops}")

    agent: str = ""


def _workspace(root: Path, replies: list[dict]) -> Path:
    (root / ".dsh").mkdir(parents=True)
    (root / "script.json").write_text(json.dumps({"replies": replies}))
    (root / ".dsh" / "config.toml").write_text(
        textwrap.dedent(
            """\
            plugins = ["plan", "goals", "tools", "checkpoints"]

            [plan]
            section = "Plan first."

            [model]
            provider = "scripted"
            script = "script.json"
            """
        )
    )
    return root


@pytest.mark.timeout(180)
def test_every_message_of_a_whole_session_fits_the_protocol(tmp_path):
    workspace = _workspace(
        tmp_path,
        [
            {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN}}]},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n"}}]},
            {"text": "Starting."},
        ],
    )
    with RawDaemon(workspace) as daemon:
        reply = daemon.initialize(questions=True, permissions=True)
        assert "result" in reply, reply
        server_caps = reply["result"]["capabilities"]["experimental"]["dsh"]
        _validator({"$ref": "#/$defs/DshServerCapabilities"}).validate(server_caps)
        assert from_wire(T.DshServerCapabilities, server_caps).version == PROTOCOL_VERSION
        c = Checked(daemon)

        created = c.request("dsh/session/create", {"title": "conformance"})
        c.agent = agent = created["agentId"]
        session_id = created["sessionId"]
        assert c.request("dsh/session/list", {})["sessions"][0]["sessionId"] == session_id
        config = c.request("dsh/config/get", {})
        assert config["trusted"] is False and config["ignored"] == [] and "tools" in config["effective"]
        # the chat: its first item, and dsh/chat/item upserts for everything after
        assert [i["kind"] for i in c.request("dsh/chat/get", {"agentId": agent})["items"]] == ["session"]

        # plan mode, and a reviewed plan (server request answered with approve)
        assert c.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})["stopReason"] == "command"
        assert c.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
        assert c.request("dsh/plan/set", {"agentId": agent, "active": True})["outcome"] == "noop"
        prompt = c.request("dsh/agent/prompt", {"agentId": agent, "text": "Cache the parser."})
        assert prompt["turn"] == 1
        assert len(c.asked) == 1
        assert len(c.permits) == 1 and (workspace / "notes.md").read_text() == "# Notes\n"
        # checkpoints: the one taken before the writing step, its diff, and the restore
        [checkpoint] = c.request("dsh/checkpoint/list", {"agentId": agent})["checkpoints"]
        assert checkpoint["files"] == ["notes.md"]
        [change] = c.request("dsh/checkpoint/diff", {"agentId": agent, "seq": checkpoint["seq"]})["files"]
        assert (change["path"], change["status"], change["changedByPerson"]) == ("notes.md", "deleted", False)
        restored = c.request("dsh/checkpoint/restore", {"agentId": agent, "seq": checkpoint["seq"]})
        assert restored == {"restored": ["notes.md"], "forced": []} and not (workspace / "notes.md").exists()
        policy = c.request("dsh/permission/get", {"agentId": agent})
        assert policy == {"sandbox": "workspace-write", "network": False, "approve": ["write", "exec"]}
        assert c.request("dsh/permission/set", {"agentId": agent, "sandbox": "read-only"})["sandbox"] == "read-only"
        assert c.error("dsh/permission/set", {"agentId": agent, "approve": ["write", "write"]})["data"]["field"] == "approve"
        assert c.request("dsh/agent/steer", {"agentId": agent, "text": "and measure"}) == {"queued": False}
        c.request("dsh/agent/cancel", {"agentId": agent})

        # goals: create (runs round 1 on an exhausted script), the budget blocks it
        assert c.request("dsh/goal/get", {"agentId": agent}) is None
        goal = c.request("dsh/goal/create", {"agentId": agent, "objective": "Parse faster", "maxRounds": 1})
        c.wait_for_goal_op("block")
        goal = c.request("dsh/goal/get", {"agentId": agent})
        assert goal["phase"] == "blocked"
        assert [r["round"] for r in c.request("dsh/goal/rounds", {"agentId": agent})["rounds"]] == [1]
        [plan] = c.request("dsh/plan/history", {"agentId": agent})["plans"]  # the one reviewed above
        assert (plan["title"], plan["markdown"], plan["outcome"]) == ("Plan: cache the parser", PLAN, "approved")
        ref = {"id": goal["id"], "revision": goal["revision"]}
        goal = c.request("dsh/goal/edit", {"agentId": agent, "ref": ref, "maxRounds": 5})
        ref = {"id": goal["id"], "revision": goal["revision"]}
        goal = c.request("dsh/goal/complete", {"agentId": agent, "ref": ref})
        ref = {"id": goal["id"], "revision": goal["revision"]}
        cleared = c.request("dsh/goal/clear", {"agentId": agent, "ref": ref})
        assert cleared["ref"]["revision"] == ref["revision"] + 1

        goal = c.request("dsh/goal/create", {"agentId": agent, "objective": "Again", "maxRounds": 50})
        c.request("dsh/goal/disarm", {"agentId": agent})
        c.wait_for_goal_op("disarm")
        goal = c.request("dsh/goal/get", {"agentId": agent})
        ref = {"id": goal["id"], "revision": goal["revision"]}
        goal = c.request("dsh/goal/pause", {"agentId": agent, "ref": ref})
        ref = {"id": goal["id"], "revision": goal["revision"]}
        goal = c.request("dsh/goal/resume", {"agentId": agent, "ref": ref})
        c.request("dsh/goal/disarm", {"agentId": agent})
        goal = c.request("dsh/goal/get", {"agentId": agent})
        ref = {"id": goal["id"], "revision": goal["revision"]}
        c.request("dsh/goal/block", {"agentId": agent, "ref": ref, "reason": {"code": "ci-down", "message": "CI"}})

        # errors carry their kind and code
        assert c.error("dsh/goal/pause", {"agentId": agent, "ref": ref})["data"]["kind"] == "stale-revision"
        bad = c.error("dsh/goal/edit", {"agentId": agent, "ref": {"id": "g", "revision": "1"}, "maxRounds": 2})
        assert bad["data"] == {"kind": "invalid-params", "field": "ref.revision"}
        assert c.error("dsh/session/open", {"sessionId": "../x"})["data"]["field"] == "sessionId"
        assert c.error("dsh/plan/get", {"agentId": "a-never-issued"})["data"]["kind"] == "unknown-agent"

        # the log, fork, reload, close
        page = c.request("dsh/session/events", {"agentId": agent, "afterSeq": 0, "limit": 3})
        assert [e["seq"] for e in page["events"]] == [1, 2, 3] and page["nextSeq"] == 3
        rest = c.request("dsh/session/events", {"agentId": agent, "afterSeq": page["nextSeq"]})
        chat = c.request("dsh/chat/get", {"agentId": agent, "afterSeq": 1, "limit": 2})
        assert len(chat["items"]) == 2 and chat["nextSeq"] > 1
        fork = c.request("dsh/session/fork", {"agentId": agent, "atSeq": rest["nextSeq"]})
        opened = c.request("dsh/session/open", {"sessionId": session_id, "reload": True})
        assert opened["agentId"] != agent
        assert c.error("dsh/plan/get", {"agentId": agent})["data"]["kind"] == "stale-agent"
        c.request("dsh/session/close", {"agentId": fork["agentId"]})

        notifications = c.check_notifications()
        assert {n["method"] for n in notifications} == {
            "dsh/goal/changed", "dsh/plan/changed", "dsh/session/event", "dsh/chat/item", "dsh/agent/delta",
            "dsh/agent/activity", "dsh/session/clients", "dsh/question/resolved",
        }  # fmt: skip
        missing = set(METHODS) - c.seen
        assert not missing, f"the scenario never exercised {sorted(missing)}"
        assert daemon.stdout_faults == []
        assert daemon.shutdown_and_exit() == 0


# ---- bad params against the real daemon -------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_daemon(tmp_path_factory):
    workspace = _workspace(tmp_path_factory.mktemp("fuzz"), [])
    with RawDaemon(workspace) as daemon:
        assert "result" in daemon.initialize(questions=True)
        created = daemon.request("dsh/session/create", {"title": "fuzz"})
        log = workspace / ".dsh" / "sessions" / created["sessionId"] / "log.jsonl"
        yield daemon, created["agentId"], log
        assert daemon.stdout_faults == []
        assert daemon.shutdown_and_exit() == 0


REQUESTS = [m for m, spec in METHODS.items() if spec.kind == "request"]


@pytest.mark.parametrize("method", REQUESTS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_daemon_names_the_wrong_field_and_writes_nothing(fuzz_daemon, method, data):
    daemon, agent, log = fuzz_daemon
    before = log.read_bytes()
    wire, fault = data.draw(malformed_wire(METHODS[method].params))
    reply = daemon.call(method, wire, timeout=30)
    assert "error" in reply, (method, wire, reply)
    error = reply["error"]
    assert error["code"] == -32602, error
    assert error["data"] == {"kind": "invalid-params", "field": fault.field or "params"}, (fault, error)
    assert log.read_bytes() == before  # bad params never write
    assert daemon.request("dsh/plan/get", {"agentId": agent}) == {"active": False}  # still serving
