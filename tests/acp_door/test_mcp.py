"""MCP servers an ACP client gives in ``session/new`` and ``session/load`` (SPEC X-4, X-5):
connected for that session in the command sandbox, their tools called through the
scripted model; ``initialize`` says http servers are taken. Both SDK clients; the truth is
read from the updates, the session log and the processes left (none after the client goes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.acp_door.clients import AcpError
from tests.acp_door.conftest import Clients
from tests.acp_door.support import finished, tool_call
from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.sandbox_support import needs_sandbox

TOY = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "toy.py"
PLUGINS = ["plan", "goals", "mcp"]


def toy_server(name: str, root: Path, value: str) -> dict:
    """ACP's stdio server: the SDK toy server, one variable from the client, and a marker
    path of its own in its command line (how the test finds its processes)."""
    marker = root / f"{name}.pid"
    return {"name": name, "command": sys.executable, "args": [str(TOY), "--marker", str(marker)], "env": [{"name": "TOY_VALUE", "value": value}]}


def servers_running(marker: str) -> list[int]:
    """Pids of processes whose command line names ``marker`` (the servers started here)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry.name))
            except OSError:
                pass
    return found


@needs_sandbox
async def test_a_server_from_session_new_and_again_from_session_load_is_connected_and_its_tool_called(clients, tmp_path):
    name = f"toy-{clients.kind}"
    marker = str(clients.workspace / f"{name}.pid")
    call = tool_call(f"mcp__{name}__where")
    write_workspace(clients.workspace, [{"toolCalls": [call]}, {"text": "said"}, {"toolCalls": [call]}, {"text": "again"}], plugins=PLUGINS)
    client = await clients.start()
    session = await client.new_session(mcp_servers=[toy_server(name, clients.workspace, "from-new")])
    sid = session["sessionId"]
    assert session["_meta"]["dsh"]["mcpServers"] == {"started": [name], "alreadyRunning": [], "ignored": []}

    assert (await client.prompt(sid, "echo hi"))["stopReason"] == "end_turn"

    [done] = finished(client, sid)
    assert done["status"] == "completed", done
    said = f"{clients.workspace} from-new"  # it ran in the workspace, with the client's variable
    assert said in done["rawOutput"]["content"]
    [result] = of_type(read_log(clients.workspace, sid), "tool/result")
    assert result["data"]["ok"] is True and said in result["data"]["content"]
    assert servers_running(marker)  # in its sandbox, while the session is open
    await clients.close_all()
    assert not servers_running(marker)  # the whole tree went with the session

    # Opened again, with the servers the client lists for it: started again, for this session.
    client = await clients.start()
    loaded = await client.load_session(sid, mcp_servers=[toy_server(name, clients.workspace, "from-load")])
    assert loaded["_meta"]["dsh"]["mcpServers"]["started"] == [name]
    assert (await client.prompt(sid, "echo hi again"))["stopReason"] == "end_turn"
    again = finished(client, sid)[-1]  # the replayed call came first
    assert again["status"] == "completed" and f"{clients.workspace} from-load" in again["rawOutput"]["content"]
    await clients.close_all()
    assert not servers_running(marker)


@needs_sandbox
async def test_a_server_that_fails_to_start_is_said_once_and_the_session_goes_on(clients):
    write_workspace(clients.workspace, [{"text": "still here"}], plugins=PLUGINS)
    client = await clients.start()
    broken = {"name": "broken", "command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"], "env": []}
    sid = (await client.new_session(mcp_servers=[broken]))["sessionId"]

    assert (await client.prompt(sid, "hi"))["stopReason"] == "end_turn"  # waited for the server, went on

    await client.wait_update(lambda u: 'MCP server "broken" failed' in str(u["update"].get("content")))
    assert client.agent_text(sid).count('MCP server "broken" failed') == 1
    assert "still here" in client.agent_text(sid)
    [failed] = of_type(read_log(clients.workspace, sid), "mcp/server")
    assert (failed["data"]["name"], failed["data"]["state"]) == ("broken", "failed")

    # The note comes back with the history, once.
    await clients.close_all()
    client = await clients.start()
    await client.load_session(sid)
    assert client.agent_text(sid).count('MCP server "broken" failed') == 1


async def test_initialize_takes_http_servers_and_a_malformed_one_is_refused_naming_its_field(client):
    caps = client.init_result["agentCapabilities"]["mcpCapabilities"]
    assert caps["http"] is True and caps["sse"] is False and not caps.get("acp")
    bad_name = {"name": "no spaces", "command": "/bin/true", "args": [], "env": []}
    with pytest.raises(AcpError) as err:
        await client.new_session(mcp_servers=[bad_name])
    assert err.value.code == -32602 and err.value.data["field"] == "mcpServers[0].name"
    sse = {"type": "sse", "name": "events", "url": "http://127.0.0.1:9/sse", "headers": []}
    with pytest.raises(AcpError) as err:
        await client.new_session(mcp_servers=[sse])
    assert err.value.code == -32602 and err.value.data["field"] == "mcpServers[0].type"
    assert not list((client.workspace / ".dsh" / "sessions").glob("*/log.jsonl"))  # no session was made


async def test_with_mcp_turned_off_the_servers_are_named_as_not_started(workspace, tmp_path):
    clients = Clients(workspace, tmp_path, "python-sdk")  # the door's own logic: one client is enough
    write_workspace(clients.workspace, [], plugins=["plan", "goals"])  # no "mcp" plugin
    try:
        client = await clients.start()
        session = await client.new_session(mcp_servers=[toy_server("files", clients.workspace, "-")])
        [ignored] = session["_meta"]["dsh"]["mcpServers"]["ignored"]
        assert ignored["name"] == "files" and '"mcp"' in ignored["why"]
        note = await client.wait_update(lambda u: "files" in str(u["update"].get("content")))
        assert "not started" in note["update"]["content"]["text"] and note["sessionId"] == session["sessionId"]
    finally:
        await clients.close_all()


async def test_an_http_server_from_session_new_is_connected_and_its_tool_called(workspace, tmp_path):
    """initialize says ``http: true``: a streamable HTTP server (the daemon connects to it
    itself: no process of its own to sandbox) works as a stdio one does. The Python SDK
    client alone: what differs from the stdio case is on dshd's side of the door."""
    clients = Clients(workspace, tmp_path, "python-sdk")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = subprocess.Popen([sys.executable, str(TOY.with_name("toy_http.py")), str(port)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and served.poll() is None, "the http server did not start"
                time.sleep(0.05)
        write_workspace(clients.workspace, [{"toolCalls": [tool_call("mcp__web__look", what="the web")]}, {"text": "seen"}], plugins=PLUGINS)
        client = await clients.start()
        server = {"type": "http", "name": "web", "url": f"http://127.0.0.1:{port}/mcp", "headers": [{"name": "X-Toy", "value": "1"}]}
        session = await client.new_session(mcp_servers=[server])
        assert session["_meta"]["dsh"]["mcpServers"]["started"] == ["web"]
        sid = session["sessionId"]
        assert (await client.prompt(sid, "look"))["stopReason"] == "end_turn"
        [done] = finished(client, sid)
        assert done["status"] == "completed" and "looked at the web" in done["rawOutput"]["content"]
    finally:
        await clients.close_all()
        served.kill()
        served.wait()
