"""MCP tool servers end to end, against the REAL servers from npm and PyPI
(tests/mcp/setup.sh installs them, pinned): the real `dshd serve` over stdio with the
scripted model calling their tools, the outcome read from the session log, the files on
disk and the process table.

- server-everything and mcp-server-time: every tool listed as ``mcp__<server>__<tool>`` in
  the model's request (``request/header``), called, results in the log (an image part as a
  note; the workspace as the one root); all annotated read-only, so nothing is asked;
- server-filesystem: ``read_text_file`` (readOnlyHint) runs unasked, ``write_file``
  (destructiveHint: exec) asks and a "no" refuses it; ``approve = "always"`` asks for a
  read-only tool too;
- the sandbox, and an untrusted workspace's servers never started: their attack tests are
  tests/attacks/test_mcp_server_sandbox.py and tests/attacks/test_mcp_untrusted_workspace.py;
- a hung tool (server-everything's long-running operation, ``toolTimeoutS = 1``) is a failed
  result, its server reported once (``mcp/server``, ``window/showMessage``), stopped, its
  tools gone; a server killed mid-session is reported once, the other still works;
- after the session closes, after the daemon exits, and after it is killed outright, no
  server process is left.

The servers are configured in the user config (their own XDG_CONFIG_HOME) unless the test
is about the workspace's files. Each carries a marker (tests/mcp_real_support.py) so the
process table tells its processes apart.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from loopback_models import Call, LoopbackModelServer, Reply

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.mcp_real_support import (
    EVERYTHING_JS,
    everything_argv,
    filesystem_argv,
    missing,
    new_mark,
    server_process,
    server_processes,
    server_toml,
    time_argv,
    user_config,
)
from tests.sandbox_support import needs_sandbox

# Every stdio server runs in bubblewrap by default: these tests need it like the commands'.
pytestmark = [pytest.mark.mcp, needs_sandbox]

EVERYTHING_TOOLS = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "get-roots-list",  # listed only to a client that answers roots, as dshd does
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
    "simulate-research-query",
}  # fmt: skip
TIME_TOOLS = {"get_current_time", "convert_time"}
MODEL_KEY_ENV = "DSHD_E2E_MODEL_KEY"


@pytest.fixture(scope="module", autouse=True)
def installed():
    why = missing()
    if why is not None:
        pytest.fail(f"the real MCP servers are not installed: {why}")


def calls(*pairs: tuple[str, dict]) -> dict:
    return {"toolCalls": [{"name": name, "arguments": args} for name, args in pairs]}


def results(events: list[dict]) -> dict[str, dict]:
    """Each call's result by the tool's name (each tool is called once per test step)."""
    names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
    return {names[e["data"]["callId"]]: e["data"] for e in of_type(events, "tool/result")}


def results_list(events: list[dict]) -> list[tuple[str, dict]]:
    names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
    return [(names[e["data"]["callId"]], e["data"]) for e in of_type(events, "tool/result")]


def server_failures(events: list[dict]) -> list[dict]:
    return [e["data"] for e in of_type(events, "mcp/server")]


def shown(client) -> list[str]:
    return [m.message for m in client.lsp.messages]


async def start(daemons, tmp_path: Path, servers: str, replies: list[dict], *, env: dict | None = None, **options):
    """The workspace (the scripted model, only the mcp plugin: the model's tools are the
    servers'), the servers in the user config, and a daemon on it."""
    write_workspace(daemons.root, replies=replies, plugins=["mcp"])
    return await daemons.start(env={**user_config(tmp_path / "xdg", servers), **(env or {})}, **options)


async def prompt(client, agent: str, text: str = "go") -> dict:
    result = await client.request("dsh/agent/prompt", {"agentId": agent, "text": text}, timeout=60)
    assert result["stopReason"] == "end-turn", result
    return result


async def new_session(client) -> tuple[str, str]:
    created = await client.request("dsh/session/create", {})
    return created["sessionId"], created["agentId"]


async def until(predicate, within_s: float = 10.0):
    """Polls ``predicate()`` until it is truthy; returns its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not (value := predicate()) and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return value


async def gone(mark: str, within_s: float = 10.0) -> list[int]:
    """The pids still carrying ``mark`` after waiting up to ``within_s`` for none (a killed
    tree still needs CPU to tear down)."""
    await until(lambda: not server_processes(mark), within_s)
    return server_processes(mark)


# ---- tools listed and called -----------------------------------------------------------------


async def test_tools_are_listed_by_name_and_called(daemons, tmp_path):
    """Through the real OpenAI provider and a loopback model server, so the request the
    model gets is read as sent: every tool by its dshd name, with its server's schema."""
    everything, clock = new_mark(), new_mark()
    servers = server_toml("everything", everything_argv(everything), everything) + server_toml("time", time_argv(), clock)
    asked: list[dict] = []
    with LoopbackModelServer("openai") as model:
        model.script(
            Reply("", [
                Call("mcp__everything__echo", {"message": "hello from dshd"}),
                Call("mcp__everything__get-sum", {"a": 2, "b": 40}),
                Call("mcp__everything__get-tiny-image", {}),
                Call("mcp__time__get_current_time", {"timezone": "UTC"}),
                Call("mcp__everything__get-roots-list", {}),
            ]),
            Reply("done"),
        )  # fmt: skip
        client = await start(
            daemons, tmp_path, servers, [],
            config={"model": {"provider": "openai", "model": "loopback-model", "baseUrl": model.base_url,
                              "apiKeyEnv": MODEL_KEY_ENV, "timeoutS": 20, "maxRetries": 0}},
            env={MODEL_KEY_ENV: "sk-loopback"},
            approve=lambda params: asked.append(params) or {"outcome": "reject"},
        )  # fmt: skip
        sid, agent = await new_session(client)
        await prompt(client, agent)
        first = model.wait_requests(2)[0].json
    events = read_log(daemons.root, sid)

    # Every tool of both servers reached the model's request, by its dshd name, with the
    # server's own description and input schema.
    sent = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {f"mcp__everything__{t}" for t in EVERYTHING_TOOLS} | {f"mcp__time__{t}" for t in TIME_TOOLS} == set(sent)
    get_sum = sent["mcp__everything__get-sum"]
    assert {"a", "b"} <= set(get_sum["parameters"]["properties"]) and get_sum["description"]
    assert "timezone" in sent["mcp__time__get_current_time"]["parameters"]["properties"]
    assert set(of_type(events, "request/header")[0]["data"]["tools"]) == set(sent)

    got = results(events)
    assert got["mcp__everything__echo"]["ok"] is True and "hello from dshd" in got["mcp__everything__echo"]["content"]
    assert got["mcp__everything__get-sum"]["ok"] is True and "42" in got["mcp__everything__get-sum"]["content"]
    # An image part becomes a one-line note beside the text parts.
    image = got["mcp__everything__get-tiny-image"]
    assert image["ok"] is True and "[image part: image/png" in image["content"] and len(image["content"]) < 2000
    now = got["mcp__time__get_current_time"]
    assert now["ok"] is True and '"timezone": "UTC"' in now["content"].replace("'", '"')
    # dshd offers the workspace as the one MCP root.
    roots = got["mcp__everything__get-roots-list"]
    assert roots["ok"] is True and "(1 total)" in roots["content"] and daemons.root.resolve().as_uri() in roots["content"]
    # All five are annotated readOnlyHint: nobody was asked.
    assert asked == []
    assert server_failures(events) == []


# ---- approvals by annotation ---------------------------------------------------------------


async def test_read_only_runs_unasked_and_a_destructive_tool_asks(daemons, tmp_path):
    mark = new_mark()
    root = daemons.root
    (root / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "notes.txt").write_text("remember the milk\n")
    asked: list[dict] = []

    def person(params):
        asked.append(params)
        return {"outcome": "reject", "feedback": "not that file"}

    always = new_mark()
    servers = server_toml("fs", filesystem_argv(root), mark) + server_toml(
        "asked", everything_argv(always), always, approve="always"
    )
    client = await start(
        daemons, tmp_path, servers,
        [
            calls(
                ("mcp__fs__read_text_file", {"path": str(root / "notes.txt")}),
                ("mcp__fs__write_file", {"path": str(root / "out.txt"), "content": "x"}),
                ("mcp__asked__echo", {"message": "may I?"}),
            ),
            {"text": "understood"},
        ],
        approve=person,
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    events = read_log(root, sid)
    got = results(events)
    assert got["mcp__fs__read_text_file"]["ok"] is True and "remember the milk" in got["mcp__fs__read_text_file"]["content"]
    # Of fs's tools only the destructive one was asked about, as exec (destructiveHint), and
    # "no" refused it; approve = "always" asks for a read-only tool too.
    assert [(q["tool"], q["mutability"]) for q in asked] == [("mcp__fs__write_file", "exec"), ("mcp__asked__echo", "read")]
    assert asked[1]["title"] == 'Echo Tool · asked: {"message": "may I?"}'  # the tool's own title, its server, the arguments
    assert got["mcp__fs__write_file"]["ok"] is False and "not that file" in got["mcp__fs__write_file"]["content"]
    assert not (root / "out.txt").exists()
    assert got["mcp__asked__echo"]["ok"] is False
    decisions = [(d["data"]["tool"], d["data"]["outcome"], d["data"]["by"]) for d in of_type(events, "permission/decision")]
    assert decisions == [("mcp__fs__write_file", "reject", "person"), ("mcp__asked__echo", "reject", "person")]


# ---- the sandbox ---------------------------------------------------------------------------


# ---- failures ------------------------------------------------------------------------------


async def test_a_hung_tool_times_out_and_its_server_is_reported_once(daemons, tmp_path):
    everything, files = new_mark(), new_mark()
    (daemons.root).mkdir(parents=True, exist_ok=True)
    (daemons.root / "notes.txt").write_text("still here\n")
    servers = server_toml("everything", everything_argv(everything), everything, toolTimeoutS=1) + server_toml(
        "fs", filesystem_argv(daemons.root), files
    )
    client = await start(
        daemons, tmp_path, servers,
        [
            calls(("mcp__everything__trigger-long-running-operation", {"duration": 30, "steps": 1})),
            calls(("mcp__everything__echo", {"message": "still there?"}), ("mcp__fs__read_text_file", {"path": str(daemons.root / "notes.txt")})),
            {"text": "done"},
        ],
    )  # fmt: skip
    sid, agent = await new_session(client)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await prompt(client, agent)
    assert loop.time() - started < 15, "the hung call was not cut at toolTimeoutS"
    events = read_log(daemons.root, sid)
    outcomes = results_list(events)
    hung = outcomes[0]
    assert hung[0] == "mcp__everything__trigger-long-running-operation" and hung[1]["ok"] is False
    assert "time" in hung[1]["content"].lower(), hung[1]["content"]  # "timed out after 1 s"
    # The hung server's tools are gone for the session; the other server works.
    later = dict(outcomes[1:])
    assert later["mcp__everything__echo"]["ok"] is False
    assert later["mcp__fs__read_text_file"]["ok"] is True and "still here" in later["mcp__fs__read_text_file"]["content"]
    headers = of_type(events, "request/header")
    assert "mcp__everything__echo" in headers[0]["data"]["tools"]
    assert not any(t.startswith("mcp__everything__") for t in headers[-1]["data"]["tools"])
    assert "mcp__fs__read_text_file" in headers[-1]["data"]["tools"]
    # Reported once: one mcp/server event, one message naming the server.
    [failure] = server_failures(events)
    assert failure["name"] == "everything" and failure["state"] == "failed" and "hung" in failure["reason"]
    await client.request("dsh/session/list", {})
    assert len([m for m in shown(client) if "everything" in m]) == 1, shown(client)
    # A hung server is stopped, its whole tree, while the session goes on.
    assert await gone(everything) == [] and server_processes(files)


async def test_a_killed_server_is_reported_once_and_the_rest_works(daemons, tmp_path):
    everything, files = new_mark(), new_mark()
    root = daemons.root
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.txt").write_text("still here\n")
    servers = server_toml("everything", everything_argv(everything), everything) + server_toml(
        "fs", filesystem_argv(root), files
    )
    client = await start(
        daemons, tmp_path, servers,
        [
            calls(("mcp__everything__echo", {"message": "one"})),
            {"text": "turn 1"},
            calls(("mcp__everything__echo", {"message": "two"}), ("mcp__fs__read_text_file", {"path": str(root / "notes.txt")})),
            {"text": "turn 2"},
            calls(("mcp__fs__list_directory", {"path": str(root)})),
            {"text": "turn 3"},
        ],
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    [pid] = server_process(everything, EVERYTHING_JS)
    os.kill(pid, signal.SIGKILL)
    # The daemon notices the death on its own (the pipe closes), before any call.
    assert await until(lambda: server_failures(read_log(daemons.root, sid))), "the death was not recorded"
    await prompt(client, agent)
    await prompt(client, agent)
    events = read_log(daemons.root, sid)
    outcomes = results_list(events)
    assert [(name, r["ok"]) for name, r in outcomes] == [
        ("mcp__everything__echo", True),
        ("mcp__everything__echo", False),
        ("mcp__fs__read_text_file", True),
        ("mcp__fs__list_directory", True),
    ]
    assert "notes.txt" in outcomes[-1][1]["content"]
    [failure] = server_failures(events)
    assert failure["name"] == "everything" and failure["state"] == "failed" and failure["reason"]
    await client.request("dsh/session/list", {})
    assert len([m for m in shown(client) if "everything" in m]) == 1, shown(client)
    assert await gone(everything) == []


# ---- trust ---------------------------------------------------------------------------------


# ---- lifetime ------------------------------------------------------------------------------


async def test_no_server_process_outlives_its_session_or_the_daemon(daemons, tmp_path):
    root = daemons.root
    root.mkdir(parents=True, exist_ok=True)
    everything, files = new_mark(), new_mark()
    servers = server_toml("everything", everything_argv(everything), everything) + server_toml(
        "fs", filesystem_argv(root), files
    )
    client = await start(
        daemons, tmp_path, servers,
        [calls(("mcp__everything__echo", {"message": "a"})), {"text": "one"},
         calls(("mcp__everything__echo", {"message": "b"})), {"text": "two"}],
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    assert server_processes(everything) and server_processes(files)
    await client.request("dsh/session/close", {"agentId": agent})
    assert await gone(everything) == [] and await gone(files) == []

    # A session of its own starts them again; the daemon exiting stops them.
    sid, agent = await new_session(client)
    await prompt(client, agent)
    assert results(read_log(root, sid))["mcp__everything__echo"]["ok"] is True
    assert server_processes(everything) and server_processes(files)
    await client.stop()
    assert await gone(everything) == [] and await gone(files) == []


async def test_a_daemon_killed_outright_leaves_no_server(daemons, tmp_path):
    everything = new_mark()
    client = await start(
        daemons, tmp_path, server_toml("everything", everything_argv(everything), everything),
        [calls(("mcp__everything__echo", {"message": "a"})), {"text": "one"}],
    )  # fmt: skip
    sid, agent = await new_session(client)
    await prompt(client, agent)
    assert server_processes(everything)
    # SIGKILL: no cleanup in the daemon runs; bubblewrap's --die-with-parent and its PID
    # namespace end the server's whole tree.
    os.kill(client.lsp._server.pid, signal.SIGKILL)
    assert await gone(everything) == []
