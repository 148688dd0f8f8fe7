"""`dshd run`: one prompt, or a goal until it ends, from a terminal or a CI job.

    dshd run [PROMPT|-] [--session ID|--last] [--plan] [--goal OBJECTIVE]
             [--max-rounds N] [--max-tokens N] [--json] [--timeout S]

The run is one more client of the dsh door, speaking the editors' wire. When the
workspace's shared daemon is running, it connects to it (so an editor attached to the
session watches the run live and may answer its questions); otherwise it serves the door
in this process, on a socket pair, with the same config layers, trust, sandbox and
approvals. Either way its connection says it can answer nothing: with no other client
able to, every approval is refused at once (the turn goes on) and a plan review is never
approved (the run ends with the plan). Nothing here approves on its own.

Output: the assistant's text on stdout as it streams, notices on stderr (and, on a
terminal, a progress line); ``--json``: one JSON object a line, a ``session`` line first,
each ``dsh/chat/item`` upsert as an ``item`` line, a ``result`` line last.

Exit status (first that applies): 130 interrupted (Ctrl-C cancels the turn and disarms
the goal), 1 an error (its kind said), 3 a person was needed (a plan review, or an
approval refused for want of one), 4 a goal's budget spent, 2 the goal blocked for
another reason, 0 otherwise (the turn ended, or the goal is complete).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from dshd.api.escape import shown, shown_json, shown_lines
from dshd.client_framing import FramingError, Frames, frame

EXIT_OK, EXIT_ERROR, EXIT_BLOCKED, EXIT_PERSON, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
CLIENT_NAME = "dshd run"  # what attached editors show (the Host goes by the headless capability, not this)
BUDGET_CODES = frozenset({"round-budget-exhausted", "token-budget-exhausted"})
FAILED_STOPS = frozenset({"model-error", "error"})
STOP_TIMEOUT_S = 30.0  # a cancel the daemon does not answer: the run ends anyway
NEWEST = 2**53 - 1  # dsh/chat/get beforeSeq above every seq: the newest page


class RunError(Exception):
    """An error to report (exit 1): the wire's error kind, its message and data."""

    def __init__(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.data = kind, message, dict(data or {})

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, **self.data}


# ---- JSON-RPC over LSP framing, on any stream pair --------------------------------------


class Connection:
    """The run's end of one dsh connection: requests, and every notification handed to
    ``on_notification(method, params)``. Requests from the daemon are answered with an
    error: this client declared it answers none."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes, on_notification, on_lost
    ) -> None:
        self._reader, self._writer = reader, writer
        self._frames = Frames(first)
        self._on_notification, self._on_lost = on_notification, on_lost
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future] = {}
        self._lost: RunError | None = None  # why the connection ended, once it has
        self._read_task = asyncio.ensure_future(self._read_loop())

    async def request(self, method: str, params: Any = None) -> Any:
        if self._lost is not None:
            raise self._lost
        self._next_id += 1
        msg_id = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        try:
            return await future
        finally:
            self._waiting.pop(msg_id, None)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer.is_closing():
            raise RunError("io-error", "the connection to the daemon is closed")
        self._writer.write(frame(message))

    async def _frame(self) -> dict[str, Any] | None:
        while True:
            try:
                message = self._frames.next()
            except FramingError as exc:
                raise RunError("io-error", str(exc)) from None
            if message is not None:
                return message
            chunk = await self._reader.read(65536)
            if not chunk:
                return None
            self._frames.feed(chunk)

    async def _read_loop(self) -> None:
        why = RunError("io-error", "the daemon closed the connection")
        try:
            while (message := await self._frame()) is not None:
                self._dispatch(message)
        except (OSError, ValueError, RunError) as exc:
            why = exc if isinstance(exc, RunError) else RunError("io-error", f"the connection to the daemon broke: {exc}")
        self._lost = why
        self._on_lost()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(why)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "dshd run answers no requests"}})
            else:
                self._on_notification(method, message.get("params") or {})
            return
        future = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            data = dict(error["data"]) if isinstance(error.get("data"), dict) else {}
            kind = str(data.pop("kind", "error"))
            future.set_exception(RunError(kind, str(error.get("message", "the daemon refused")), data))
        else:
            future.set_result(message.get("result"))

    @property
    def lost(self) -> RunError | None:
        """Why the connection ended (the daemon went away), or None while it lasts."""
        return self._lost

    async def close(self) -> None:
        self._read_task.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass


# ---- where the door runs ----------------------------------------------------------------


class InProcessDoor:
    """The dsh door served in this process on one end of a socket pair (no daemon holds
    the workspace): a Host of its own, closed with the connection."""

    via = "in-process"

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        from dshd.daemon.app import DshDaemon
        from dshd.daemon.server import serve_connection
        from dshd.models.errors import RedactingFormatter

        stream = logging.StreamHandler()
        stream.setLevel(logging.getLevelName(os.environ.get("DSHD_LOG_LEVEL", "WARNING").upper()))
        # The door's warnings are the run's notices (its window/showMessage ones too: they are
        # logged as well, so only the daemon path prints those).
        stream.setFormatter(RedactingFormatter("dshd run: %(message)s"))
        logging.basicConfig(level=stream.level, handlers=[stream])
        ours, theirs = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=theirs)
        self._served = asyncio.ensure_future(serve_connection(DshDaemon(), server_reader, server_writer))
        reader, writer = await asyncio.open_connection(sock=ours)
        return reader, writer, b""

    async def close(self) -> None:
        # The door's on_stop closes the sessions (checkpoints written, locks released).
        try:
            await asyncio.wait_for(asyncio.shield(self._served), 30)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - nothing more to report
            self._served.cancel()


class SharedDaemonDoor:
    """The workspace's shared daemon, as one more client on its socket."""

    via = "daemon"

    def __init__(self, connection) -> None:
        self._connection = connection

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        gc.enable()
        reader, writer = await asyncio.open_connection(sock=self._connection.sock)
        return reader, writer, self._connection.first

    async def close(self) -> None:
        pass


def find_door(workspace: Path, out: "Output") -> InProcessDoor | SharedDaemonDoor:
    """The shared daemon when one answers (never started for the run), else the door here."""
    import dshd_connect

    try:
        return SharedDaemonDoor(dshd_connect.connect(str(workspace), "dsh", start=False))
    except dshd_connect.ConnectError as exc:
        if not str(exc).startswith("no dshd daemon is running"):
            # A daemon there that cannot be used (another user's, hung, a bad folder): the
            # run goes on in this process, and says why it did not go through it.
            out.notice(f"running in this process: {exc}")
        return InProcessDoor()


# ---- the run ----------------------------------------------------------------------------


class Output:
    """What the run writes: text and notices for people, or JSON lines."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.progress_on = not as_json and sys.stderr.isatty()
        # stdout on a terminal as well (one screen, as in a shell): the progress line, drawn
        # back at the line's start, would erase a line the agent has not ended; it waits
        # until that line ends. With stdout a pipe or a file, nothing shares its screen.
        self._waits_for_lines = self.progress_on and sys.stdout.isatty()
        self._progress_shown = False
        self._progress_text = ""
        self._printed: dict[str, int] = {}  # assistant item id -> characters written
        self._open_line = False  # stdout's last write did not end a line

    def line(self, value: dict[str, Any]) -> None:
        # The same JSON value, with every character a terminal would act on (C1 controls, bidi
        # controls: JSON itself escapes only C0) written as a JSON escape.
        self._write(shown_json(json.dumps(value, ensure_ascii=False)) + "\n")

    def text(self, text: str) -> None:
        """The model's words as they stream: its own words, but third-party text all the
        same, so a reply cannot clear the screen, set the window's title or write the
        clipboard: lines and tabs kept, every other control and bidi character escaped
        (escaping goes character by character, so a piece at a time is the same)."""
        if not text:
            return
        self._clear_progress()
        self._write(shown_lines(text))
        self._open_line = not text.endswith("\n")

    def _write(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # Whoever read stdout left (`dshd run ... | head`): the run goes on to its end
            # (nothing half done), writing nowhere.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def end_line(self) -> None:
        if self._open_line:
            self.text("\n")

    def assistant(self, item: dict[str, Any]) -> None:
        """Stream an assistant message's text: what is new since its last upsert."""
        text = item.get("text") or ""
        done = self._printed.get(item["id"], 0)
        if item.get("discarded"):
            return
        if len(text) > done:
            self.text(text[done:])
            self._printed[item["id"]] = len(text)
        if not item.get("partial"):
            self.end_line()

    def notice(self, text: str) -> None:
        """One line on stderr: a notice holds tool names, a server's or a provider's words,
        a plan's title: escaped, its line breaks too, so none poses as another line."""
        self._clear_progress()
        self.end_line()
        print(f"dshd run: {shown(text)}", file=sys.stderr, flush=True)

    def progress(self, text: str) -> None:
        if not self.progress_on or (self._progress_shown and text == self._progress_text):
            return
        if self._waits_for_lines and self._open_line:
            return  # drawn by the first update once the agent's line has ended
        # Our own control sequence (back to the start, clear the line); the text escaped and
        # kept within one row (a wrapped line would leave its first row behind when redrawn).
        sys.stderr.write("\r\x1b[K" + _one_row(shown(text), _columns()))
        sys.stderr.flush()
        self._progress_shown, self._progress_text = True, text

    def _clear_progress(self) -> None:
        if self._progress_shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._progress_shown = False


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def _one_row(text: str, columns: int) -> str:
    """``text`` cut to fit in one row short of ``columns`` (wide characters take two)."""
    import unicodedata

    width = 0
    for end, char in enumerate(text):
        width += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if width > columns - 1:
            return text[: max(end - 1, 0)] + "…"
    return text


class Run:
    def __init__(self, args: argparse.Namespace, workspace: Path, prompt: str | None, out: Output) -> None:
        self.args, self.workspace, self.prompt, self.out = args, workspace, prompt, out
        self.started = time.monotonic()
        self.conn: Connection | None = None
        self.agent_id: str | None = None
        self.session_id: str | None = None
        self.goal: dict[str, Any] | None = None
        self.goal_mode = False
        self.turn_open = False
        self.stop_reason: str | None = None
        self.error: RunError | None = None
        self.interrupted = False
        self.timed_out = False
        self.needed: list[dict[str, Any]] = []  # what a person was needed for
        self.plan: str | None = None  # the plan nobody reviewed
        self.usage: dict[str, dict[str, int]] = {}  # assistant item id -> its usage
        self.round: int | None = None
        self.turn: int | None = None
        self.running_tool: str | None = None
        self.via = "in-process"
        self.initialized = False  # shutdown only after initialize was answered
        self.goal_run = False  # a goal runs (--goal, or the session's resumed): its end ends the run
        self._changed = asyncio.Event()
        self._stopping = False

    # ---- notifications ----

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if params.get("agentId") not in (None, self.agent_id):
            return
        if method == "dsh/chat/item":
            self._item(params.get("item") or {})
        elif method == "dsh/session/event":
            event = params.get("event") or {}
            if event.get("type") == "turn/open":
                self.turn_open, self.turn = True, event.get("turn")
            elif event.get("type") == "turn/close":
                self.turn_open = False
        elif method == "dsh/goal/changed":
            if "goal" in params:
                self.goal = params["goal"]
            elif params.get("op") == "clear":
                self.goal = None
        elif method == "window/showMessage" and self.via == "daemon":
            message = params.get("message")
            if isinstance(message, str):
                self.out.notice(message)
        self._show_progress()
        self._changed.set()

    def _item(self, item: dict[str, Any]) -> None:
        if not isinstance(item, dict) or "kind" not in item:
            return
        if self.out.as_json:
            self.out.line({"type": "item", "item": item})
        kind = item["kind"]
        if kind == "assistant-message":
            if not self.out.as_json:
                self.out.assistant(item)
            if isinstance(item.get("usage"), dict) and not item.get("partial"):
                self.usage[item["id"]] = item["usage"]
        elif kind == "tool-call":
            self.running_tool = item.get("title") if item.get("status") in ("running", "waiting") else None
        elif kind == "user-message" and isinstance(item.get("goalRound"), dict):
            self.round = item["goalRound"].get("round")
        elif kind == "permission" and item.get("by") == "fail-closed" and not self._stopping:
            self.needed.append({"kind": "permission", "callId": item.get("callId"), "tool": item.get("tool")})
            self.out.notice(f"approval refused, nobody could give it: {item.get('text') or item.get('tool')}")
        elif kind == "notice" and isinstance(item.get("text"), str):
            self.out.notice(item["text"])  # e.g. a reply that wrote a tool call as text
        elif kind == "plan-review" and not item.get("partial") and item.get("outcome") == "not-reviewed":
            if not self._stopping and not any(n.get("questionId") == item.get("questionId") for n in self.needed):
                self._plan_not_reviewed(item)
        elif kind == "turn-end":
            self.stop_reason = item.get("stopReason")
            error = item.get("error") if isinstance(item.get("error"), dict) else {}
            if self.stop_reason in FAILED_STOPS and self.error is None:
                self.error = RunError(
                    str(error.get("kind") or self.stop_reason), str(error.get("message") or item.get("text") or "the turn failed")
                )

    def _plan_not_reviewed(self, item: dict[str, Any]) -> None:
        """Nobody reviewed the plan: the run stops here with the plan; no round follows."""
        self.needed.append({"kind": "plan-review", "questionId": item.get("questionId"), "title": item.get("title")})
        self.plan = item.get("plan")
        self.out.notice(f"the plan was not reviewed (nobody is here to review it): the run ends with this turn: {item.get('title')}")
        if not self.out.as_json and self.plan:
            self.out.end_line()
            self.out.text(self.plan.rstrip("\n") + "\n")
        if self.goal_mode:
            self.goal_mode = False  # the goal is not what ends the run now
            asyncio.ensure_future(self._quiet_request("dsh/goal/disarm", {"agentId": self.agent_id}))

    def _show_progress(self) -> None:
        if not self.out.progress_on or self.agent_id is None:
            return
        parts = [f"round {self.round}" if self.round is not None else f"turn {self.turn or '-'}"]
        parts.append(f"{self.tokens()} tokens")
        if self.running_tool:
            parts.append(f"running {self.running_tool}")
        self.out.progress(" · ".join(parts))

    def tokens(self) -> int:
        return sum(int(u.get("inputTokens", 0)) + int(u.get("outputTokens", 0)) for u in self.usage.values())

    async def _quiet_request(self, method: str, params: Any) -> Any:
        try:
            return await self.conn.request(method, params)  # type: ignore[union-attr]
        except RunError:
            return None

    # ---- the steps ----

    async def start(self, door) -> None:
        reader, writer, first = await door.open()
        self.conn = Connection(reader, writer, first, self.on_notification, self._changed.set)
        await self.conn.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": self.workspace.as_uri(),
                # It answers no questions and no approvals, and says it is a headless run:
                # alone on a session, what it is asked is refused in words saying nobody is here.
                "capabilities": {"experimental": {"dsh": {"headless": True}}},
                "clientInfo": {"name": CLIENT_NAME},
            },
        )
        self.conn.notify("initialized", {})
        self.initialized = True

    async def open_session(self) -> None:
        args, conn = self.args, self.conn
        assert conn is not None
        session_id = args.session
        if args.last:
            # The session changed last, as the door lists them (sessions it refuses left out).
            rows = (await conn.request("dsh/session/list", {})).get("sessions") or []
            rows = [row for row in rows if isinstance(row, dict) and "refused" not in row and row.get("sessionId")]
            if not rows:
                raise RunError("invalid-params", f"--last: there is no session in {self.workspace}", {"field": "last"})
            session_id = max(rows, key=lambda row: row.get("updatedAt") or "")["sessionId"]
        if session_id is None:
            opened = await conn.request("dsh/session/create", {"title": _title(self.prompt or args.goal)})
            self.goal = None
        else:
            opened = await conn.request("dsh/session/open", {"sessionId": session_id})
            self.goal = opened.get("goal")
        self.agent_id, self.session_id = opened["agentId"], opened["sessionId"]
        # Subscribe to the chat from here on: the newest page is read and left out.
        await conn.request("dsh/chat/get", {"agentId": self.agent_id, "beforeSeq": NEWEST, "limit": 1})
        session = {"type": "session", "sessionId": self.session_id, "agentId": self.agent_id,
                   "workspace": str(self.workspace), "via": self.via}
        if self.out.as_json:
            self.out.line(session)

    async def work(self) -> None:
        args, conn = self.args, self.conn
        assert conn is not None
        agent = {"agentId": self.agent_id}
        if args.plan:
            await conn.request("dsh/plan/set", {**agent, "active": True})
        budgets = {k: v for k, v in (("maxRounds", args.max_rounds), ("maxTokens", args.max_tokens)) if v is not None}
        if self.prompt is not None:
            answer = await conn.request("dsh/agent/prompt", {**agent, "text": self.prompt})
            self.stop_reason = answer.get("stopReason")
            return
        self.goal_mode = self.goal_run = True
        if args.goal is not None:
            self.goal = await conn.request("dsh/goal/create", {**agent, "objective": args.goal, **budgets})
        else:
            goal = self.goal
            if goal is None or goal.get("phase") == "complete":
                raise RunError("no-goal", f"session {self.session_id} has no goal to run: give a PROMPT, - or --goal OBJECTIVE",
                               {"field": "goal"})
            ref = {"id": goal["id"], "revision": goal["revision"]}
            if budgets:
                goal = self.goal = await conn.request("dsh/goal/edit", {**agent, "ref": ref, **budgets})
                ref = {"id": goal["id"], "revision": goal["revision"]}
            self.goal = await conn.request("dsh/goal/resume", {**agent, "ref": ref})
        while self.goal_mode and not self._goal_over():
            await self._next_change()
        while self.turn_open:  # a plan left unreviewed: the turn it came in ends first
            await self._next_change()

    async def _next_change(self) -> None:
        """Wait for the next notification; RunError when the daemon went away."""
        assert self.conn is not None
        if self.conn.lost is None:
            self._changed.clear()
            await self._changed.wait()
        if self.conn.lost is not None:
            raise self.conn.lost

    def _goal_over(self) -> bool:
        goal = self.goal
        if self.turn_open:
            return False
        return goal is None or goal.get("phase") != "active" or goal.get("activation") != "armed"

    async def stop_turn(self) -> None:
        """Ctrl-C or the timeout: cancel the running turn (its open question withdrawn,
        the goal disarmed); the log keeps everything committed."""
        self._stopping = True
        if self.conn is None or self.agent_id is None:
            return
        for method in ("dsh/agent/cancel", "dsh/goal/disarm"):
            try:
                await asyncio.wait_for(self._quiet_request(method, {"agentId": self.agent_id}), STOP_TIMEOUT_S)
            except asyncio.TimeoutError:
                self.out.notice(f"the daemon did not answer {method} in {STOP_TIMEOUT_S:g} s")

    async def finish(self, door) -> None:
        if self.conn is not None and self.initialized:
            try:
                await asyncio.wait_for(self.conn.request("shutdown"), 30)
                self.conn.notify("exit")
            except (RunError, asyncio.TimeoutError, OSError):
                pass
        if self.conn is not None:
            await self.conn.close()
        await door.close()

    # ---- the outcome ----

    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.error is not None:
            return EXIT_ERROR
        if self.needed:
            return EXIT_PERSON
        goal = self.goal
        if self.goal_run and goal is not None and goal.get("phase") == "blocked":
            code = (goal.get("blockedReason") or {}).get("code")
            return EXIT_BUDGET if code in BUDGET_CODES else EXIT_BLOCKED
        return EXIT_OK

    def result(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "inputTokens": sum(int(u.get("inputTokens", 0)) for u in self.usage.values()),
            "outputTokens": sum(int(u.get("outputTokens", 0)) for u in self.usage.values()),
        }
        cached = sum(int(u.get("cachedInputTokens", 0)) for u in self.usage.values())
        if cached:
            usage["cachedInputTokens"] = cached
        if any(u.get("estimated") is True for u in self.usage.values()):
            usage["estimated"] = True
        out: dict[str, Any] = {"type": "result", "stopReason": self.stop_reason}
        if self.goal is not None:
            out["goal"] = self.goal
        out.update(usage=usage, durationMs=int((time.monotonic() - self.started) * 1000), sessionId=self.session_id)
        out["exitCode"] = self.exit_code()
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.needed:
            out["personNeeded"] = self.needed
        if self.plan is not None:
            out["plan"] = self.plan
        return out


def _title(text: str | None) -> str | None:
    if not text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return (first[:77] + "…") if len(first) > 78 else (first or None)


async def _run(args: argparse.Namespace, workspace: Path, prompt: str | None, out: Output) -> int:
    run = Run(args, workspace, prompt, out)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def interrupt() -> None:
        if not run.interrupted:
            run.interrupted = True
            main.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)
    door = find_door(workspace, out)
    run.via = door.via
    try:
        try:
            async with asyncio.timeout(args.timeout):
                await run.start(door)
                await run.open_session()
                await run.work()
        except asyncio.CancelledError:
            if not run.interrupted:
                raise
            main.uncancel()
            out.notice("interrupted: the turn is cancelled and the goal disarmed; everything committed is kept")
            await run.stop_turn()
        except TimeoutError:
            run.timed_out = True
            run.error = RunError("timeout", f"the run took longer than --timeout {args.timeout:g} s; its turn is cancelled")
            await run.stop_turn()
        except RunError as exc:
            run.error = exc
        except OSError as exc:
            run.error = RunError("io-error", exc.strerror or str(exc))
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await run.finish(door)
    out._clear_progress()
    out.end_line()
    if run.error is not None:
        out.notice(f"{run.error.message} ({run.error.kind})")
    goal = run.goal
    if run.goal_run and goal is not None and goal.get("phase") == "blocked":
        reason = goal.get("blockedReason") or {}
        out.notice(f"the goal is blocked: {reason.get('code')}: {reason.get('message')}")
    if out.as_json:
        out.line(run.result())
    return run.exit_code()


# ---- the command line -------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 with their kind: exit 2 means a blocked goal."""

    def error(self, message: str):  # type: ignore[override]
        raise RunError("invalid-params", message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dshd run", description="Run one prompt, or a goal until it ends, in the workspace here.")
    parser.add_argument("prompt", nargs="?", metavar="PROMPT|-", help="what to ask (- reads it from stdin)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="run in this session (default: a new one)")
    which.add_argument("--last", action="store_true", help="run in the session changed last")
    parser.add_argument("--plan", action="store_true", help="turn plan mode on first (the run ends with the plan: nobody approves it here)")
    parser.add_argument("--goal", metavar="OBJECTIVE", help="set a goal and run until it completes, blocks or spends its budget")
    parser.add_argument("--max-rounds", type=int, metavar="N", help="the goal's round budget")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="the goal's token budget")
    parser.add_argument("--json", action="store_true", help="JSON lines on stdout: session, chat items, result")
    parser.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds (exit 1, the turn cancelled)")
    return parser


def _check(args: argparse.Namespace) -> str | None:
    """The prompt to send (None: a goal run); RunError for flags that do not go together."""
    if args.prompt is not None and args.goal is not None:
        raise RunError("invalid-params", "give a PROMPT or --goal OBJECTIVE, not both", {"field": "goal"})
    for name in ("max_rounds", "max_tokens"):
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if value is not None and value < 1:
            raise RunError("invalid-params", f"{flag} must be at least 1", {"field": name})
        if value is not None and args.prompt is not None:
            raise RunError("invalid-params", f"{flag} is a goal's budget: give --goal OBJECTIVE (or no PROMPT, to resume the session's goal)",
                           {"field": name})
    if args.timeout is not None and not args.timeout > 0:
        raise RunError("invalid-params", "--timeout must be a positive number of seconds", {"field": "timeout"})
    if args.goal is not None and not args.goal.strip():
        raise RunError("invalid-params", "--goal needs an objective", {"field": "goal"})
    if args.session is not None:
        from dshd.agent import is_session_id

        if not is_session_id(args.session):
            raise RunError("invalid-params", f"--session: {args.session!r} is not a session id", {"field": "session"})
    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.read().rstrip("\n")  # `echo ... |` ends it with a newline nobody typed
    if prompt is not None and not prompt.strip():
        raise RunError("invalid-params", "the prompt is empty", {"field": "prompt"})
    if prompt is None and args.goal is None and args.session is None and not args.last:
        raise RunError("invalid-params", "nothing to run: give a PROMPT, - (stdin) or --goal OBJECTIVE", {"field": "prompt"})
    return prompt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    as_json = "--json" in argv
    out = Output(as_json)
    try:
        args = _parser().parse_args(argv)
        prompt = _check(args)
    except RunError as exc:
        if as_json:
            out.line({"type": "result", "stopReason": None, "usage": {"inputTokens": 0, "outputTokens": 0},
                      "durationMs": 0, "sessionId": None, "exitCode": EXIT_ERROR, "error": exc.to_json()})
        print(f"dshd run: {shown(exc.message)} ({exc.kind})", file=sys.stderr)
        return EXIT_ERROR
    from dshd.goal_cli import find_workspace

    workspace = find_workspace(Path.cwd())
    # As for `dshd serve`: no cyclic collection while the door's modules load (they live
    # for the process); the in-process door's initialize answer freezes them and turns
    # collection back on, the shared daemon's path turns it on once connected.
    gc.disable()
    try:
        return asyncio.run(_run(args, workspace, prompt, out))
    except KeyboardInterrupt:  # before the run's own handler was in place: nothing started
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `dshd run ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


__all__ = ["main", "Run", "RunError", "CLIENT_NAME"]
