"""`dshd` command line (SPEC section 7).

    dshd                       serve stdio (same as `dshd serve`)
    dshd serve                 the daemon over stdio (dshd.daemon.app:serve)
    dshd acp --stdio           the Agent Client Protocol over stdio (dshd.acp.app:main)
    dshd acp                   the same through the workspace's shared daemon (dshd_connect)
    dshd connect [--workspace DIR]   dsh on stdio through the workspace's shared daemon (dshd_connect)
    dshd daemon [--workspace DIR]    the shared daemon itself (dshd.shared_daemon:main)
    dshd daemon status|stop|restart [--workspace DIR]   see or steer it (dshd.daemon_cli)
    dshd demo ...              the scripted scenario (dshd.demo:main)
    dshd log verify PATH [--json]
    dshd log show PATH [--chat | --goal] [--svg FILE]
    dshd doctor [--workspace DIR] [--json] [--trusted]
    dshd goal status|create|edit|pause|resume|complete|clear [--session ID] [--json]   (dshd.goal_cli:main)
    dshd run [PROMPT|-] [--session ID|--last] [--plan] [--goal OBJECTIVE] [...]   (dshd.run_cli:main)

`serve` and `demo` live in other modules, imported only when asked for, so `dshd log`
works (and fails clearly) whatever state the rest of the package is in.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import argparse

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _lazy(target: str) -> Callable[[list[str]], int] | None:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only "the module is not there" means not built yet; a broken import inside it is
        # a real error and must show its traceback.
        if exc.name is not None and module_name.startswith(exc.name):
            return None
        raise
    return getattr(module, attr, None)


def _run_external(target: str, what: str, argv: list[str]) -> int:
    fn = _lazy(target)
    if fn is None:
        print(f"dshd: `{what}` is not available yet in this build ({target} is missing)", file=sys.stderr)
        return EXIT_FAIL
    rc = fn(argv)
    return int(rc or 0)


# ---- log verify / show --------------------------------------------------------------


def _check_path(path: Path) -> str | None:
    """A clear message if PATH cannot be a readable log file, else None."""
    if not path.exists():
        return f"no such file: {path}"
    if path.is_dir():
        return f"{path} is a directory, not a log file (give the log.jsonl inside it)"
    if not os.access(path, os.R_OK):
        return f"cannot read {path}: permission denied"
    return None


def goal_summary(goal_state) -> dict[str, Any] | None:
    """The folded goal as JSON (GoalView's persisted fields; activation is in-process only)."""
    goal = goal_state.goal
    if goal is None:
        return None
    out: dict[str, Any] = {
        "id": goal.id,
        "revision": goal.revision,
        "objective": goal.objective,
        "phase": goal.phase,
    }
    if goal.blockedReason is not None:
        out["blockedReason"] = {"code": goal.blockedReason.code, "message": goal.blockedReason.message}
    out.update(
        maxRounds=goal.maxRounds,
        roundsStarted=goal_state.rounds_started,
        roundsLeft=max(0, goal.maxRounds - goal_state.rounds_started),
        tokensUsed=goal_state.tokens_used,
    )
    if goal_state.tokens_estimated:
        out["tokensEstimated"] = True
    if goal.maxTokens is not None:
        out["maxTokens"] = goal.maxTokens
    out.update(createdAt=goal_state.created_at, updatedAt=goal_state.updated_at)
    return out


def _verify(path: Path, as_json: bool) -> int:
    from dshd.errors import DshError
    from dshd.folds import ReplayError, replay

    problem = _check_path(path)
    result = None
    error: ReplayError | None = None
    if problem is None:
        try:
            # A full strict replay: verify trusts no checkpoint, takes no lock, changes nothing.
            # The person named this file: a link they made is followed (resolve), and
            # the file it leads to must still be a regular file.
            result = replay(path.resolve(), use_checkpoint=False)
        except ReplayError as exc:
            error = exc
        except OSError as exc:
            problem = f"cannot read {path}: {exc.strerror or exc}"
        except DshError as exc:  # unsafe-path: not a regular file (a FIFO, a device)
            problem = f"cannot read {path}: {exc.message}"
    if problem is not None:
        if as_json:
            print(json.dumps({"ok": False, "reason": problem}))
        else:
            print(f"dshd: {problem}", file=sys.stderr)
        return EXIT_FAIL
    if error is not None:
        if as_json:
            print(json.dumps({"ok": False, "line": error.line, "seq": error.seq, "reason": error.reason}))
        else:
            print(f"{path}: NOT sound: line {error.line}, seq {error.seq}: {_shown(error.reason)}")
        return EXIT_FAIL
    assert result is not None
    state = result.state
    goal = goal_summary(state.goal)
    if as_json:
        out: dict[str, Any] = {
            "ok": True,
            "events": result.events,
            "plan": {"active": state.plan.active},
            "goal": goal,
        }
        if result.torn_tail is not None:
            out["tornTail"] = {"offset": result.torn_tail.offset, "length": result.torn_tail.length}
        print(json.dumps(out))
    else:
        print(f"{path}: sound: {result.events} events, session {state.session_id}")
        print(f"  plan mode: {'on' if state.plan.active else 'off'}")
        print(f"  goal: {_goal_line(goal, state.goal.cleared)}")
        if result.torn_tail is not None:
            print(
                f"  torn tail: {result.torn_tail.length} bytes after offset {result.torn_tail.offset} "
                "(an unacknowledged write; the next open cuts it and keeps a copy)"
            )
    return EXIT_OK


def _goal_line(goal: dict[str, Any] | None, cleared) -> str:
    if goal is None:
        return f"none (goal {cleared.id} cleared at revision {cleared.revision})" if cleared else "none"
    budget = f"/{goal['maxTokens']}" if "maxTokens" in goal else ""
    text = (
        f"{goal['id']} rev {goal['revision']} {goal['phase']}, "
        f"{goal['roundsStarted']}/{goal['maxRounds']} rounds, {'~' if goal.get('tokensEstimated') else ''}"
        f"{goal['tokensUsed']}{budget} tokens: {goal['objective']!r}"
    )
    if "blockedReason" in goal:
        text += f" [blocked: {goal['blockedReason']['code']}: {_shown(goal['blockedReason']['message'])}]"
    return text


def _shown(text: str) -> str:
    from dshd.formats import shown

    return shown(text)


def _clip(text: str, width: int = 72) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_event(event) -> str:
    """One line for people."""
    from dshd.folds import events as ev

    d = event.data
    cls = event.__class__
    if cls is ev.SessionStart:
        text = f"session {d.sessionId}"
        if d.title:
            text += f" {d.title!r}"
        if d.forkedFrom:
            text += f" (forked from {d.forkedFrom.sessionId} at seq {d.forkedFrom.seq})"
        return text
    if cls is ev.TurnOpen:
        return f"turn {d.turn} opened ({d.cause})"
    if cls is ev.TurnClose:
        return f"turn {d.turn} closed: {d.stopReason}"
    if cls is ev.UserMessage:
        who = d.source if d.plugin is None else f"{d.source}:{d.plugin}"
        text = f"[{who}] {_clip(d.text)}"
        if d.goalRound:
            text += f"  (round {d.goalRound.round} of goal {d.goalRound.goalId} rev {d.goalRound.revision})"
        return text
    if cls is ev.RequestHeader:
        return (
            f"step {d.step}, plan {'on' if d.planActive else 'off'}, "
            f"sections [{', '.join(d.sections)}], tools [{', '.join(d.tools)}]"
        )
    if cls is ev.AssistantMessage:
        text = f"[assistant] {_clip(d.text)}"
        if d.usage is not None:
            about = "~" if d.usage.estimated else ""  # characters/4: the provider reported none
            cached = f", {d.usage.cachedInputTokens} of them cached" if d.usage.cachedInputTokens else ""
            text += f"  ({about}{d.usage.inputTokens} in{cached} + {about}{d.usage.outputTokens} out tokens)"
        return text
    if cls is ev.ToolCall:  # the name is the model's: one escaped line
        return f"call {d.callId}: {_shown(d.name)}({_clip(json.dumps(d.arguments), 60)})"
    if cls is ev.ToolResult:
        return f"result {d.callId}: {'ok' if d.ok else 'FAILED'} {_clip(d.content, 60)}"
    if cls is ev.PlanMode:
        return f"plan mode {'on' if d.active else 'off'}"
    if cls is ev.PlanForget:
        return f"approved plan of call {d.callId} forgotten (/plan forget)"
    if cls is ev.ContextCompact:
        from dshd.api.words import compaction_text

        label = compaction_text(d.tokensBefore, d.tokensAfter)
        return f"{label} (through seq {d.throughSeq}): {_clip(d.summary, 60)}"
    if cls is ev.GoalChange:
        if d.op == "clear":
            return f"goal {d.cleared.id} cleared (was rev {d.cleared.revision})"
        g = d.goal
        text = f"goal {g.id} {d.op} -> rev {g.revision} {g.phase}, {d.roundsStarted}/{g.maxRounds} rounds"
        if d.tokensUsed is not None or g.maxTokens is not None:
            budget = "" if g.maxTokens is None else f"/{g.maxTokens}"
            text += f", {d.tokensUsed or 0}{budget} tokens"
        if d.op in ("create", "edit"):
            text += f": {_clip(g.objective, 50)!r}"
        if g.blockedReason:
            text += f" [{g.blockedReason.code}: {_clip(g.blockedReason.message, 40)}]"
        return text
    if cls is ev.McpServer:  # the server's name and its own last words: escaped, one line
        return f"MCP server {_shown(d.name)} {d.state}: {_clip(_shown(d.reason), 100)}"
    if cls is ev.CheckpointTaken:
        return f"checkpoint {d.phase} step {d.step}: tree {d.tree[:12]}, {d.files} files"
    if cls is ev.CheckpointRestored:
        from dshd.formats import shown

        text = f"restored {len(d.files)} files to checkpoint {d.checkpoint}"
        if d.files:
            text += f": {_clip(shown(', '.join(d.files)), 50)}"
        if d.forced:
            text += f" ({len(d.forced)} of them changed by the person, overwritten)"
        return text
    return cls.__name__


def _show(path: Path, chat: bool = False, goal: bool = False, svg_path: Path | None = None) -> int:
    import msgspec

    from dshd.errors import DshError
    from dshd.folds import ReplayError, replay
    from dshd.folds.events import decode_line
    from dshd.log import iter_records

    problem = _check_path(path)
    if problem is not None:
        print(f"dshd: {problem}", file=sys.stderr)
        return EXIT_FAIL
    error: ReplayError | None = None
    try:
        path = path.resolve()  # a link the person named is theirs to follow
        result = replay(path, use_checkpoint=False)
    except ReplayError as exc:
        error, result = exc, None
    except (OSError, DshError) as exc:
        print(f"dshd: cannot read {path}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return EXIT_FAIL
    out = sys.stdout
    if result is not None:
        state = result.state
        out.write(f"session {state.session_id}" + (f" {state.title!r}" if state.title else "") + "\n")
        out.write(f"  events:    {result.events} (last at {state.last_at})\n")
        out.write(f"  plan mode: {'on' if state.plan.active else 'off'}\n")
        out.write(f"  goal:      {_goal_line(goal_summary(state.goal), state.goal.cleared)}\n")
        turn = state.turn
        out.write(f"  turn:      {f'{turn.last_turn} open (step {turn.step})' if turn.open else f'{turn.last_turn} turns, none open'}\n")
        if result.torn_tail is not None:
            out.write(f"  torn tail: {result.torn_tail.length} bytes (unacknowledged; cut on next open)\n")
    else:
        out.write(f"log is NOT sound: line {error.line}, seq {error.seq}: {_shown(error.reason)}\n")
    out.write("\n")
    stop = error.line if error is not None else None
    if chat:
        return _show_chat(path, stop, error, out)
    if goal:
        return _show_goal(path, stop, error, out, svg_path)
    for line_no, _offset, line in iter_records(path):
        if stop is not None and line_no >= stop:
            out.write(f"{line_no:>6}  !! {error.reason}\n")
            break
        try:
            event = decode_line(line)
        except msgspec.MsgspecError as exc:  # only reachable if the file changed under us
            out.write(f"{line_no:>6}  !! {exc}\n")
            return EXIT_FAIL
        turn_mark = f"t{event.turn}" if event.turn is not None else ""
        out.write(f"{event.seq:>6}  {event.at}  {turn_mark:>4}  {event.__class__.__struct_config__.tag:<17} {describe_event(event)}\n")
    return EXIT_OK if error is None else EXIT_FAIL


def _show_chat(path: Path, stop: int | None, error, out) -> int:
    """The conversation as the editors show it: the daemon's chat items (dshd.api.chat),
    each under the seq of the event that made it."""
    import msgspec

    from dshd.api import text
    from dshd.api.chat import ChatProjection
    from dshd.daemon.to_wire import chat_item as to_json  # the items as dsh/chat/get sends them
    from dshd.log import iter_records

    projection = ChatProjection()
    for line_no, _offset, line in iter_records(path):
        if stop is not None and line_no >= stop:
            break
        try:
            projection.apply_event(msgspec.json.decode(line))
        except msgspec.MsgspecError as exc:  # only reachable if the file changed under us
            out.write(f"{line_no:>6}  !! {exc}\n")
            return EXIT_FAIL
    for item in projection.items():
        shown = to_json(item)
        for number, row in enumerate(text.lines(shown)):
            mark = f"{shown['seq']:>6}" if number == 0 and "seq" in shown else " " * 6
            out.write(f"{mark}  {row}\n")
    if error is not None:
        out.write(f"{error.line:>6}  !! {error.reason}\n")
        return EXIT_FAIL
    return EXIT_OK


def _show_goal(path: Path, stop: int | None, error, out, svg_path: Path | None) -> int:
    """The current goal's rounds (dshd.folds.rounds, what dsh/goal/rounds sends) as a
    table, and with ``svg_path`` as a picture written there; for a log that is not sound,
    the rounds of the events before the bad line."""
    import msgspec

    from dshd.api import timeline
    from dshd.folds.rounds import RoundsFold
    from dshd.log import iter_records

    fold = RoundsFold()
    for line_no, _offset, line in iter_records(path):
        if stop is not None and line_no >= stop:
            break
        try:
            fold.feed_line(line)
        except msgspec.MsgspecError as exc:  # only reachable if the file changed under us
            out.write(f"{line_no:>6}  !! {exc}\n")
            return EXIT_FAIL
    result = fold.result()
    for row in timeline.table(result):
        out.write(row + "\n")
    if svg_path is not None:
        try:
            # A new file or one of the person's own: they named it (a link they made is theirs).
            svg_path.write_text(timeline.svg(result), encoding="utf-8")
        except OSError as exc:
            print(f"dshd: cannot write {svg_path}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_FAIL
        out.write(f"picture: {svg_path}\n")
    if error is not None:
        out.write(f"{error.line:>6}  !! {error.reason}\n")
        return EXIT_FAIL
    return EXIT_OK


# ---- doctor ---------------------------------------------------------------------------


def _doctor(workspace: Path, as_json: bool, trusted: bool = False) -> int:
    """The configured provider: does it answer, is its key variable set (never the key).
    The config is read as the daemon reads it (user config, workspace file, trust): a
    workspace file's guarded keys apply only to a trusted folder (``--trusted`` says so,
    as an editor would), so the doctor never sends the key where the daemon would not.
    Then the MCP servers a session would start: started as a session starts them (in the
    sandbox), their state and tools read, and stopped again; a workspace's servers only in
    a trusted folder (else they are named as ignored)."""
    import asyncio

    from dshd.agent.config_layers import load_layers, user_config_path
    from dshd.errors import DshError
    from dshd.models.health import check

    try:
        loaded = load_layers(workspace, None, user_file=user_config_path(), editor_trusted=trusted)
    except DshError as exc:
        if as_json:
            print(json.dumps({"healthy": False, "config": {"kind": exc.kind, "message": exc.message, **exc.data}}))
        else:
            where = f" (in {_shown(exc.data['file'])})" if "file" in exc.data else ""
            print(f"config    NOT ok: {_shown(exc.message)}{where}\nunhealthy")
        return EXIT_FAIL

    import logging

    # A server that fails is reported below, whole, on its own line: its log record would
    # say it a second time on stderr (other records, e.g. tools left out, still go there).
    logging.getLogger("dshd.mcp.servers").addFilter(_not_a_server_failure)

    async def both():
        return await asyncio.gather(check(loaded.config), _mcp_states(workspace, loaded.config))

    health, mcp_states = asyncio.run(both())
    mcp_ignored = [item for item in loaded.ignored if item.key.startswith("mcp")]
    mcp_failed = any(state.state == "failed" for state in mcp_states)
    healthy = health.healthy and not mcp_failed
    if as_json:
        ignored = [{"file": item.file, "key": item.key, "why": item.why} for item in loaded.ignored]
        mcp = {
            "plugin": "mcp" in loaded.config.plugins,
            "servers": [
                {"name": s.name, "source": s.source, "transport": s.transport, "state": s.state, "reason": s.reason, "tools": list(s.tools)}
                for s in mcp_states
            ],
            "ignored": [{"file": item.file, "key": item.key, "why": item.why} for item in mcp_ignored],
        }
        print(json.dumps({"workspace": str(workspace), "trusted": loaded.trusted, "ignored": ignored, **health.to_dict(), "healthy": healthy, "mcp": mcp}))
        return EXIT_OK if healthy else EXIT_FAIL
    out = sys.stdout
    out.write(f"workspace {workspace}{'' if loaded.trusted else ' (not trusted)'}\n")
    # A key of a workspace file, a provider's error text: one escaped line each.
    for item in loaded.ignored:
        out.write(f"ignored   {_shown(item.key)} from {_shown(item.file)}: {_shown(item.why)}\n")
    if health.provider == "scripted":
        out.write("provider  scripted (no network, no key)\n")
    else:
        out.write(f"provider  {health.provider}, model {_shown(str(health.model))}, baseUrl {_shown(str(health.base_url))}\n")
        if health.key_set:
            out.write(f"key       {health.key_env} is set\n")
        elif health.key_needed:
            out.write(f"key       {health.key_env} is NOT set: set it to your API key in the environment that starts dshd\n")
        else:
            out.write(f"key       {health.key_env} is not set (a server on this machine may not need one)\n")
        if health.answered:
            out.write(f"answers   yes (a one-token reply in {health.ms} ms)\n")
        else:
            assert health.error is not None
            out.write(f"answers   NO: {health.error['kind']}: {_shown(str(health.error['message']))}\n")
    for line in _mcp_lines(loaded, mcp_states, mcp_ignored):
        out.write(f"mcp       {line}\n")
    out.write("healthy\n" if healthy else "unhealthy\n")
    return EXIT_OK if healthy else EXIT_FAIL


def _not_a_server_failure(record) -> bool:
    return not (isinstance(record.msg, str) and record.msg.startswith("MCP server %s failed"))


async def _mcp_states(workspace: Path, config) -> list:
    """The configured MCP servers, started as a session starts them (in the command
    sandbox, each bounded by its startupTimeoutS), as they stood once all were up or
    failed; every process tree is stopped before this returns."""
    if "mcp" not in config.plugins or not config.mcp.servers:
        return []
    from dshd.agent.tools import ToolCatalogue
    from dshd.mcp.config import specs_from_config
    from dshd.mcp.servers import McpServers

    servers = McpServers(
        workspace, ToolCatalogue(), network=config.tools.network, env_names=config.tools.env, expanded_names=config.mcp.expandEnv,
        unix_sockets=config.tools.unixSockets,
    )
    servers.add(specs_from_config(config.mcp.servers, config.mcp_workspace_servers))
    try:
        await servers.ready()
        return servers.states()
    finally:
        await servers.aclose()


MCP_REASON_MAX = 4000  # characters of a failed server's reason shown


def _mcp_lines(loaded, states: list, ignored: list) -> list[str]:
    """One line per server: name, where it was configured, how it is reached, its state
    and why, its tools; names and reasons escaped (a server's own words, a cloned repository's names)."""
    from dshd.formats import clip, shown

    config = loaded.config
    if "mcp" not in config.plugins:
        if config.mcp.servers:
            return [f'off: the mcp plugin is not in plugins, so none of the {len(config.mcp.servers)} configured servers starts']
        return []
    lines = []
    for state in states:
        head = f"{shown(state.name)} ({state.source}, {state.transport}): "
        if state.state == "ready":
            names = ", ".join(shown(t) for t in state.tools) or "none"
            lines.append(f"{head}ready, {len(state.tools)} tool{'' if len(state.tools) == 1 else 's'}: {names}")
        elif state.state == "failed":
            # Whole: the reason ends with the fix (a hint can be long); capped only against
            # a server that writes pages to stderr.
            lines.append(f"{head}FAILED: {clip(shown(state.reason or 'no reason given'), MCP_REASON_MAX)}")
        else:
            lines.append(f"{head}{state.state}" + (f": {shown(state.reason)}" if state.reason else ""))
    for item in ignored:
        name = item.key.removeprefix("mcp.servers.").removeprefix("mcpServers.")
        lines.append(f"{shown(name)} (workspace, {shown(Path(item.file).name)}): ignored, {item.why}")
    if not lines:
        lines.append("no servers configured")
    return lines


# ---- output for people ------------------------------------------------------------------


def for_people(*, as_json: bool, log_records: bool = False, prefix: str = "dshd") -> None:
    """What this command prints reaches a terminal (or a file a person reads): stdout and
    stderr escape every write (api/escape.py), so no server's, model's or repository's
    string acts on the terminal, whoever prints it; JSON stays the same value.
    ``log_records``: records of dshd's own modules (an MCP server left out or failed) go
    to stderr as one escaped line each, not through logging's bare last resort."""
    from dshd.api.escape import ShownStream, shown_json, shown_lines

    if not isinstance(sys.stdout, ShownStream):
        sys.stdout = ShownStream(sys.stdout, shown_json if as_json else shown_lines)  # type: ignore[assignment]
        sys.stderr = ShownStream(sys.stderr)  # type: ignore[assignment]
    if log_records:
        import logging

        from dshd.models.errors import RedactingFormatter

        handler = logging.StreamHandler()  # sys.stderr as it is now: the escaping one
        handler.setFormatter(RedactingFormatter(f"{prefix}: %(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.WARNING, handlers=[handler])


# ---- a reader that leaves early ---------------------------------------------------------


class StdoutMayClose:
    """``sys.stdout`` for a command whose reader may leave before it ends (`| head`): once
    the pipe is closed, the rest of the output goes to /dev/null, so the command finishes
    what it does and exits with the status it would have had, with no traceback and no
    "Exception ignored" at exit (docs/choices.md)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.reader_left = False

    def write(self, text: str) -> int:
        if not self.reader_left:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._to_devnull()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()
            self._stream.flush()  # what was buffered for the pipe: to /dev/null now

    def _to_devnull(self) -> None:
        self.reader_left = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...
        return getattr(self._stream, name)


def _stdout_may_close() -> None:
    if not isinstance(sys.stdout, StdoutMayClose):
        sys.stdout = StdoutMayClose(sys.stdout)  # type: ignore[assignment]


# ---- entry point ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    import argparse  # not on the way to `serve` (its start-up is measured: bench/startup.py)

    parser = argparse.ArgumentParser(prog="dshd", description="Editor daemon for coding agents.")
    from dshd import __version__

    parser.add_argument("--version", action="version", version=f"dshd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{connect,serve,acp,daemon,demo,log,doctor,goal,run}")
    sub.add_parser("connect", help="JSON-RPC on stdio through the workspace's shared daemon (what editors start)", add_help=False)
    sub.add_parser("serve", help="serve JSON-RPC over stdio in this process (the default)", add_help=False)
    sub.add_parser("acp", help="the Agent Client Protocol on stdio (Zed, CodeCompanion, Avante); --stdio: in this process", add_help=False)
    sub.add_parser("daemon", help="run the workspace's shared daemon on its Unix socket", add_help=False)
    # demo parses its own options (including --help): everything after `demo` goes to it.
    sub.add_parser("demo", help="run the scripted scenario as a real client of the daemon", add_help=False)
    log_parser = sub.add_parser("log", help="inspect a session log")
    log_sub = log_parser.add_subparsers(dest="log_command", metavar="{verify,show}", required=True)
    verify = log_sub.add_parser("verify", help="strictly replay one log; exit 1 names the first bad line")
    verify.add_argument("path", type=Path, metavar="PATH")
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    show = log_sub.add_parser("show", help="print the folded state and the events")
    show.add_argument("path", type=Path, metavar="PATH")
    show.add_argument("--chat", action="store_true", help="print the conversation as the editors show it, not the events")
    show.add_argument("--goal", action="store_true", help="print the current goal's rounds as a table, not the events")
    show.add_argument("--svg", type=Path, metavar="FILE", help="write the current goal's rounds as a picture (SVG) to FILE")
    # goal parses its own options (including --help): everything after `goal` goes to it.
    sub.add_parser("goal", help="show or change a session's goal (through the shared daemon when it holds the session)", add_help=False)
    # run parses its own options (including --help): everything after `run` goes to it.
    sub.add_parser("run", help="run one prompt, or a goal until it ends, without an editor (exit status says how it ended)", add_help=False)
    doctor = sub.add_parser("doctor", help="check that the configured model provider answers and its key is set")
    doctor.add_argument("--workspace", type=Path, default=Path.cwd(), metavar="DIR", help="the workspace (default: here)")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.add_argument(
        "--trusted", action="store_true", help="trust the workspace: its config may choose the provider, server and key variable"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] == "serve":
        # No cyclic garbage collection while the daemon's modules load (they make only
        # objects that live for the process): the first initialize answer freezes them
        # out of every later collection and turns collection back on (daemon/server.py).
        gc.disable()
        return _run_external("dshd.daemon.app:serve", "serve", argv[1:])
    if argv[0] == "acp":
        if "--stdio" not in argv[1:]:
            return _run_external("dshd_connect:acp_main", "acp", argv[1:])
        return _run_external("dshd.acp.app:main", "acp", [arg for arg in argv[1:] if arg != "--stdio"])
    if argv[0] == "connect":
        return _run_external("dshd_connect:connect_main", "connect", argv[1:])
    if argv[0] in ("log", "doctor", "goal", "run") or (argv[0] == "daemon" and argv[1:2] in (["status"], ["stop"], ["restart"])):
        _stdout_may_close()  # commands whose output a person pipes on (JSON to `jq`, `| head`)
    if argv[0] == "daemon":
        if argv[1:2] and argv[1] in ("status", "stop", "restart"):
            return _run_external("dshd.daemon_cli:main", "daemon", argv[1:])
        return _run_external("dshd.shared_daemon:main", "daemon", argv[1:])
    if argv[0] == "demo":
        return _run_external("dshd.demo:main", "demo", argv[1:])
    if argv[0] == "goal":
        return _run_external("dshd.goal_cli:main", "goal", argv[1:])
    if argv[0] == "run":
        return _run_external("dshd.run_cli:main", "run", argv[1:])
    args = _parser().parse_args(argv)  # usage errors exit 2
    if args.command in ("doctor", "log"):
        for_people(as_json=args.json if hasattr(args, "json") else False, log_records=args.command == "doctor")
    if args.command == "doctor":
        return _doctor(args.workspace.resolve(), args.json, args.trusted)
    if args.command == "log":
        try:
            if args.log_command == "verify":
                return _verify(args.path, args.json)
            if args.chat and (args.goal or args.svg is not None):
                print("dshd: --chat cannot be combined with --goal or --svg", file=sys.stderr)
                return EXIT_USAGE
            if args.goal or args.svg is not None:
                return _show(args.path, goal=True, svg_path=args.svg)
            return _show(args.path, chat=args.chat)
        except BrokenPipeError:  # `dshd log show | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
    _parser().print_usage(sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
