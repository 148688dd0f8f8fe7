"""``McpServers``: the MCP servers of one agent.

:meth:`McpServers.add` starts servers (the config's when the plugin attaches, an ACP
session's when it opens); each starts in a task of its own, bounded by its
``startupTimeoutS``, and its tools go into the agent's catalogue when it is up. The
loop's first request of a turn waits for :meth:`McpServers.ready`, so the model sees
every tool of the servers that started.

A stdio server runs in the command sandbox, started through the one launcher
(:func:`dshd.sandbox.launcher.sandbox_start`, as commands are): bubblewrap with an
environment of its own, the workspace writable and the rest of the file system read-only,
``.git`` and ``.dsh`` read-only, a private ``/tmp``, the network as ``[tools] network``,
no host Unix socket (the socket wall, unless the user config's ``[tools] unixSockets``
says otherwise), the shared daemon's folder hidden, the environment commands get plus
the server's own ``env`` set inside the sandbox (never on a command line), in its own PID
namespace tied to the daemon (``--die-with-parent``), in its own process group. A loader
variable (``LD_PRELOAD``, ``GCONV_PATH``, ...) in a server's ``env``, whoever configured
it, fails that server alone, naming the variable. Its ``cwd`` is a folder of the
workspace; a server of the user config may name an absolute one outside it (it still runs
in the sandbox, where that folder is read-only). Only ``sandbox = "none"`` from the user
config runs it directly. Where no sandbox can be built the server does not start: it is
failed, with the reason. A sandboxed server run through a package runner
(``npx``, ``uvx``, ``bunx``, ``pnpm dlx``, ``yarn dlx``) that fails to start gets a hint in
its reason: the runner wants the network and a writable cache, which the sandbox does not
give it (:func:`runner_hint`).

A server that fails to start, whose process exits, whose HTTP connection is lost (a call
found it refused or reset, or the transport ended) or session ended (the server answers
404 to it: restarted), or that does not answer a call within
its ``toolTimeoutS`` (it is then "hung", and killed) is failed for the rest of the
session: its tools are withdrawn from the catalogue (a call the model still makes is
refused saying why), the failure is written once to the log (``mcp/server``, through
``record``) and each listener is told once. Nothing restarts it until the session is
opened again. :meth:`McpServers.close` (the agent closing) kills every server's process
tree at once; :meth:`McpServers.aclose` then waits for their tasks.

A server that sends ``notifications/tools/list_changed`` has its tools listed again (one
re-list at a time, a burst giving one more at most, each bounded by ``startupTimeoutS``;
one that fails is logged and changes nothing) and the difference applied to the
catalogue with the rules of the first listing (:meth:`McpServers._take`). A tool listed
before in this session keeps the definition it was first listed with, so a server cannot
make an approved or "exec" tool a "read" one mid-session; a tool no longer listed is
withdrawn, and a call of it refused. A call during which the server said so returns once
that re-list is done: the model's next request offers the new list (the loop reads the
catalogue for each request).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from dshd.agent.tools import Tool, ToolCatalogue, ToolOutcome
from dshd.formats import clip, shown
from dshd.mcp.config import McpServerSpec, Source
from dshd.mcp.tools import (
    SCHEMA_CAP,
    definition_bytes,
    input_schema,
    make_tool,
    result_outcome,
    schema_bytes,
    tool_name,
)
from dshd.sandbox import probe
from dshd.sandbox.host import host_policy
from dshd.sandbox.launcher import SandboxStart, loader_variable, sandbox_start
from dshd.sandbox.policy import replaced_folders, socket_filter
from dshd.sandbox.probe import Probe
from dshd.sandbox.seccomp import SeccompUnavailable
from dshd.tools import safepath
from dshd.tools.paths import PROTECTED, PathRefused
from dshd.tools.run import command_env, daemon_folders, sandboxed_env, wall_choice

if TYPE_CHECKING:
    from dshd.mcp.client import Connection, Launch

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "failed", "stopped"]
MAX_TOOLS = 256  # tools of one server put in the catalogue at most (each costs every request)
DEFINITIONS_CAP = 64 * 1024  # bytes of one server's tool definitions (schemas, descriptions) taken
REMEMBERED_CAP = 4 * MAX_TOOLS  # tools one server may put in the catalogue over a session
HIDDEN_MIN = 4  # characters of an [mcp] expandEnv value hidden in reasons, at least


@attrs.frozen
class McpServerState:
    """One server as ``dshd doctor`` and the doors read it; ``tools``: its dshd tool names."""

    name: str
    source: Source
    transport: Literal["stdio", "http"]
    state: State
    reason: str | None = None
    tools: tuple[str, ...] = ()


class StartRefused(Exception):
    """The server cannot be started here as configured (no sandbox, a bad cwd, no token)."""


@attrs.define(eq=False)
class _Server:
    spec: McpServerSpec
    state: State = "starting"
    reason: str | None = None
    tools: tuple[str, ...] = ()
    connection: "Connection | None" = None
    task: asyncio.Task | None = None
    # Each tool this session put in the catalogue, by its dshd name: the definition it was
    # first listed with and the tool made of it (what every later listing of it gets).
    first: dict[str, tuple[Any, Tool]] = attrs.Factory(dict)
    ignored: set[str] = attrs.Factory(set)  # tools whose changed definition was logged once
    relist: asyncio.Task | None = None  # the running re-list of its tools
    relist_again: bool = False  # it said its tools changed since the re-list began
    # The launcher's memfds of a stdio server's start, open until the server has started.
    started_with: SandboxStart | None = None

    def view(self) -> McpServerState:
        return McpServerState(self.spec.name, self.spec.source, self.spec.transport, self.state, self.reason, self.tools)


Record = Callable[[str, str], None]  # (server name, reason): the mcp/server event
Listener = Callable[[McpServerState], None]


class McpServers:
    def __init__(
        self,
        root: Path,
        catalogue: ToolCatalogue,
        *,
        network: bool = False,
        env_names: Iterable[str] = (),
        record: Record | None = None,
        expanded_names: Iterable[str] = (),
        unix_sockets: Iterable[str] = (),
    ) -> None:
        self.root = Path(root).resolve()
        self.catalogue = catalogue
        self.network = network  # [tools] network: what a sandboxed server may reach
        self.env_names = tuple(env_names)  # the user config's [tools] env
        self.unix_sockets = tuple(unix_sockets)  # the user config's [tools] unixSockets
        # The values .mcp.json may have expanded ([mcp] expandEnv): a reason (the state,
        # the log, the session's record) shows ${NAME} in their place. Longest first, so a
        # value inside another is not half replaced; a very short value is no secret and
        # would replace ordinary text.
        values = {name: os.environ.get(name, "") for name in expanded_names}
        self._hidden = sorted(((v, n) for n, v in values.items() if len(v) >= HIDDEN_MIN), key=lambda p: -len(p[0]))
        self._record = record
        self._servers: dict[str, _Server] = {}
        self._listeners: list[Listener] = []
        self._closers: set[asyncio.Task] = set()
        self.closed = False

    # ---- the public operations ----------------------------------------------------------

    def add(self, specs: Iterable[McpServerSpec], source: Source | None = None) -> None:
        """Start ``specs`` (with ``source`` set on each when given). A name already here
        keeps its first server; a disabled server is listed as stopped."""
        for spec in specs:
            if source is not None and spec.source != source:
                spec = attrs.evolve(spec, source=source)
            if spec.name in self._servers:
                log.warning("MCP server %s is configured twice; the first one stays", spec.name)
                continue
            server = self._servers[spec.name] = _Server(spec)
            if self.closed:
                server.state, server.reason = "stopped", "the session was closed"
            elif not spec.enabled:
                server.state, server.reason = "stopped", "disabled (enabled = false)"
            else:
                try:
                    asyncio.get_running_loop()
                except RuntimeError:
                    continue  # added outside the event loop: started by the first ready()
                self._start_task(server)

    def _start_task(self, server: _Server) -> None:
        server.task = asyncio.get_running_loop().create_task(self._start(server), name=f"mcp-start-{server.spec.name}")

    async def ready(self) -> None:
        """Until every server added so far is up or failed (each bounded by its own
        ``startupTimeoutS``)."""
        for server in self._servers.values():
            if server.state == "starting" and server.task is None:
                self._start_task(server)
        starting = [s.task for s in self._servers.values() if s.task is not None and not s.task.done()]
        if starting:
            await asyncio.wait(starting)

    def states(self) -> list[McpServerState]:
        return [server.view() for server in self._servers.values()]

    def add_listener(self, fn: Listener) -> Callable[[], None]:
        """``fn(state)`` once for each server that fails to start, dies or hangs."""
        self._listeners.append(fn)

        def remove() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return remove

    def close(self) -> None:
        """Stop every server now: each process tree is killed before this returns (the
        agent's ``close()`` is synchronous); their tasks end in the background."""
        if self.closed:
            return
        self.closed = True
        for server in self._servers.values():
            if server.state in ("starting", "ready"):
                server.state, server.reason = "stopped", "the session was closed"
            if server.connection is not None:
                server.connection.stop()
            for task in (server.task, server.relist):
                if task is not None and not task.done():
                    task.cancel()

    async def aclose(self) -> None:
        self.close()
        waits = [s.connection.aclose() for s in self._servers.values() if s.connection is not None]
        tasks = [t for s in self._servers.values() for t in (s.task, s.relist) if t is not None and not t.done()]
        await asyncio.gather(*waits, *tasks, *self._closers, return_exceptions=True)

    # ---- tool calls (dshd.mcp.tools.ToolCaller) ---------------------------------------------

    def refusal(self, name: str, tool: str | None = None) -> str | None:
        """Why a call to the server ``name`` (of its ``tool``, when given) cannot run now
        (None: it can)."""
        server = self._servers.get(name)
        if server is None:
            return f"there is no MCP server {name}"
        if server.state == "ready":
            if tool is not None and tool_name(name, tool) not in server.tools:
                return f"the MCP server {name} no longer lists its tool {shown(clip(tool, 80))}"
            return None
        if server.state == "failed":
            return f"the MCP server {name} failed ({server.reason}); its tools are gone for this session"
        return f"the MCP server {name} is {server.state}"

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        refused = self.refusal(name, tool)
        server = self._servers.get(name)
        if refused is not None or server is None or server.connection is None:
            return ToolOutcome.failure(f"Not run: {refused or 'the server is not running'}")
        timeout = server.spec.tool_timeout_s
        from dshd.mcp.client import ServerGone

        try:
            result = await server.connection.call(tool, arguments, timeout)
            await self._relisted(server)
        except asyncio.TimeoutError:
            self._fail(server, f"hung: a {tool} call had no answer within {timeout:g} s (toolTimeoutS)")
            return ToolOutcome.failure(
                f"Not finished: the MCP server {name} did not answer this {tool} call within {timeout:g} s "
                "(toolTimeoutS); the server was stopped and its tools are gone for this session"
            )
        except ServerGone as exc:
            if server.state == "failed":  # its HTTP connection was lost (or its session ended) in this call
                said = "Not run" if exc.not_run else "Not finished"
                return ToolOutcome.failure(
                    f"{said}: the MCP server {name} failed ({server.reason}); its tools are gone for this session"
                )
            return ToolOutcome.failure(f"Not run: the MCP server {name} is gone ({exc})")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a server's error is a failed result, never a crash
            if server.state == "failed":
                return ToolOutcome.failure(f"Not finished: the MCP server {name} failed ({server.reason})")
            message = getattr(getattr(exc, "error", None), "message", None) or str(exc) or type(exc).__name__
            await self._relisted(server)
            return ToolOutcome.failure(f"The MCP server {name} answered the {tool} call with an error: {message}")
        return result_outcome(result)

    # ---- starting ------------------------------------------------------------------------

    async def _start(self, server: _Server) -> None:
        spec = server.spec
        for attempt in (1, 2):
            try:
                connection = await self._connection(server)
            except StartRefused as exc:
                self._fail(server, f"not started: {exc}")
                return
            except Exception as exc:  # noqa: BLE001 - e.g. the SDK cannot be imported: failed, said why
                log.exception("MCP server %s could not be prepared", spec.name)
                self._fail(server, f"not started: {_error_text(exc)}")
                return
            server.connection = connection
            try:
                try:
                    listed = await asyncio.wait_for(connection.start(), spec.startup_timeout_s)
                finally:
                    self._started(server)  # bubblewrap has read its arguments by now
            except asyncio.TimeoutError:
                # (a package runner in the sandbox waits on its registry until then)
                reason = f"did not start within {spec.startup_timeout_s:g} s (startupTimeoutS)"
                self._fail(server, reason + runner_hint(spec, self.network))
                return
            except asyncio.CancelledError:
                connection.stop()
                raise
            except Exception as exc:  # noqa: BLE001 - any failure to start is the server's state
                covered = connection.launch.covered if connection.launch is not None else ()
                if attempt == 1 and server.state == "starting" and any(not os.path.lexists(p) for p in covered):
                    # A host socket the sandbox was to cover vanished before bubblewrap
                    # started (which then fails): list the sockets again, start once more.
                    log.info("MCP server %s: a covered socket vanished as its sandbox started; starting it again", spec.name)
                    await connection.aclose()
                    continue
                reason = connection._gone_reason(f"could not start: {_error_text(exc)}")
                self._fail(server, reason + runner_hint(spec, self.network))
                return
            break
        if server.state != "starting":
            return  # failed or closed while it started
        self._take(server, listed)
        server.state = "ready"
        if server.relist_again:  # it said its tools changed while they were being listed
            self._relist_soon(server)

    def _take(self, server: _Server, listed: Iterable[Any]) -> None:
        """Make the catalogue offer the tools of ``listed`` that the config offers and the
        caps let in (at start, and at each re-list): a new one added, one no longer listed
        withdrawn, one listed before in this session kept as it was first listed."""
        spec = server.spec
        names: list[str] = []
        taken = 0
        for tool in listed:
            if not spec.offers(tool.name):
                continue
            if len(names) == MAX_TOOLS:
                log.warning("MCP server %s lists more than %d tools; the rest are left out", spec.name, MAX_TOOLS)
                break
            name = tool_name(spec.name, tool.name)
            first = server.first.get(name) if name not in names else None  # (twice in one list: left out below)
            if first is not None:
                # A server must not turn a tool the person knows (approved, asked about as
                # "exec") into another mid-session: the first definition stays.
                if _definition(first[0]) != _definition(tool) and name not in server.ignored:
                    server.ignored.add(name)
                    log.warning("MCP server %s lists %s again with another definition; the one it was first "
                                "listed with stays for this session", spec.name, name)  # fmt: skip
                tool = first[0]
            size = schema_bytes(tool)
            if size > SCHEMA_CAP:
                log.warning("MCP server %s: the input schema of %s is %d bytes (at most %d); left out",
                            spec.name, shown(clip(tool.name, 80)), size, SCHEMA_CAP)  # fmt: skip
                continue
            taken += definition_bytes(tool)
            if taken > DEFINITIONS_CAP:
                log.warning("MCP server %s: its tool definitions pass %d bytes at %s; the rest are left out",
                            spec.name, DEFINITIONS_CAP, shown(clip(tool.name, 80)))  # fmt: skip
                break
            if first is not None:
                self.catalogue.restore(name)  # (a no-op unless an earlier re-list withdrew it)
            elif self.catalogue.get(name) is not None:
                log.warning("MCP server %s: a tool named %s is already in the catalogue; %s left out", spec.name, name, tool.name)
                continue
            elif len(server.first) >= REMEMBERED_CAP:
                log.warning("MCP server %s has listed %d tools in this session; %s left out",
                            spec.name, REMEMBERED_CAP, name)  # fmt: skip
                continue
            else:
                made = make_tool(spec, tool, self)
                server.first[name] = (tool, made)
                self.catalogue.add(made)
            names.append(name)
        for gone in set(server.tools) - set(names):
            self.catalogue.withdraw(gone)
        server.tools = tuple(names)

    # ---- listing again -------------------------------------------------------------------

    def _tools_changed(self, server: _Server) -> None:
        """The server sent ``notifications/tools/list_changed``: its tools are listed again,
        one re-list at a time; a burst gives at most one more after the one running."""
        if self.closed or server.state not in ("starting", "ready"):
            return
        server.relist_again = True
        if server.state == "ready":  # (while starting: once it is up, see _start)
            self._relist_soon(server)

    def _relist_soon(self, server: _Server) -> None:
        if server.relist is None or server.relist.done():
            relist = self._relist(server)
            server.relist = asyncio.get_running_loop().create_task(relist, name=f"mcp-relist-{server.spec.name}")

    async def _relist(self, server: _Server) -> None:
        while server.relist_again and server.state == "ready" and not self.closed:
            server.relist_again = False
            try:
                await self._relist_once(server)
            except Exception:  # noqa: BLE001 - whatever the listing held: logged, the tools as they were
                log.exception("MCP server %s: its tools listed again could not be applied", server.spec.name)
                return

    async def _relist_once(self, server: _Server) -> None:
        """One re-list, bounded by ``startupTimeoutS``: one that fails leaves the tools as
        they were (a lost connection fails the server by itself, as it does between calls)."""
        spec, connection = server.spec, server.connection
        if connection is None:
            return
        timeout = spec.startup_timeout_s
        try:
            listed = await asyncio.wait_for(connection.list_tools(), timeout)
        except asyncio.TimeoutError:
            log.warning("MCP server %s said its tools changed but did not list them within %g s (startupTimeoutS); "
                        "its tools stay as they were", spec.name, timeout)  # fmt: skip
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a server's failure to list is logged, never a crash
            if server.state != "ready":
                return  # it failed meanwhile, and that was said
            log.warning("MCP server %s said its tools changed but could not list them (%s); its tools stay as they were",
                        spec.name, _error_text(exc))  # fmt: skip
            return
        if server.state != "ready" or server.connection is not connection or self.closed:
            return  # failed or closed meanwhile: its tools are withdrawn already
        before = set(server.tools)
        self._take(server, listed)
        added, gone = sorted(set(server.tools) - before), sorted(before - set(server.tools))
        if added or gone:
            log.info("MCP server %s listed its tools again: %s added, %s withdrawn",
                     spec.name, ", ".join(added) or "none", ", ".join(gone) or "none")  # fmt: skip
        else:
            log.debug("MCP server %s listed its tools again: no change", spec.name)

    async def _relisted(self, server: _Server) -> None:
        """Until a re-list the server asked for is done: a call during which it said its
        tools changed returns after it, so the model's next request has the new list."""
        relist = server.relist
        if relist is not None and not relist.done():
            await asyncio.wait({relist})  # (bounded: each re-list by startupTimeoutS)

    async def _connection(self, server: _Server) -> "Connection":
        spec = server.spec
        client = await _client_module()
        told = {
            "on_gone": lambda reason: self._fail(server, reason),
            "on_tools_changed": lambda: self._tools_changed(server),
        }
        if spec.transport == "http":
            return client.Connection(spec, self.root, headers=_http_headers(spec), **told)
        self._started(server)
        launch, server.started_with = await self._launch(spec)
        return client.Connection(spec, self.root, launch=launch, **told)

    @staticmethod
    def _started(server: _Server) -> None:
        if server.started_with is not None:
            server.started_with.close()
            server.started_with = None

    async def _launch(self, spec: McpServerSpec) -> "tuple[Launch, SandboxStart | None]":
        from dshd.mcp.client import Launch

        for name, _ in spec.env:
            if loader_variable(name):
                raise StartRefused(
                    f"env {name} is a loader variable (it makes programs load code it names): refused, "
                    f"whoever configured it; remove it from the {spec.name} server's env"
                )
        cwd = self._cwd(spec)
        command = [spec.command or "", *spec.args]
        env = {**command_env(self.env_names), **dict(spec.env)}
        if spec.sandbox == "none":
            return Launch(tuple(command), env, cwd), None
        found = await probe()
        if not found.ok:
            raise StartRefused(
                f"no sandbox can be built here: {found.reason}. To fix it: {found.fix.split('; ')[0]}; "
                'or, knowingly, set sandbox = "none" for this server in your user config'
            )
        policy = host_policy(
            "workspace-write", self.network, self.root, PROTECTED, show_installed=command if cwd.is_relative_to(self.root) else [*command, str(cwd)],
            unix_sockets=self.unix_sockets, conceal=daemon_folders(),
        )
        wall, refusal = wall_choice(found, socket_filter(policy) is not None, self.unix_sockets)
        if refusal is not None:
            raise StartRefused(refusal)
        try:
            start = sandbox_start(
                policy, command, cwd, sandboxed_env(env, replaced_folders(policy), self.root),
                bwrap=found.bwrap or shutil.which("bwrap") or "bwrap", via="proc", wall=wall,
            )
        except SeccompUnavailable as exc:
            raise StartRefused(Probe(True, wall_reason=str(exc)).wall_refusal()) from None
        except ValueError as exc:
            raise StartRefused(str(exc)) from None
        return Launch(tuple(start.argv), start.env, self.root, covered=start.covered), start

    def _cwd(self, spec: McpServerSpec) -> Path:
        """The server's folder: inside the workspace, walked there without following a
        link; a server of the user config may name an absolute folder anywhere (it still
        runs in the sandbox, read-only outside the workspace)."""
        if spec.cwd is None:
            return self.root
        if os.path.isabs(spec.cwd):
            if spec.source != "user":
                raise StartRefused(
                    f"cwd {spec.cwd} is outside the workspace: only your user config may name a folder outside it"
                )
            outside = Path(os.path.normpath(spec.cwd))
            if not outside.is_relative_to(self.root):
                if not outside.is_dir():
                    raise StartRefused(f"cwd {spec.cwd} is not a folder")
                return outside
        target = Path(os.path.normpath(self.root / spec.cwd))
        if not target.is_relative_to(self.root):
            raise StartRefused(f"cwd {spec.cwd} is outside the workspace")
        try:
            root_fd = safepath.open_root(self.root)
            try:
                os.close(safepath.open_folder(root_fd, safepath.parts_of(self.root, target)))
            finally:
                os.close(root_fd)
        except (FileNotFoundError, NotADirectoryError):
            raise StartRefused(f"cwd {spec.cwd} is not a folder of the workspace") from None
        except (PathRefused, OSError) as exc:
            raise StartRefused(f"cwd {spec.cwd}: {exc}") from None
        return target

    # ---- failing -------------------------------------------------------------------------

    def _fail(self, server: _Server, reason: str) -> None:
        """Once per server: failed, its tools withdrawn, stopped, written, told."""
        if server.state in ("failed", "stopped") or self.closed:
            return
        for value, variable in self._hidden:  # an expanded command, its stderr: never the value
            reason = reason.replace(value, f"${{{variable}}}")
        server.state, server.reason = "failed", reason
        for name in server.tools:
            self.catalogue.withdraw(name)
        server.tools = ()  # gone for the session
        if server.relist is not None and server.relist is not asyncio.current_task():
            server.relist.cancel()
        log.warning("MCP server %s failed: %s", server.spec.name, reason)
        connection = server.connection
        if connection is not None:
            connection.stop()
            closer = asyncio.get_running_loop().create_task(connection.aclose())
            self._closers.add(closer)
            closer.add_done_callback(self._closers.discard)
        if self._record is not None:
            try:
                self._record(server.spec.name, reason)
            except Exception:  # the store may be closing: the state above stays the truth here
                log.exception("could not record the failure of MCP server %s", server.spec.name)
        view = server.view()
        for fn in list(self._listeners):
            try:
                fn(view)
            except Exception:
                log.exception("an MCP server listener failed")


_client: Any = None  # dshd.mcp.client, once imported


async def _client_module() -> Any:
    """:mod:`dshd.mcp.client` (which imports the SDK), only once a server starts. The first
    import runs off the event loop (it takes a second or more), so the daemon goes on
    answering meanwhile; later ones take it from here, without a thread hop (not from
    ``sys.modules``, where a module still being imported already stands)."""
    global _client
    if _client is None:
        _client = await asyncio.to_thread(importlib.import_module, "dshd.mcp.client")
    return _client


def _http_headers(spec: McpServerSpec) -> dict[str, str]:
    headers = dict(spec.headers)
    if spec.bearer_token_env is not None:
        token = os.environ.get(spec.bearer_token_env)
        if not token:
            raise StartRefused(f"bearerTokenEnv {spec.bearer_token_env} is not set in the daemon's environment")
        headers["Authorization"] = f"Bearer {token}"
    return headers


# Package runners: each fetches the package (network) into a cache under the home folder
# (read-only in the sandbox) before it runs it. pnpm and yarn are runners only with dlx.
RUNNERS = {"npx": "npm install -g", "bunx": "npm install -g", "uvx": "uv tool install"}
DLX_RUNNERS = {"pnpm": "npm install -g", "yarn": "npm install -g"}
# Options of the runners that take a value; the package is the first other argument
# (npx -p/--package and uvx --from name it outright).
_VALUE_OPTIONS = {
    "--python", "-p", "--with", "--with-editable", "--with-requirements", "--index", "--index-url",
    "--extra-index-url", "--cache-dir", "--call", "-c", "--registry", "--cache", "--userconfig",
}  # fmt: skip
_PACKAGE_OPTIONS = {"--package", "--from"}
_PACKAGE_NAME = re.compile(r"[@A-Za-z0-9_.][A-Za-z0-9_.@/=<>~^:+-]{0,99}")


def runner_hint(spec: McpServerSpec, network: bool) -> str:
    """The hint for a sandboxed stdio server started through a package runner that failed
    to start (empty for any other server)."""
    if spec.transport != "stdio" or spec.sandbox == "none" or not spec.command:
        return ""
    program = os.path.basename(spec.command)
    args = list(spec.args)
    if program in DLX_RUNNERS:
        positional = [a for a in args if not a.startswith("-")]
        if not positional or positional[0] != "dlx":
            return ""
        install, runner = DLX_RUNNERS[program], f"{program} dlx"
        args = args[args.index("dlx") + 1 :]
    elif program in RUNNERS:
        install, runner = RUNNERS[program], program
    else:
        return ""
    package = _package_of(args, npm=not install.startswith("uv"))
    needs = "a writable cache" if network else "the network and a writable cache"
    return (
        f"; {runner} is a package runner: to fetch the server it needs {needs}, which the sandbox "
        f"does not give it. Install the server once ({install} {package}) and set command to the "
        'program it installs, or, knowingly, set sandbox = "none" for this server in your user config'
    )


def _package_of(args: list[str], *, npm: bool) -> str:
    """The package a runner's ``args`` name, as a plain name (``<package>`` when none is)."""
    found = None
    it = iter(args)
    for arg in it:
        name, _, value = arg.partition("=")
        if name in _PACKAGE_OPTIONS or (npm and name == "-p"):
            found = value or next(it, None)
            break
        if arg.startswith("-"):
            if name in _VALUE_OPTIONS and not value:
                next(it, None)
            continue
        found = arg
        break
    if found is None or "://" in found or not _PACKAGE_NAME.fullmatch(found):  # a URL may hold a token
        return "<package>"
    return found


def _definition(listed: Any) -> str:
    """What a listed tool is made of (its name, title, description, input schema and
    annotations), comparable between two listings."""
    annotations = getattr(listed, "annotations", None)
    if hasattr(annotations, "model_dump"):
        annotations = annotations.model_dump(mode="json", exclude_none=True)
    title, description = getattr(listed, "title", None), getattr(listed, "description", None)
    parts = [listed.name, title, description, input_schema(listed), annotations]
    return json.dumps(parts, sort_keys=True, default=repr)


def _error_text(exc: BaseException) -> str:
    """An exception as one short line (an SDK group of one error shows that error)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__

