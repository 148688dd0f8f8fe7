"""`dshd goal`: read and change a session's goal from a terminal.

    dshd goal status   [--session ID] [--workspace DIR] [--json]
    dshd goal create   OBJECTIVE... [--max-rounds N] [--max-tokens N] [...]
    dshd goal edit     [--objective TEXT] [--max-rounds N] [--max-tokens N] [...]
    dshd goal pause|resume|complete|clear [...]
    dshd goal raise    [--rounds N] [--tokens N] [...]

``raise`` is what an editor's "Raise the budget and resume…" does: on a goal blocked for
its spent budget, an edit (the new maxRounds and/or maxTokens) with the ref read, then a
resume with the ref the edit returned.

Where the goal is changed depends on who holds the session. When nobody does, the log is
opened here (its lock taken, as an editor's daemon would) and the goal service writes
to it directly. When a process holds it, that is the workspace's shared daemon (an
editor has the session open): the command connects to the daemon's socket as one more
client, opens the session (attaching to the live agent) and sends the same `dsh/goal/*`
requests an editor sends, so every attached editor sees the change at once. Either way
the answer is the wire's: ``status --json`` prints the GoalView editors get (or null).

Writes are compare-and-swap like every goal write: the command reads the current goal
and writes with its ref; a goal changed in between is refused (``stale-revision``),
never overwritten. Without ``--session`` the session changed last is meant; without
``--workspace``, the nearest folder from here up that holds ``.dsh``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dshd.client_framing import FramingError, Frames, frame
from dshd.formats import shown
from dshd.errors import DshError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# resume/raise written, but no client is on the session to run the rounds: what `dshd run`
# exits when a person is needed (docs/headless.md).
EXIT_NOT_RUNNING = 3
STARTS_ROUNDS = ("resume", "raise")
OPS = ("status", "create", "edit", "raise", "pause", "resume", "complete", "clear")
CLIENT_NAME = "dshd goal"
# Pausing waits for a running goal round to end; a person's patience, not a network's.
DAEMON_TIMEOUT_S = 60.0
GOALS_OFF = 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml'


class NobodyToRun(Exception):
    """A resume (or raise) refused before anything was written: the shared daemon holds the
    session but no other client is on it, so the resume would start a round with nobody
    watching. ``goal`` is the goal as it stands."""

    def __init__(self, session_id: str, goal: dict[str, Any]) -> None:
        super().__init__(session_id)
        self.session_id, self.goal = session_id, goal


class GoalCommandError(Exception):
    """A refusal to report: the wire's error kind, its message and data."""

    def __init__(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.data = kind, message, dict(data or {})

    @classmethod
    def of(cls, exc: DshError) -> "GoalCommandError":
        return cls(exc.kind, exc.message, exc.data)

    def to_json(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "message": self.message, **self.data}}


# ---- the two ways to the goal -----------------------------------------------------------


class LogGoals:
    """The goal of a session nobody holds: its log opened (and locked) here."""

    via = "log"
    others_attached = 0  # no process holds the session: no client is on it

    def __init__(self, workspace: Path, session_id: str) -> None:
        from dshd.agent.config_layers import load_layers, user_config_path
        from dshd.log import io_error
        from dshd.services.goals import GoalService
        from dshd.services.store import SessionStore

        config = load_layers(workspace, user_file=user_config_path()).config
        if "goals" not in config.plugins:
            raise DshError("plugin-not-loaded", GOALS_OFF, plugin="goals")
        try:
            self._store = SessionStore.open(workspace / ".dsh" / "sessions", session_id, base=workspace)
        except FileNotFoundError:
            raise DshError("invalid-params", f"no session {session_id} in {workspace}", field="session") from None
        except OSError as exc:
            raise io_error(exc, workspace / ".dsh" / "sessions", "open") from None
        self._service = GoalService(self._store, config.goals.maxRounds, config.goals.maxTokens)

    def get(self) -> dict[str, Any] | None:
        from dshd.daemon import to_wire

        return to_wire.goal_view(self._service.get())

    def write(self, op: str, ref: dict[str, Any] | None, fields: dict[str, Any]) -> dict[str, Any]:
        from dshd.daemon import to_wire

        service = self._service
        if op == "create":
            service.create(fields["objective"], fields.get("maxRounds"), fields.get("maxTokens"))
        elif op == "edit":
            service.edit(ref, fields.get("objective"), fields.get("maxRounds"), fields.get("maxTokens"))
        elif op == "clear":
            return {"ref": to_wire.goal_ref(service.clear(ref))}
        else:
            getattr(service, op)(ref)
        # No agent runs here: whatever the service armed, nothing runs rounds until the
        # session is open in an editor and resumed there, so the answer says disarmed.
        return to_wire.goal_view(service.disarm())

    def close(self) -> None:
        self._service.detach()
        self._store.close()


class DaemonGoals:
    """The goal of a session the workspace's shared daemon holds, through its socket:
    LSP framing, one `initialize`, the session opened (attached), `dsh/goal/*` requests.
    The connection says it answers no questions, so no review or approval is sent here."""

    via = "daemon"

    def __init__(self, workspace: Path, session_id: str, connection) -> None:
        self._sock = connection.sock
        self._sock.settimeout(DAEMON_TIMEOUT_S)
        self._frames = Frames(connection.first)
        self._next_id = 0
        self.daemon_pid = connection.pid
        # The clients on the session besides this one, as the daemon last listed them
        # (dsh/session/clients, sent on attach); None until it did.
        self.others_attached: int | None = None
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": workspace.as_uri(),
                "capabilities": {},
                "clientInfo": {"name": CLIENT_NAME},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        self.agent_id = self.request("dsh/session/open", {"sessionId": session_id})["agentId"]

    def get(self) -> dict[str, Any] | None:
        return self.request("dsh/goal/get", {"agentId": self.agent_id})

    def write(self, op: str, ref: dict[str, Any] | None, fields: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"agentId": self.agent_id, **fields}
        if ref is not None:
            params["ref"] = ref
        return self.request(f"dsh/goal/{op}", params)

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self._send({"jsonrpc": "2.0", "method": "exit"})
        except (GoalCommandError, OSError):
            pass  # the answer is already in hand; the daemon ends the connection either way
        finally:
            self._sock.close()

    # ---- JSON-RPC over the socket -------------------------------------------------------

    def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        msg_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        while True:
            reply = self._receive()
            if "method" in reply:
                if "id" in reply:  # a request of the daemon's: this client answers none
                    self._send({"jsonrpc": "2.0", "id": reply["id"], "error": {"code": -32601, "message": "dshd goal answers no requests"}})
                elif reply["method"] == "dsh/session/clients":
                    self._note_clients(reply.get("params"))
                continue  # other notifications are for editors
            if reply.get("id") != msg_id:
                continue
            if "error" in reply:
                error = reply["error"]
                data = error.get("data") if isinstance(error.get("data"), dict) else {}
                kind = data.pop("kind", "error")
                raise GoalCommandError(kind, str(error.get("message", "the daemon refused")), {"code": error.get("code"), **data})
            return reply.get("result")

    def _note_clients(self, params: Any) -> None:
        clients = params.get("clients") if isinstance(params, dict) else None
        if isinstance(clients, list):
            self.others_attached = sum(1 for c in clients if isinstance(c, dict) and c.get("you") is not True)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._sock.sendall(frame(message))
        except OSError as exc:
            raise GoalCommandError("io-error", f"the connection to the daemon broke: {exc.strerror or exc}") from None

    def _receive(self) -> dict[str, Any]:
        while True:
            try:
                message = self._frames.next()
            except FramingError as exc:
                raise GoalCommandError("io-error", str(exc)) from None
            if message is not None:
                return message
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise GoalCommandError(
                    "io-error",
                    f"the daemon did not answer in {DAEMON_TIMEOUT_S:g} s (it may still make the change: "
                    "`dshd goal status` shows what it did)",
                ) from None
            except OSError as exc:
                raise GoalCommandError("io-error", f"the connection to the daemon broke: {exc.strerror or exc}") from None
            if not chunk:
                raise GoalCommandError("io-error", "the daemon closed the connection before answering")
            self._frames.feed(chunk)


def open_goals(workspace: Path, session_id: str) -> LogGoals | DaemonGoals:
    """The goal of ``session_id``: on its log when nobody holds the session, else
    through the shared daemon that does."""
    from dshd.log import SessionLocked

    try:
        return LogGoals(workspace, session_id)
    except SessionLocked as exc:
        holder = exc.data.get("pid")
    import dshd_connect

    try:
        connection = dshd_connect.connect(str(workspace), "dsh", start=False)
    except dshd_connect.ConnectError as exc:
        who = f"process {holder}" if holder else "another process"
        raise GoalCommandError(
            "session-locked",
            f"session {session_id} is held by {who}, and no shared daemon of this workspace answers ({exc}): "
            "change the goal where the session is open",
            {"pid": holder},
        ) from None
    goals = None
    try:
        goals = DaemonGoals(workspace, session_id, connection)
        return goals
    finally:
        if goals is None:
            connection.sock.close()


def find_workspace(here: Path) -> Path:
    """The nearest folder from ``here`` up that holds a ``.dsh`` folder (a real one, not a
    link), as git finds its repository; ``here`` when none does."""
    here = Path(os.path.realpath(here))
    for folder in (here, *here.parents):
        if (folder / ".dsh").is_dir() and not (folder / ".dsh").is_symlink():
            return folder
    return here


def newest_session(workspace: Path) -> str:
    """The session whose log changed last (what `dshd goal` means without --session)."""
    from dshd.agent import is_session_id
    from dshd.services.listing import SessionIndex

    rows = [row for row in SessionIndex(workspace, is_session_id).rows(lambda _sid: None) if row.refused is None]
    if not rows:
        raise GoalCommandError("invalid-params", f"no session in {workspace}: open one in an editor first", {"field": "session"})
    return max(rows, key=lambda row: row.updated_at or "").session_id


# ---- the command ------------------------------------------------------------------------


def run(workspace: Path, op: str, session_id: str | None, fields: dict[str, Any]) -> tuple[str, Any]:
    """(session id, the wire answer) of ``op`` on the goal of ``session_id`` (default: the newest)."""
    session_id, answer, _ = run_on(workspace, op, session_id, fields)
    return session_id, answer


def run_on(workspace: Path, op: str, session_id: str | None, fields: dict[str, Any]) -> tuple[str, Any, tuple[str, int | None]]:
    """As :func:`run`, with where it went ("log" or "daemon") and how many other clients
    were on the session (None: not known)."""
    if session_id is None:
        session_id = newest_session(workspace)
    else:
        from dshd.agent import is_session_id

        if not is_session_id(session_id):
            raise GoalCommandError(
                "invalid-params", f"--session: {session_id!r} is not a session id (s- and 26 letters and digits)",
                {"field": "session"},
            )
    goals = open_goals(workspace, session_id)
    try:
        if op == "status":
            return session_id, goals.get(), (goals.via, goals.others_attached)
        ref = None
        if op != "create":
            current = goals.get()
            if current is None:
                raise GoalCommandError("no-goal", f"session {session_id} has no goal: `dshd goal create OBJECTIVE` makes one")
            ref = {"id": current["id"], "revision": current["revision"]}
            if op in STARTS_ROUNDS and goals.via == "daemon" and not goals.others_attached:
                # The live agent would arm and start a round at once, and disarm when this
                # command leaves: a round with nobody watching. Nothing is written.
                raise NobodyToRun(session_id, current)
            if op == "raise":
                return session_id, raise_and_resume(goals, current, fields), (goals.via, goals.others_attached)
        return session_id, goals.write(op, ref, fields), (goals.via, goals.others_attached)
    finally:
        goals.close()


def nothing_runs(session_id: str, via: str) -> str:
    """What happens after a resume no client will act on, in a person's words."""
    if via == "log":
        return (f"the goal is resumed, but nothing runs yet: no editor or run has the session open. Rounds start "
                f"when an editor opens session {session_id} and you resume the goal there, or when "
                f"`dshd run --session {session_id}` runs it here.")
    return (f"nothing was changed and nothing runs: session {session_id} is open in the workspace's shared daemon, "
            "but no editor or run is on it, and a resume there would start a round with nobody watching. Resume "
            f"the goal in an editor that opens session {session_id}, or run it here with `dshd run --session {session_id}`.")


def raise_and_resume(goals: LogGoals | DaemonGoals, current: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The "raise" action: edit the budget(s), then resume with the edit's ref. Checked first
    (offered now, and the new budget leaves some), so an edit is never left without its resume."""
    if not any(action["id"] == "raise" for action in current["actions"]):
        raise GoalCommandError(
            "invalid-transition",
            f"the goal is {current['status']['short']}, not blocked for a spent budget: "
            "`dshd goal edit` changes a budget, `dshd goal resume` resumes",
            {"phase": current["phase"]},
        )
    rounds = fields.get("maxRounds", current["maxRounds"])
    if rounds <= current["roundsStarted"]:
        raise GoalCommandError(
            "invalid-params",
            f"the round budget stays spent ({current['roundsStarted']} of {rounds} started): give --rounds above {current['roundsStarted']}",
            {"field": "rounds"},
        )
    tokens = fields.get("maxTokens", current.get("maxTokens"))
    if tokens is not None and tokens <= current["tokensUsed"]:
        raise GoalCommandError(
            "invalid-params",
            f"the token budget stays spent ({current['tokensUsed']} of {tokens} used): give --tokens above {current['tokensUsed']}",
            {"field": "tokens"},
        )
    edited = goals.write("edit", {"id": current["id"], "revision": current["revision"]}, fields)
    return goals.write("resume", {"id": edited["id"], "revision": edited["revision"]}, {})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dshd goal", description="Read or change the goal of a session.")
    sub = parser.add_subparsers(dest="op", metavar="{" + ",".join(OPS) + "}", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--session", metavar="ID", help="the session (default: the one changed last)")
        p.add_argument(
            "--workspace", type=Path, metavar="DIR",
            help="the workspace (default: the nearest folder from here up that holds .dsh, else here)",
        )
        p.add_argument("--json", action="store_true", help="print the answer as the wire's JSON (status: the GoalView)")
        return p

    command("status", "show the goal")
    create = command("create", "set a new goal (when there is none, or it is complete)")
    create.add_argument("objective", nargs="+", metavar="OBJECTIVE", help="what the goal is (words are joined)")
    create.add_argument("--max-rounds", type=int, metavar="N", help="round budget (default: [goals] maxRounds)")
    create.add_argument("--max-tokens", type=int, metavar="N", help="token budget (default: [goals] maxTokens)")
    edit = command("edit", "change the objective or raise a budget")
    edit.add_argument("--objective", metavar="TEXT")
    edit.add_argument("--max-rounds", type=int, metavar="N")
    edit.add_argument("--max-tokens", type=int, metavar="N")
    raise_ = command("raise", "raise a spent budget and resume (edit, then resume)")
    raise_.add_argument("--rounds", type=int, metavar="N", dest="max_rounds", help="the new round budget")
    raise_.add_argument("--tokens", type=int, metavar="N", dest="max_tokens", help="the new token budget")
    command("pause", "pause the goal (a running round is cancelled first)")
    command("resume", "resume a paused or blocked goal")
    command("complete", "mark the goal complete")
    command("clear", "remove the goal")
    return parser


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if args.op == "create":
        fields["objective"] = " ".join(args.objective)
    elif args.op == "edit" and args.objective is not None:
        fields["objective"] = args.objective
    if args.op in ("create", "edit", "raise"):
        if args.max_rounds is not None:
            fields["maxRounds"] = args.max_rounds
        if args.max_tokens is not None:
            fields["maxTokens"] = args.max_tokens
    return fields


def describe(op: str, session_id: str, answer: Any) -> str:
    """The answer for people, in the daemon's own words (status text and detail)."""
    if op == "clear":
        ref = answer["ref"]
        return f"Cleared goal {ref['id']} of session {session_id}."
    if answer is None:
        return f"No goal in session {session_id}."
    status = answer["status"]
    lines = [f"{answer['id']} · {status['text']}", *(f"  {line}" for line in status["detail"])]
    here = [a["label"] for a in answer["actions"] if a["id"] in OPS]
    if here:
        lines.append("  Next: " + ", ".join(here))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)  # usage errors exit 2
    from dshd.cli import for_people

    # An objective, a blocked reason, a daemon's error: the model's and others' words.
    for_people(as_json=args.json, log_records=True, prefix="dshd goal")
    if args.op == "edit" and args.objective is None and args.max_rounds is None and args.max_tokens is None:
        print("dshd goal edit: give --objective, --max-rounds and/or --max-tokens", file=sys.stderr)
        return EXIT_USAGE
    if args.op == "raise" and args.max_rounds is None and args.max_tokens is None:
        print("dshd goal raise: give --rounds and/or --tokens", file=sys.stderr)
        return EXIT_USAGE
    workspace = Path(os.path.realpath(args.workspace)) if args.workspace is not None else find_workspace(Path.cwd())
    try:
        if not workspace.is_dir():
            raise GoalCommandError("invalid-params", f"no such folder: {workspace}", {"field": "workspace"})
        try:
            session_id, answer, (via, others) = run_on(workspace, args.op, args.session, _fields(args))
        except NobodyToRun as refused:
            print(json.dumps(refused.goal, ensure_ascii=False) if args.json else describe(args.op, refused.session_id, refused.goal))
            print(f"dshd goal {args.op}: {nothing_runs(refused.session_id, 'daemon')}", file=sys.stderr)
            return EXIT_NOT_RUNNING
        except DshError as exc:
            raise GoalCommandError.of(exc) from None
        except OSError as exc:  # what no layer below turned into a DshError
            raise GoalCommandError("io-error", f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")) from None
    except GoalCommandError as exc:
        if args.json:
            print(json.dumps(exc.to_json(), ensure_ascii=False))
        print(f"dshd goal {args.op}: {shown(exc.message)}", file=sys.stderr)
        return EXIT_FAIL
    print(json.dumps(answer, ensure_ascii=False) if args.json else describe(args.op, session_id, answer))
    if args.op in STARTS_ROUNDS and answer.get("phase") == "active" and not others:
        # Asked to run, and no client will: said, and not a success (docs/headless.md).
        print(f"dshd goal {args.op}: {nothing_runs(session_id, via)}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    return EXIT_OK


__all__ = ["main", "run", "open_goals", "LogGoals", "DaemonGoals"]
