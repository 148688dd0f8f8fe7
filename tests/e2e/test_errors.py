"""Every error kind of SPEC 6, provoked over the wire against the real daemon: the
JSON-RPC code, ``data.kind`` and the kind's data fields; and that the error wrote
nothing (or, for the recovery cases, that nothing acknowledged was lost).
"""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from dshd_protocol import ERROR_CODES, METHODS, from_wire
from dshd_protocol.errors import ERROR_DATA_FIELDS

from .conftest import write_workspace
from .support import log_path, read_log, ref_of, wait_idle


async def rpc_error(client, method: str, params: Any, kind: str) -> dict:
    """Send a request that must fail with ``kind``; returns ``error.data``."""
    with pytest.raises(JsonRpcException) as info:
        await client.request(method, params)
    exc = info.value
    assert exc.data is not None and exc.data.get("kind") == kind, (method, params, exc.code, exc.message, exc.data)
    assert exc.code == ERROR_CODES[kind]
    assert exc.message  # something for people
    for field, json_type in ERROR_DATA_FIELDS[kind].items():  # the kind's documented fields
        value = exc.data.get(field, KeyError)
        plain = list if typing.get_origin(json_type) is list else json_type  # list[str]: a list
        assert value is not KeyError and isinstance(value, plain) and not isinstance(value, bool), (kind, field, exc.data)
    return exc.data


async def new_session(client) -> tuple[str, str]:
    created = await client.request("dsh/session/create", {})
    return created["sessionId"], created["agentId"]


# ---- invalid-params -------------------------------------------------------------------


async def test_invalid_params_names_the_field_and_writes_nothing(workspace: Path, daemons) -> None:
    client = await daemons.start()
    sid, agent = await new_session(client)
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "o", "maxRounds": 1})
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", 10)
    await blocked  # the one round ran; the budget blocked the goal; nothing runs now
    goal = await client.request("dsh/goal/get", {"agentId": agent})
    ref = ref_of(goal)
    size = log_path(workspace, sid).stat().st_size
    cases = [
        ("dsh/plan/set", {"agentId": agent, "active": "true"}, "active"),
        ("dsh/plan/set", {"agentId": agent, "active": 1}, "active"),
        ("dsh/plan/set", {"agentId": agent}, "active"),
        ("dsh/session/open", {"sessionId": "../x"}, "sessionId"),
        ("dsh/session/open", {"sessionId": "/etc"}, "sessionId"),
        ("dsh/session/open", {"sessionId": ""}, "sessionId"),
        ("dsh/session/open", {"sessionId": "s-" + "0" * 26}, "sessionId"),  # well formed, no such session
        ("dsh/session/open", {"sessionId": sid, "reload": "false"}, "reload"),
        ("dsh/session/create", {"title": None}, "title"),
        ("dsh/session/create", {"title": "t", "extra": 1}, "extra"),
        ("dsh/session/list", [], "params"),
        ("dsh/session/events", {"agentId": agent, "limit": 0}, "limit"),
        ("dsh/session/events", {"agentId": agent, "afterSeq": 1.0}, "afterSeq"),
        ("dsh/session/fork", {"agentId": agent, "atSeq": 10_000}, "atSeq"),
        ("dsh/agent/prompt", {"agentId": agent, "text": "   "}, "text"),
        ("dsh/agent/steer", {"agentId": agent, "text": 5}, "text"),
        ("dsh/goal/create", {"agentId": agent, "objective": "o", "maxRounds": 2.0}, "maxRounds"),
        ("dsh/goal/create", {"agentId": agent, "objective": "o", "max_rounds": 2}, "max_rounds"),
        ("dsh/goal/create", {"agentId": agent, "objective": "o", "maxTokens": 0}, "maxTokens"),
        ("dsh/goal/create", {"agentId": agent, "objective": "o", "maxTokens": "5000"}, "maxTokens"),
        ("dsh/goal/edit", {"agentId": agent, "ref": ref, "maxTokens": 1.5}, "maxTokens"),
        ("dsh/goal/edit", {"agentId": agent, "ref": ref, "maxTokens": None}, "maxTokens"),
        ("dsh/goal/edit", {"agentId": agent, "ref": ref}, "objective"),  # neither objective nor maxRounds
        ("dsh/goal/edit", {"agentId": agent, "ref": {"id": ref["id"], "revision": "2"}, "objective": "x"}, "ref.revision"),
        ("dsh/goal/block", {"agentId": agent, "ref": ref, "reason": {"code": "Bad_Code", "message": "m"}}, "reason.code"),
        ("dsh/goal/block", {"agentId": agent, "ref": ref, "reason": {"code": "ok-code"}}, "reason.message"),
        ("dsh/goal/pause", {"agentId": agent, "ref": ref, "force": True}, "force"),
        ("dsh/goal/clear", {"agentId": None, "ref": ref}, "agentId"),
        ("dsh/config/get", {"key": "model"}, "key"),
        ("dsh/config/get", [], "params"),
        ("dsh/permission/set", {"agentId": agent, "sandbox": "none"}, "sandbox"),
        ("dsh/permission/set", {"agentId": agent, "sandbox": None}, "sandbox"),
        ("dsh/permission/set", {"agentId": agent, "approve": ["write", "write"]}, "approve"),
        ("dsh/permission/set", {"agentId": agent, "approve": ["delete"]}, "approve[0]"),
        ("dsh/permission/set", {"agentId": agent, "approve": "write"}, "approve"),
        ("dsh/permission/set", {"agentId": agent, "network": True}, "network"),
        ("dsh/permission/get", {"agentId": agent, "sandbox": "read-only"}, "sandbox"),
        ("dsh/chat/get", {"agentId": agent, "afterSeq": -1}, "afterSeq"),
        ("dsh/chat/get", {"agentId": agent, "limit": "10"}, "limit"),
        ("dsh/chat/get", {"agentId": agent, "since": 3}, "since"),
        ("dsh/chat/get", {}, "agentId"),
    ]
    for method, params, field in cases:
        data = await rpc_error(client, method, params, "invalid-params")
        assert data["field"] == field, (method, params, data)
    assert log_path(workspace, sid).stat().st_size == size
    assert (await client.request("dsh/goal/get", {"agentId": agent})) == goal


# ---- agents ---------------------------------------------------------------------------


async def test_unknown_and_stale_agent(workspace: Path, daemons) -> None:
    client = await daemons.start()
    sid, agent = await new_session(client)
    for method, params in [
        ("dsh/plan/get", {"agentId": "a-0000000000000000"}),
        ("dsh/goal/get", {"agentId": "nobody"}),
        ("dsh/agent/prompt", {"agentId": "a-ffffffffffffffff", "text": "hi"}),
        ("dsh/session/fork", {"agentId": "a-1234"}),
        ("dsh/permission/get", {"agentId": "a-0000000000000000"}),
        ("dsh/permission/set", {"agentId": "a-0000000000000000", "sandbox": "read-only"}),
        ("dsh/chat/get", {"agentId": "a-0000000000000001"}),
    ]:
        await rpc_error(client, method, params, "unknown-agent")

    reopened = await client.request("dsh/session/open", {"sessionId": sid, "reload": True})
    for method, params in [
        ("dsh/plan/get", {"agentId": agent}),
        ("dsh/goal/get", {"agentId": agent}),
        ("dsh/goal/disarm", {"agentId": agent}),
        ("dsh/plan/set", {"agentId": agent, "active": True}),
        ("dsh/agent/prompt", {"agentId": agent, "text": "hi"}),
        ("dsh/session/events", {"agentId": agent}),
        ("dsh/chat/get", {"agentId": agent}),
        ("dsh/session/close", {"agentId": agent}),
        ("dsh/permission/get", {"agentId": agent}),
        ("dsh/permission/set", {"agentId": agent, "approve": []}),
    ]:
        await rpc_error(client, method, params, "stale-agent")
    await client.request("dsh/session/close", {"agentId": reopened["agentId"]})
    await rpc_error(client, "dsh/plan/get", {"agentId": reopened["agentId"]}, "stale-agent")
    assert [e["type"] for e in read_log(workspace, sid)] == ["session/start"]


async def test_turn_open(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "slow", "delayMs": 1500}])
    client = await daemons.start()
    sid, agent = await new_session(client)
    header = client.wait_for(lambda n: n["method"] == "dsh/session/event" and n["params"]["event"]["type"] == "request/header", 10)
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": "first"}))
    await header
    await rpc_error(client, "dsh/agent/prompt", {"agentId": agent, "text": "second"}, "turn-open")
    assert await prompt == {"turn": 1, "stopReason": "end-turn"}
    texts = [e["data"]["text"] for e in read_log(workspace, sid) if e["type"] == "user/message"]
    assert texts == ["first"]  # the refused prompt left no trace


# ---- goals ----------------------------------------------------------------------------


async def test_goal_errors(workspace: Path, daemons) -> None:
    client = await daemons.start()
    sid, agent = await new_session(client)

    await rpc_error(client, "dsh/goal/pause", {"agentId": agent, "ref": {"id": "g-x", "revision": 1}}, "no-goal")
    await rpc_error(client, "dsh/goal/edit", {"agentId": agent, "ref": {"id": "g-x", "revision": 1}, "objective": "x"}, "no-goal")

    # One round: it runs at once (the script is empty), then the driver blocks the goal.
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", 10)
    goal = await client.request("dsh/goal/create", {"agentId": agent, "objective": "o", "maxRounds": 1})
    await blocked
    view = await client.request("dsh/goal/get", {"agentId": agent})
    assert view["phase"] == "blocked" and view["revision"] == 2 and view["roundsLeft"] == 0
    size = log_path(workspace, sid).stat().st_size

    # A write naming an old revision (or another goal): stale-revision with the current one.
    data = await rpc_error(client, "dsh/goal/complete", {"agentId": agent, "ref": ref_of(goal)}, "stale-revision")
    assert data["current"] == 2  # SPEC 6: the current revision, an integer
    data = await rpc_error(client, "dsh/goal/complete", {"agentId": agent, "ref": {"id": "g-other", "revision": 2}}, "stale-revision")
    assert data["current"] == 2  # SPEC 6: the current revision, an integer

    # Transitions the phase does not allow name the phase.
    data = await rpc_error(client, "dsh/goal/pause", {"agentId": agent, "ref": ref_of(view)}, "invalid-transition")
    assert data["phase"] == "blocked"
    data = await rpc_error(client, "dsh/goal/create", {"agentId": agent, "objective": "another"}, "invalid-transition")
    assert data["phase"] == "blocked"

    # Resume with no rounds left.
    await rpc_error(client, "dsh/goal/resume", {"agentId": agent, "ref": ref_of(view)}, "budget-exhausted")
    assert log_path(workspace, sid).stat().st_size == size  # no error wrote anything
    assert await client.request("dsh/goal/get", {"agentId": agent}) == view

    completed = await client.request("dsh/goal/complete", {"agentId": agent, "ref": ref_of(view)})
    data = await rpc_error(client, "dsh/goal/resume", {"agentId": agent, "ref": ref_of(completed)}, "invalid-transition")
    assert data["phase"] == "complete"
    data = await rpc_error(
        client, "dsh/goal/block", {"agentId": agent, "ref": ref_of(completed), "reason": {"code": "x", "message": "m"}},
        "invalid-transition",
    )
    assert data["phase"] == "complete"
    cleared = await client.request("dsh/goal/clear", {"agentId": agent, "ref": ref_of(completed)})
    # The ref returned by clear names no goal: writes with it are no-goal.
    await rpc_error(client, "dsh/goal/resume", {"agentId": agent, "ref": cleared["ref"]}, "no-goal")
    await rpc_error(client, "dsh/goal/clear", {"agentId": agent, "ref": cleared["ref"]}, "no-goal")
    ops = [e["data"]["op"] for e in read_log(workspace, sid) if e["type"] == "goal/change"]
    assert ops == ["create", "block", "complete", "clear"]


async def test_plugin_not_loaded(daemons) -> None:
    write_workspace(daemons.root, plugins=[])
    client = await daemons.start()
    sid, agent = await new_session(client)
    for method, params in [
        ("dsh/plan/get", {"agentId": agent}),
        ("dsh/plan/set", {"agentId": agent, "active": True}),
        ("dsh/goal/get", {"agentId": agent}),
        ("dsh/goal/create", {"agentId": agent, "objective": "o"}),
        ("dsh/goal/disarm", {"agentId": agent}),
        ("dsh/goal/pause", {"agentId": agent, "ref": {"id": "g-1", "revision": 1}}),
    ]:
        await rpc_error(client, method, params, "plugin-not-loaded")
    # The agent works without plugins, and session/open reports no plan or goal.
    opened = await client.request("dsh/session/open", {"sessionId": sid})
    from_wire(METHODS["dsh/session/open"].result, opened)
    assert opened["plan"] == {"active": False} and opened["goal"] is None
    assert await client.request("dsh/agent/prompt", {"agentId": agent, "text": "hi"}) == {"turn": 1, "stopReason": "end-turn"}
    header = next(e for e in read_log(daemons.root, sid) if e["type"] == "request/header")
    assert header["data"]["tools"] == [] and header["data"]["sections"] == []


async def test_invalid_config(workspace: Path, daemons) -> None:
    with pytest.raises(JsonRpcException) as info:
        await daemons.start(config={"goals": {"maxRounds": 0}})
    assert info.value.code == ERROR_CODES["invalid-config"]
    assert info.value.data["kind"] == "invalid-config"
    assert info.value.data == {"kind": "invalid-config", "key": "goals.maxRounds", "file": "initializationOptions.config"}


# ---- the log on disk: replay-failed, torn tail, session-locked --------------------------


async def _closed_session(client, workspace: Path) -> tuple[str, list[bytes]]:
    """A session with a few events, closed (checkpoint written, lock released)."""
    sid, agent = await new_session(client)
    await client.request("dsh/plan/set", {"agentId": agent, "active": True})
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "hello"})
    await client.request("dsh/plan/set", {"agentId": agent, "active": False})
    await client.request("dsh/session/close", {"agentId": agent})
    return sid, log_path(workspace, sid).read_bytes().splitlines(keepends=True)


async def test_replay_failed_names_seq_line_reason(workspace: Path, daemons) -> None:
    client = await daemons.start()

    # 1. A broken line in the middle, no checkpoint: strict replay stops there.
    sid, lines = await _closed_session(client, workspace)
    (log_path(workspace, sid).parent / "projection.json").unlink(missing_ok=True)
    lines[2] = b'{"seq": 3, "type": "user/message", "at": \n'
    log_path(workspace, sid).write_bytes(b"".join(lines))
    data = await rpc_error(client, "dsh/session/open", {"sessionId": sid}, "replay-failed")
    assert data["line"] == 3 and data["reason"] and "seq" in data
    listed = await client.request("dsh/session/list", {})
    assert sid not in {s["sessionId"] for s in listed["sessions"]}

    # 2. A seq gap in the last line (the checkpoint's fingerprint no longer matches).
    sid, lines = await _closed_session(client, workspace)
    last = json.loads(lines[-1])
    last["seq"] += 1
    lines[-1] = json.dumps(last).encode() + b"\n"
    log_path(workspace, sid).write_bytes(b"".join(lines))
    data = await rpc_error(client, "dsh/session/open", {"sessionId": sid}, "replay-failed")
    assert data["line"] == len(lines) and data["seq"] == last["seq"] and data["reason"]

    # 3. A complete but invalid line appended after the checkpoint: the tail replay fails.
    sid, lines = await _closed_session(client, workspace)
    bad = {"seq": len(lines) + 1, "type": "plan/mode", "at": "2026-11-29T00:00:00.000Z", "data": {"active": "yes"}}
    with log_path(workspace, sid).open("ab") as f:
        f.write(json.dumps(bad).encode() + b"\n")
    before = log_path(workspace, sid).read_bytes()
    data = await rpc_error(client, "dsh/session/open", {"sessionId": sid}, "replay-failed")
    assert data["line"] == len(lines) + 1 and data["seq"] == len(lines) + 1 and data["reason"]
    # A corrupt log is never repaired or truncated by the failed open.
    assert log_path(workspace, sid).read_bytes() == before
    # The lock was released: the next attempt fails the same way (not session-locked).
    data2 = await rpc_error(client, "dsh/session/open", {"sessionId": sid}, "replay-failed")
    assert data2 == data

    # 4. Same-length changes under the checkpoint, which vouches for the prefix it covers
    # (SPEC 3: a cold open reads only the tail). The open trusts it; reading that history
    # (events, or the transcript a turn needs) reports the exact line, never a skip.
    sid, lines = await _closed_session(client, workspace)
    assert (log_path(workspace, sid).parent / "projection.json").exists()
    tampered = list(lines)
    tampered[1] = tampered[1].replace(b'"seq":2', b'"seq":7', 1)
    assert tampered[1] != lines[1]
    log_path(workspace, sid).write_bytes(b"".join(tampered))
    opened = await client.request("dsh/session/open", {"sessionId": sid})
    data = await rpc_error(client, "dsh/session/events", {"agentId": opened["agentId"]}, "replay-failed")
    assert data == {"kind": "replay-failed", "seq": 7, "line": 2, "reason": "seq gap: expected 2, got 7"}
    await client.request("dsh/session/close", {"agentId": opened["agentId"]})
    tampered = list(lines)
    tampered[2] = lines[2][:12] + b"#" + lines[2][13:]
    log_path(workspace, sid).write_bytes(b"".join(tampered))
    opened = await client.request("dsh/session/open", {"sessionId": sid})
    data = await rpc_error(client, "dsh/session/events", {"agentId": opened["agentId"]}, "replay-failed")
    assert data["line"] == 3 and data["reason"]
    # A turn needs the transcript: it ends with an error and writes nothing of a request.
    size = log_path(workspace, sid).stat().st_size
    result = await client.request("dsh/agent/prompt", {"agentId": opened["agentId"], "text": "go on"})
    assert result["stopReason"] == "error"
    assert b"request/header" not in log_path(workspace, sid).read_bytes()[size:]


async def test_torn_tail_is_cut_and_kept(workspace: Path, daemons) -> None:
    client = await daemons.start()
    sid, lines = await _closed_session(client, workspace)
    good = b"".join(lines)
    torn = b'{"seq": %d, "type": "plan/mode", "at": "2026-11-29T0' % (len(lines) + 1)
    with log_path(workspace, sid).open("ab") as f:
        f.write(torn)

    opened = await client.request("dsh/session/open", {"sessionId": sid})
    assert opened["plan"] == {"active": False}
    assert log_path(workspace, sid).read_bytes() == good  # cut back to the last newline
    copies = list(log_path(workspace, sid).parent.glob("torn-*.bin"))
    assert len(copies) == 1 and copies[0].read_bytes() == torn
    events = await client.request("dsh/session/events", {"agentId": opened["agentId"]})
    assert events["events"] == [json.loads(line) for line in lines]  # every acknowledged event

    # The session goes on from there: the next event takes the next seq.
    await client.request("dsh/plan/set", {"agentId": opened["agentId"], "active": True})
    after = read_log(workspace, sid)
    assert [e["seq"] for e in after] == list(range(1, len(lines) + 2))


@pytest.mark.slow
async def test_session_locked_by_another_daemon(workspace: Path, daemons) -> None:
    write_workspace(workspace, replies=[{"text": "one"}, {"text": "two"}])
    first = await daemons.start()
    second = await daemons.start()
    sid, agent = await new_session(first)
    await first.request("dsh/agent/prompt", {"agentId": agent, "text": "from the first"})
    before = log_path(workspace, sid).read_bytes()

    data = await rpc_error(second, "dsh/session/open", {"sessionId": sid}, "session-locked")
    assert data["pid"] == first.lsp._server.pid
    data = await rpc_error(second, "dsh/session/open", {"sessionId": sid, "reload": True}, "session-locked")
    assert data["pid"] == first.lsp._server.pid
    assert log_path(workspace, sid).read_bytes() == before  # the second wrote nothing

    # The holder keeps writing; then releases, and the second takes over.
    await first.request("dsh/agent/prompt", {"agentId": agent, "text": "still the first"})
    await first.request("dsh/session/close", {"agentId": agent})
    opened = await second.request("dsh/session/open", {"sessionId": sid})
    await second.request("dsh/plan/set", {"agentId": opened["agentId"], "active": True})
    events = read_log(workspace, sid)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    texts = [e["data"]["text"] for e in events if e["type"] == "user/message" and e["data"]["source"] == "user"]
    assert texts == ["from the first", "still the first"]
    assert [e["data"] for e in events if e["type"] == "plan/mode"] == [{"active": True}]


async def test_concurrent_writes_with_one_ref_exactly_one_wins(workspace: Path, daemons) -> None:
    """Compare-and-set over the wire (G-3): ten edits sent at once naming the same ref;
    one is accepted (revision + 1), the other nine are stale-revision, and the log
    holds exactly one edit."""
    client = await daemons.start()
    sid, agent = await new_session(client)
    blocked = client.wait_for(lambda n: n["method"] == "dsh/goal/changed" and n["params"]["op"] == "block", 10)
    await client.request("dsh/goal/create", {"agentId": agent, "objective": "o", "maxRounds": 1})
    await blocked
    view = await client.request("dsh/goal/get", {"agentId": agent})
    ref = ref_of(view)

    async def edit(n: int):
        try:
            return await client.request("dsh/goal/edit", {"agentId": agent, "ref": ref, "objective": f"objective {n}"})
        except JsonRpcException as exc:
            return exc

    outcomes = await asyncio.gather(*(edit(n) for n in range(10)))
    accepted = [o for o in outcomes if isinstance(o, dict)]
    refused = [o for o in outcomes if isinstance(o, JsonRpcException)]
    assert len(accepted) == 1 and len(refused) == 9
    assert accepted[0]["revision"] == ref["revision"] + 1
    for exc in refused:
        assert exc.data["kind"] == "stale-revision" and exc.data["current"] == ref["revision"] + 1
    edits = [e["data"] for e in read_log(workspace, sid) if e["type"] == "goal/change" and e["data"]["op"] == "edit"]
    assert len(edits) == 1 and edits[0]["goal"]["objective"] == accepted[0]["objective"]


@pytest.mark.slow
async def test_replay_failed_for_logs_that_never_started(workspace: Path, daemons) -> None:
    """Logs whose line 1 is not a session/start: empty, only a torn line (cut and kept,
    then empty), a blank line, another event first. Each open reports line 1."""
    client = await daemons.start()
    sid = "s-" + "0" * 25 + "a"
    directory = workspace / ".dsh" / "sessions" / sid
    directory.mkdir(parents=True)
    cases = [
        (b"", None, "empty log: line 1 must be session/start"),
        (b'{"type":"session/st', None, "empty log: line 1 must be session/start"),
        (b"\n", None, None),
        (b'{"type":"plan/mode","seq":1,"at":"2026-11-29T19:54:04.287Z","data":{"active":true}}\n', 1,
         "line 1 must be session/start"),
    ]
    for content, seq, reason in cases:
        (directory / "log.jsonl").write_bytes(content)
        data = await rpc_error(client, "dsh/session/open", {"sessionId": sid}, "replay-failed")
        assert data["line"] == 1 and data["seq"] == seq, (content, data)
        assert data["reason"] == reason if reason is not None else data["reason"], (content, data)
    assert [p.read_bytes() for p in directory.glob("torn-*.bin")] == [b'{"type":"session/st']
    listed = await client.request("dsh/session/list", {})
    assert sid not in {s["sessionId"] for s in listed["sessions"]}


async def test_unsafe_path_for_a_session_whose_lock_file_is_a_link(workspace: Path, daemons, tmp_path: Path) -> None:
    """More cases (every session file, .dsh, .dsh/sessions, the list) in tests/attacks/test_session_links.py."""
    from tests.attacks.test_session_links import seed_session

    target = tmp_path / "bashrc"
    target.write_bytes(b"original\n")
    good, bad = seed_session(workspace), seed_session(workspace)
    lock = workspace / ".dsh" / "sessions" / bad / "log.lock"
    lock.unlink()
    lock.symlink_to(target)
    client = await daemons.start()
    data = await rpc_error(client, "dsh/session/open", {"sessionId": bad}, "unsafe-path")
    assert data == {"kind": "unsafe-path", "path": str(lock), "reason": "is a symbolic link"}
    assert target.read_bytes() == b"original\n"
    assert (await client.request("dsh/session/open", {"sessionId": good}))["agentId"]  # the control


@pytest.mark.slow
async def test_io_error_for_a_read_only_workspace(workspace: Path, daemons, tmp_path: Path) -> None:
    """Disk full and recovery: test_io_errors.py. Here: a read-only bind mount of .dsh/sessions."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    from tests.attacks.test_session_links import seed_session

    session_id = seed_session(workspace)
    sessions = workspace / ".dsh" / "sessions"
    try:
        subprocess.run(["mount", "--bind", str(sessions), str(sessions)], check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot bind-mount here: {exc}")
    try:
        client = await daemons.start()
        assert (await client.request("dsh/session/open", {"sessionId": session_id}))["agentId"]  # the control
        await client.stop()
        subprocess.run(["mount", "-o", "remount,ro,bind", str(sessions)], check=True, capture_output=True)
        client = await daemons.start()
        data = await rpc_error(client, "dsh/session/open", {"sessionId": session_id}, "io-error")
        assert data["errno"] == "EROFS" and data["path"] == str(sessions / session_id / "log.lock")
    finally:
        await daemons.stop_all()
        subprocess.run(["umount", "-l", str(sessions)], check=False)


async def test_person_changed_names_the_files_and_restores_nothing(workspace: Path, daemons) -> None:
    """A checkpoint restore over a file the person changed after the agent's step."""
    replies = [{"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "agent\n"}}]}, {"text": "ok"}]
    write_workspace(workspace, replies, plugins=["tools", "checkpoints"])
    client = await daemons.start(approve=lambda params: {"outcome": "allow-once"})
    sid, agent = await new_session(client)
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "write"})
    await wait_idle(client, agent)
    [checkpoint] = (await client.request("dsh/checkpoint/list", {"agentId": agent}))["checkpoints"]
    (workspace / "a.txt").write_text("mine\n")
    size = log_path(workspace, sid).stat().st_size
    data = await rpc_error(client, "dsh/checkpoint/restore", {"agentId": agent, "seq": checkpoint["seq"]}, "person-changed")
    assert data["paths"] == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "mine\n" and log_path(workspace, sid).stat().st_size == size


def test_every_error_kind_is_provoked_here() -> None:
    """A new error kind needs a wire test in this file."""
    from dshd_protocol import ERROR_KINDS

    source = Path(__file__).read_text()
    missing = [kind for kind in ERROR_KINDS if f'"{kind}")' not in source and f'== "{kind}"' not in source]
    assert not missing, f"no wire test for {missing}"
