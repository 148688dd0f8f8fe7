"""The ACP methods, mapped onto the Workspace and its agents. Thin: checks, one call
into the core, and the answer in ACP's shape (convert.py); what happens while a session
is open is live.py's job.

The workspace is the folder `dshd acp` runs in; ``session/new`` and ``session/load``
must name it as ``cwd``. The ACP ``sessionId`` is dshd's ``sessionId``, so a session
made here opens in `dshd serve` and the other way round (one process holds a session
at a time: the other gets ``session-locked`` with the holder's pid).

Every request but ``initialize`` needs a successful ``initialize`` first (-32600
otherwise); a second ``initialize`` is -32600 too. Notifications before it are dropped.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)
from pydantic import ValidationError

from dshd import __version__
from dshd.services.acting import acting
from dshd.acp import goals as goal_requests
from dshd.acp.convert import (
    MODE_CONFIG_ID,
    OUTPUT_LIMIT,
    OUTPUT_LIMIT_STOP,
    STOP_REASONS,
    config_meta,
    config_options,
    goal_capability,
    goal_meta,
    mode_state,
    plan_active,
    plan_meta,
    prompt_text,
    prompt_usage,
)
from dshd.acp.host_client import AcpHostClient
from dshd.acp.errors import INVALID_REQUEST, from_dsh, from_validation, invalid_params
from dshd.acp.goal_command import goal_command_rest, start_goal
from dshd.acp.live import LiveSession
from dshd.acp.peer import Peer
from dshd.acp.permissions import AcpApprovals
from dshd.acp.questions import AcpQuestions
from dshd.acp.transport import LineTransport
from dshd.agent.config_layers import load_layers, user_config_path
from dshd.api.escape import shown
from dshd.api.host import Host, client_name
from dshd.api.hub import Hub
from dshd.api.words import STOP_REASONS as STOP_REASON_WORDS
from dshd.api.unchosen_model import workspace_model
from dshd.agent.workspace import Workspace, is_session_id
from dshd.errors import DshError
from dshd.services.goals import GoalService
from dshd.services.plan_mode import PlanModeController

log = logging.getLogger("dshd.acp")

MCP_OFF = 'MCP is turned off in this workspace: add "mcp" to `plugins` in .dsh/config.toml'


class AcpDoor(AcpHostClient):
    """One ACP connection. ``host``: the process's Host, shared with the other
    connections (the shared daemon); without one (``dshd acp --stdio``) the door makes its
    own and closes its sessions when the connection ends."""

    def __init__(self, root: Path, *, question_timeout_s: float, host: Host | None = None) -> None:
        self.root = root
        self.question_timeout_s = question_timeout_s
        self._owns_host = host is None
        self.host = Host() if host is None else host
        self.host.connect(self)
        self.workspace: Workspace | None = None
        self.peer: Peer | None = None
        self._questions: AcpQuestions | None = None  # made with the peer, used once initialized
        self._approvals: AcpApprovals | None = None
        self.sessions: dict[str, LiveSession] = {}
        self._config_note: str | None = None  # config keys left out: told once, in the first session
        self.hub = Hub(self)  # follows the agents this connection holds; we are its door

    # ---- wiring ------------------------------------------------------------------------

    def connect(self, transport: LineTransport) -> Connection:
        router = build_agent_router(self)
        connection = Connection(self._guard(router), transport, listening=False)
        self.peer = Peer(transport, connection)
        return connection

    def _guard(self, router: Any) -> Any:
        async def handle(method: str, params: Any, is_notification: bool) -> Any:
            if is_notification:
                return await self._notification(router, method, params)
            if method == "initialize" and self.workspace is not None:
                raise RequestError(INVALID_REQUEST, "Invalid request: initialize was already answered", None)
            if method != "initialize" and self.workspace is None:
                raise RequestError(INVALID_REQUEST, "Invalid request: send initialize first", None)
            try:
                return await router(method, params, is_notification)
            except ValidationError as exc:
                raise from_validation(exc) from None
            except DshError as exc:
                raise from_dsh(exc) from None

        return handle

    async def _notification(self, router: Any, method: str, params: Any) -> None:
        if self.workspace is None:
            log.warning("notification %s before initialize: dropped", method)
            return
        try:
            await router(method, params, True)
        except RequestError as exc:
            log.info("notification %s not handled: %s", method, exc)
        except (ValidationError, DshError) as exc:
            log.warning("notification %s with bad params: %s", method, exc)

    async def shutdown(self) -> None:
        """End of input. On a host of its own (``dshd acp --stdio``): running turns end as
        cancelled (the client is gone), then every session closes (checkpoint written, lock
        released). On the shared daemon's host: this connection leaves its sessions (the
        last one out disarms their goals; a turn running goes on, watched by the others)."""
        if self._owns_host:
            for live in self.sessions.values():
                if live.agent.turn_running and not live.agent.closed:
                    await live.agent.cancel()
        self.host.disconnect(self)
        for live in self.sessions.values():
            live.close()
        self.sessions.clear()
        if self._owns_host:
            await self.host.shutdown()

    # ---- lifecycle ---------------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **_: Any) -> InitializeResponse:
        # ACP has no way to say the folder is trusted: only [trust] folders in the user
        # config can; the keys left out are written to the log (stderr).
        loaded = load_layers(self.root, None, user_file=user_config_path())
        self._config_note = config_note(loaded)
        if self._config_note is not None:
            log.warning("%s", self._config_note)
        assert self.peer is not None
        timeout = self.question_timeout_s  # one patience for the person: reviews and approvals
        self._questions = AcpQuestions(self.peer, timeout_s=timeout, on_approved=self._hint_goal)
        self._approvals = AcpApprovals(self.peer, timeout_s=timeout)
        self.host.name(self, client_name(getattr(client_info, "name", None), self.client_name))
        # Shared with every connection on this folder (the first one's config stands);
        # the folder's model left out when untrusted: prompts say so.
        self.workspace, loaded = self.host.workspace(self.root, loaded, editor_trust=False)
        config = loaded.config
        log.info("workspace %s, client %s", self.root, getattr(client_info, "name", "?"))
        meta: dict[str, Any] = {"dsh": config_meta(loaded)}
        if "goals" in config.plugins:
            meta["goal"] = goal_capability()
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="dshd", title="dshd", version=__version__),
            auth_methods=[],
            field_meta=meta,
        )

    # ---- sessions ----------------------------------------------------------------------

    async def new_session(self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **_: Any) -> NewSessionResponse:
        self._check_cwd(cwd, additional_directories)
        servers = mcp_server_dicts(mcp_servers)
        specs = _acp_specs(servers)  # a bad list is -32602 before a session is made
        agent = self._workspace.create_session()
        live = self._open(agent)
        connected = _connect_mcp(agent, servers, specs)
        self._after_answer(live, connected)
        return NewSessionResponse(
            session_id=agent.session_id,
            modes=self._modes(agent),
            config_options=self._config_options(agent),
            field_meta=self._meta(agent, connected),
        )

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, additional_directories: Any = None, **_: Any) -> LoadSessionResponse:
        self._check_cwd(cwd, additional_directories)
        if not is_session_id(session_id):
            raise invalid_params("sessionId", f"not a dshd session id: {session_id!r}")
        servers = mcp_server_dicts(mcp_servers)
        specs = _acp_specs(servers)
        agent = self._workspace.open_session(session_id)
        live = self.sessions.get(session_id)
        if live is None or live.agent is not agent:
            live = self._open(agent)
        live.replay()
        connected = _connect_mcp(agent, servers, specs)
        self._after_answer(live, connected)
        return LoadSessionResponse(
            modes=self._modes(agent),
            config_options=self._config_options(agent),
            field_meta=self._meta(agent, connected),
        )

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> ListSessionsResponse:
        if cursor is not None:
            raise invalid_params("cursor", "unknown cursor: dshd lists every session in one page")
        if cwd is not None and not self._same_folder(cwd):
            return ListSessionsResponse(sessions=[])
        sessions = [
            SessionInfo(
                session_id=entry.session_id,
                cwd=str(self.root),
                title=shown(entry.title) if isinstance(entry.title, str) else None,
                updated_at=entry.updated_at,
                field_meta={"goal": goal_meta(entry.goal)},
            )
            for entry in self._workspace.list_sessions()
        ]
        return ListSessionsResponse(sessions=sessions)

    # ---- turns -------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        live = self._live(session_id)
        acting.set(self.client_name)  # this request's task: its message names this client
        text = prompt_text(prompt, self.root)
        goal_rest = goal_command_rest(text)
        if goal_rest is not None:  # the door's own command: the person starts a goal
            live.send_text(f"\n\n{start_goal(live.agent, goal_rest)}\n")
            return PromptResponse(stop_reason="end_turn")
        try:
            result = await live.prompt(text)
        except DshError as exc:
            if exc.kind == "invalid-params" and exc.data.get("field") == "text":  # e.g. an unknown /command
                raise invalid_params("prompt", exc.message) from None
            raise
        reason = result.stop_reason
        usage = prompt_usage(live.turn_usage(result.turn))
        if reason in STOP_REASONS:
            return PromptResponse(stop_reason=STOP_REASONS[reason], usage=usage)
        error = result.error or {}
        if reason == "model-error" and error.get("kind") == OUTPUT_LIMIT:
            # ACP has a stop reason for it; the person reads what to raise in the chat.
            live.send_text(f"\n\nNote: {error.get('message') or 'the reply was cut at [model] maxOutputTokens'}\n")
            return PromptResponse(stop_reason=OUTPUT_LIMIT_STOP, usage=usage, field_meta={"dsh": {"errorKind": OUTPUT_LIMIT}})
        if reason == "model-error":
            message = error.get("message") or "the model call failed (dshd's log on stderr has the details)"
            raise RequestError(-32603, f"model error: {message}", {"kind": "model-error", "errorKind": error.get("kind")})
        said = STOP_REASON_WORDS.get(reason, f"ended: {reason}")
        raise RequestError(-32603, f"the turn {said}; dshd's log (stderr) says more", {"stopReason": reason})

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self.sessions.get(session_id)
        if live is None:
            log.info("session/cancel for %s, which is not open here", session_id)
            return
        acting.set(self.client_name)
        await live.agent.cancel()

    # ---- plan mode ---------------------------------------------------------------------

    async def set_session_mode(self, mode_id: str, session_id: str, **_: Any) -> SetSessionModeResponse:
        outcome, view = self._set_plan(session_id, mode_id, "modeId")
        return SetSessionModeResponse(field_meta={"dsh": {"outcome": outcome, **plan_meta(view)}})

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **_: Any) -> SetSessionConfigOptionResponse:
        if config_id != MODE_CONFIG_ID:
            raise invalid_params("configId", f"unknown config option {config_id!r}: the only one is {MODE_CONFIG_ID!r}")
        if not isinstance(value, str):
            raise invalid_params("value", "the mode option takes a mode id")
        outcome, view = self._set_plan(session_id, value, "value")
        return SetSessionConfigOptionResponse(
            config_options=config_options(view.active), field_meta={"dsh": {"outcome": outcome, **plan_meta(view)}}
        )

    def _set_plan(self, session_id: str, mode: str, field: str) -> tuple[str, Any]:
        agent = self._live(session_id).agent
        plan = agent.features.get(PlanModeController)
        if plan is None:
            raise DshError("plugin-not-loaded", 'plan mode is turned off in this workspace: add "plan" to `plugins` in .dsh/config.toml', plugin="plan")
        outcome = plan.set(plan_active(mode, field))
        return outcome, plan.get()

    # ---- extensions --------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "session/goal":
            raise RequestError.method_not_found(f"_{method}")
        request = goal_requests.parse(params)
        agent = self._live(request.sessionId).agent
        if GoalService not in agent.features:
            raise DshError("plugin-not-loaded", 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml', plugin="goals")
        return await goal_requests.run(agent, request)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("extension notification _%s ignored", method)

    # ---- helpers -----------------------------------------------------------------------

    @property
    def _workspace(self) -> Workspace:
        assert self.workspace is not None
        return self.workspace

    def _same_folder(self, cwd: str) -> bool:
        try:
            return Path(cwd).resolve() == self.root.resolve()
        except (OSError, RuntimeError):
            return False

    def _check_cwd(self, cwd: str, additional_directories: Any) -> None:
        if not Path(cwd).is_absolute():
            raise invalid_params("cwd", f"cwd must be an absolute path, not {cwd!r}")
        if not self._same_folder(cwd):
            raise invalid_params(
                "cwd",
                f"dshd acp serves the workspace {self.root} (the folder it was started in); "
                f"{cwd} is another folder: start dshd acp in {cwd} to work there",
            )
        if additional_directories:
            raise invalid_params("additionalDirectories", "dshd works in one folder: additional directories are not supported")

    def _hint_goal(self, session_id: str, call_id: str) -> None:
        live = self.sessions.get(session_id)
        if live is not None:
            live.hint_goal_after(call_id)

    def _open(self, agent: Any) -> LiveSession:
        old = self.sessions.pop(agent.session_id, None)
        if old is not None:
            old.close()
        live = LiveSession(agent, self.peer, self.root)  # type: ignore[arg-type]
        self.sessions[agent.session_id] = live
        self.hub.attach(agent)  # news from now on; the host attaches us after the answer (_after_answer)
        return live

    # ---- the hub's door (dshd.api.hub.Door): an agent's news, after it is durable --------

    def _tell(self, agent: Any, what: str, news: Any) -> None:
        live = self.sessions.get(agent.session_id)
        if live is not None and live.agent is agent:
            getattr(live, what)(news)

    def agent_event(self, agent: Any, event: dict[str, Any]) -> None:
        self._tell(agent, "on_event", event)

    def agent_delta(self, agent: Any, delta: Any) -> None:
        self._tell(agent, "on_delta", delta)

    def plan_changed(self, agent: Any, view: Any) -> None:
        self._tell(agent, "on_plan", view)

    def goal_changed(self, agent: Any, notice: Any) -> None:
        self._tell(agent, "on_goal", notice)

    def activity_changed(self, agent: Any, state: Any) -> None:
        pass  # ACP has no such update: a client sees the turn and its permission requests

    def tool_started(self, agent: Any, call_id: str) -> None:
        self._tell(agent, "on_tool_started", call_id)

    def chat_item(self, agent: Any, item: Any) -> None:
        """ACP has its own update kinds (updates.py); the door never subscribes to chat items."""

    def _live(self, session_id: str) -> LiveSession:
        live = self.sessions.get(session_id)
        if live is None:
            if not is_session_id(session_id):
                raise invalid_params("sessionId", f"not a dshd session id: {session_id!r}")
            raise invalid_params("sessionId", f"session {session_id} is not open in this client: open (load) it first, or start a new one")
        return live

    @staticmethod
    def _modes(agent: Any) -> Any:
        return mode_state(agent.store.state.plan.active) if PlanModeController in agent.features else None

    @staticmethod
    def _config_options(agent: Any) -> Any:
        return config_options(agent.store.state.plan.active) if PlanModeController in agent.features else None

    def _meta(self, agent: Any, connected: "McpConnected") -> dict[str, Any]:
        meta: dict[str, Any] = {}
        goals = agent.features.get(GoalService)
        if goals is not None:
            meta["goal"] = goal_meta(goals.get())
        if connected.given:
            meta["dsh"] = {"mcpServers": connected.to_meta()}
        return meta

    def _after_answer(self, live: LiveSession, connected: "McpConnected") -> None:
        """Told right after the answer (the client knows the session by then)."""

        def tell() -> None:
            if live.agent.closed or self.sessions.get(live.session_id) is not live:
                return
            # Attached once the client knows the session: the others are told, and the
            # questions open on it come to this client now (session/request_permission).
            self.host.attach(self, live.agent)
            live.send_commands()
            if self._config_note is not None:
                live.send_text(self._config_note)
                self._config_note = None
            for name, why in connected.ignored:
                log.warning("MCP server %s from the client not started: %s", name, why)
                live.send_text(f"Note: the MCP server {shown(name)} was not started: {why}.\n")

        asyncio.get_running_loop().call_soon(tell)


def config_note(loaded: Any) -> str | None:
    """What the person is told once about config keys dshd left out. ACP cannot say a
    folder is trusted: only the user config's ``[trust] folders`` can."""
    notice = loaded.notice(editor_trust=False)
    return None if notice is None else f"Note: {notice}"


# ---- MCP servers the client gives (session/new, session/load) ------------------------------


class McpConnected:
    """What became of the client's MCP servers for one session: started (or already
    running there: a load of a session open elsewhere), or not started and why."""

    def __init__(self) -> None:
        self.given = False
        self.started: list[str] = []
        self.running: list[str] = []
        self.ignored: list[tuple[str, str]] = []

    def to_meta(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "alreadyRunning": self.running,
            "ignored": [{"name": name, "why": why} for name, why in self.ignored],
        }


def mcp_server_dicts(mcp_servers: Any) -> list[dict[str, Any]]:
    """The SDK's models as the plain JSON the wire carried (a stdio server has no
    ``type``; an http one ``"http"``)."""
    out = []
    for server in mcp_servers or ():
        value = server.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(server, "model_dump") else server
        if isinstance(value, dict):
            value.pop("_meta", None)
            out.append(value)
    return out


def _acp_specs(servers: list[dict[str, Any]]) -> list[Any]:
    """The specs of the client's servers. dshd connects stdio and http ones (initialize
    says so); any other kind, or a malformed entry, is -32602 naming the field
    (``mcpServers[1].command``), before anything starts."""
    if not servers:
        return []
    from dshd.mcp.config import specs_from_acp  # no SDK import: that waits for a server to start

    return specs_from_acp(servers)


def _connect_mcp(agent: Any, servers: list[dict[str, Any]], specs: list[Any]) -> McpConnected:
    """Starts the client's servers for this session, in the sandbox like any other stdio
    server (the client is the person's editor: its list is their choice, so no trust
    question). A server already running in the session (the same name) is left as it is."""
    connected = McpConnected()
    connected.given = bool(servers)
    if not specs:
        return connected
    from dshd.mcp.servers import McpServers

    mcp = agent.features.get(McpServers)
    if mcp is None:
        connected.ignored += [(spec.name, MCP_OFF) for spec in specs]
        return connected
    known = {state.name for state in mcp.states()}
    fresh = [spec for spec in specs if spec.name not in known]
    connected.running = [spec.name for spec in specs if spec.name in known]
    if fresh:
        mcp.add(fresh, source="acp")
        connected.started = [spec.name for spec in fresh]
    log.info("session %s: MCP servers from the client: started %s, already running %s", agent.session_id, connected.started, connected.running)
    return connected
