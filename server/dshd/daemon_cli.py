"""`dshd daemon status|stop|restart [--workspace DIR] [--json]`: the workspace's shared
daemon, seen and steered from a terminal (each editor's restart command runs `restart`).

They speak the daemon's ``control`` protocol (one JSON request on the protocol line, one
JSON line back) over its socket, after the same checks as any client. ``stop`` asks the
daemon to tell its editors and leave (sessions closed, checkpoints written); ``restart``
does the same, waits for it to be gone, and starts the next one: the editors' forwarders
see the old daemon die and reattach to their sessions (a goal that ran is disarmed, as
after any restart).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import dshd_connect

EXIT_OK, EXIT_FAIL, EXIT_NONE = 0, 1, 3  # 3: no daemon runs for this workspace
STOP_WAIT_S = 30.0  # a daemon closing its sessions (checkpoints) may take a while


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dshd daemon", description="See, stop or restart the workspace's shared daemon.")
    parser.add_argument("action", choices=("status", "stop", "restart"))
    parser.add_argument("--workspace", default=os.getcwd(), metavar="DIR", help="the workspace (default: here)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def ask(workspace: str, op: str) -> dict | None:
    """The daemon's answer to ``op``, or None when no daemon listens for ``workspace``."""
    path = dshd_connect.socket_path(workspace)
    got = dshd_connect._dial(path, dshd_connect.protocol_line("control", {"op": op}))
    if not isinstance(got, dshd_connect.Connection):
        return None
    data = got.first
    got.sock.settimeout(10)
    try:
        while b"\n" not in data and len(data) < 1 << 20:
            chunk = got.sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        got.sock.close()
    answer = json.loads(data.partition(b"\n")[0] or b"null")
    if not isinstance(answer, dict) or "error" in answer:
        raise dshd_connect.ConnectError(f"the daemon refused {op}: {answer}")
    return answer


def _gone(pid: int) -> bool:
    return dshd_connect._died(pid)


def wait_gone(pid: int, wait_s: float = STOP_WAIT_S) -> bool:
    deadline = time.monotonic() + wait_s
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def start(workspace: str) -> dict | None:
    """Start the workspace's daemon (an editor may have started it already: then that one
    serves) and return its status."""
    path = dshd_connect.socket_path(workspace)
    child = dshd_connect.start_daemon(workspace, path)
    try:
        deadline = time.monotonic() + dshd_connect.START_TIMEOUT_S
        while time.monotonic() < deadline:
            answer = ask(workspace, "status")
            if answer is not None:
                return answer
            if child.poll() and child.exit_code() not in (0,):
                raise dshd_connect.ConnectError(f"the daemon failed to start; see {path[:-5]}.log")
            time.sleep(0.02)
        return None
    finally:
        child.close()


def _uptime(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds // 60 % 60} min"


def _print_status(status: dict, out) -> None:
    from dshd.formats import shown

    clients = status.get("clients") or []
    out.write(f"daemon     pid {status['pid']} (dshd {shown(str(status.get('version', '?')))}), up {_uptime(status.get('uptimeS', 0))}\n")
    out.write(f"workspace  {shown(status.get('workspace', ''))}\n")
    out.write(f"socket     {shown(status.get('socket', ''))}\n")
    out.write(f"log        {shown(status.get('log', ''))}\n")
    out.write(f"clients    {len(clients)}{': ' + ', '.join(shown(c) for c in clients) if clients else ''}\n")
    sessions = status.get("sessions") or []
    out.write(f"sessions   {len(sessions)}\n")
    for session in sessions:
        names = ", ".join(shown(c) for c in session.get("clients") or []) or "no client"
        out.write(f"  {shown(session.get('sessionId', ''))}  ({names})\n")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    workspace = os.path.realpath(args.workspace)
    if not os.path.isdir(workspace):
        print(f"dshd daemon: no such folder: {workspace}", file=sys.stderr)
        return EXIT_FAIL
    try:
        return _main(args, workspace)
    except dshd_connect.ConnectError as exc:
        print(f"dshd daemon: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:  # `dshd daemon status | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _main(args: argparse.Namespace, workspace: str) -> int:
    out = sys.stdout
    if args.action == "status":
        status = ask(workspace, "status")
        if status is None:
            if args.json:
                out.write(json.dumps({"running": False, "workspace": workspace}) + "\n")
            else:
                out.write(f"no dshd daemon runs for {workspace}\n")
            return EXIT_NONE
        if args.json:
            out.write(json.dumps({"running": True, **status}) + "\n")
        else:
            _print_status(status, out)
        return EXIT_OK
    old = ask(workspace, "restart" if args.action == "restart" else "stop")
    result: dict = {"action": args.action, "workspace": workspace}
    if old is None:
        if args.action == "stop":
            if args.json:
                out.write(json.dumps({**result, "running": False}) + "\n")
            else:
                out.write(f"no dshd daemon runs for {workspace}\n")
            return EXIT_NONE
    else:
        result.update(oldPid=old["pid"], told=old.get("told", 0))
        if not wait_gone(old["pid"]):
            print(f"dshd daemon: pid {old['pid']} did not exit in {STOP_WAIT_S:g} s; see {old.get('log')}", file=sys.stderr)
            return EXIT_FAIL
    if args.action == "restart":
        new = start(workspace)
        if new is None:
            print("dshd daemon: the new daemon did not answer", file=sys.stderr)
            return EXIT_FAIL
        result.update(pid=new["pid"], socket=new["socket"])
    if args.json:
        out.write(json.dumps(result) + "\n")
    elif args.action == "stop":
        out.write(f"stopped the daemon (pid {result['oldPid']}); {result['told']} editor(s) told\n")
    else:
        was = f"pid {result['oldPid']}" if "oldPid" in result else "none was running"
        told = f"; {result['told']} editor(s) reattach" if "oldPid" in result else ""
        out.write(f"restarted the daemon: pid {result['pid']} ({was}){told}\n")
    return EXIT_OK
