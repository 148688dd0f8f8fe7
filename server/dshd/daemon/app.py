"""The daemon: LSP lifecycle + the Workspace + notifications, wired together.

- ``initialize`` takes the workspace root (rootUri, else the first workspace folder,
  else rootPath, else the current directory), loads the config (defaults < user config <
  .dsh/config.toml < ``initializationOptions.config``, the workspace file's guarded keys
  only when ``initializationOptions.trusted`` or the user config trusts the folder; an
  invalid one fails ``initialize`` with ``invalid-config`` naming the key and the file)
  and records whether the client answers ``dsh/questions/ask``.
- ``initialized``: when config keys were ignored, one ``window/showMessage`` says which
  and how to trust the folder (``dsh/config/get`` shows them at any time).
- An MCP server of a followed agent that fails to start, dies or hangs: one
  ``window/showMessage`` (warning) naming it and why, once per server (the chat's
  ``mcp-server-failed`` notice says it too, and stays after a reload).
- Every live agent is attached to the connection's :class:`~dshd.api.hub.Hub`, whose door
  (this class) turns its committed events, plan changes, goal changes and, once the
  client asked for its chat, chat items into ``dsh/session/event``, ``dsh/plan/changed``,
  ``dsh/goal/changed`` and ``dsh/chat/item``. The core calls them after the event is
  durable; each carries that agent's id only. Live deltas of its model calls become
  ``dsh/agent/delta`` (never durable).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import unquote, urlparse


from dshd.agent.config_layers import LoadedConfig, load_layers, user_config_path
from dshd.agent.questions import ANSWER_TIMEOUT_S
from dshd.agent.workspace import Workspace
from dshd.daemon.host import Host, client_name
from dshd.daemon.host_client import HostClient
from dshd.daemon import handlers, settings_differ, to_wire
from dshd.daemon.permissions import WireApprovals
from dshd.daemon.questions import WireQuestions
from dshd.daemon.rpc_errors import DshRpcError
from dshd.daemon.server import DshServer, InitializeParams
from dshd.api import words
from dshd.api.unchosen_model import workspace_model
from dshd.services.checkpoints import CheckpointService
from dshd.services.plan_mode import PlanModeController
from dshd.errors import DshError
from dshd.models.errors import RedactingFormatter
from dshd_protocol import InvalidMessage, from_wire, jsonrpc_error
from dshd_protocol.types import DshInitializationOptions

if TYPE_CHECKING:
    from dshd.api.hub import Hub

logger = logging.getLogger("dshd.daemon")

MESSAGE_TYPE_WARNING = 2  # LSP's MessageType.Warning

def _uri_to_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise ValueError(f"not a file URI: {uri}")
    return Path(unquote(parsed.path))


def _invalid_init(field: str, message: str) -> DshRpcError:
    err = jsonrpc_error("invalid-params", message, field=field)
    return DshRpcError(err["code"], err["message"], err["data"])


class DshDaemon(HostClient, DshServer):
    """One dsh connection. ``host``: the process's Host, shared with the other
    connections (the shared daemon); without one (``dshd serve``) the connection makes
    its own and closes its sessions when it ends."""

    def __init__(self, host: Host | None = None) -> None:
        super().__init__()
        self._owns_host = host is None
        self.host = Host() if host is None else host
        self.host.connect(self)
        self._init_host_client()
        self.dsh_workspace: Workspace | None = None
        self._mcp_watches: dict[str, Callable[[], None]] = {}  # agent id -> remover of its MCP listener
        self.config_report: LoadedConfig | None = None
        self.questions = WireQuestions(self)
        self.approvals = WireApprovals(self)
        # DSHD_TRACE_DURABLE=<file>: "sessionId seq monotonic_ns" per durable event, for
        # bench/rpc.py to measure fsync -> client holds the notification.
        trace_path = os.environ.get("DSHD_TRACE_DURABLE")
        self._trace = open(trace_path, "a", buffering=1) if trace_path else None
        self.feature("initialize")(self._on_initialize)
        self.feature("initialized")(lambda params: self._on_initialized())
        handlers.register(self)

    @functools.cached_property
    def hub(self) -> Hub:
        """The connection's fan-out of its agents' news, made when the first agent is
        followed: the chat projection it brings is not needed to answer initialize."""
        from dshd.api.hub import Hub

        return Hub(self)

    # ---- lifecycle ----------------------------------------------------------------

    def _on_initialize(self, params: InitializeParams) -> None:
        root = self._workspace_root(params)
        raw = params.initialization_options
        try:
            options = from_wire(DshInitializationOptions, {} if raw is None else raw)
        except InvalidMessage as exc:
            field = "initializationOptions" if exc.field == "result" else f"initializationOptions.{exc.field}"
            raise _invalid_init(field, exc.message) from None
        timeout_ms = options.question_timeout_ms or int(ANSWER_TIMEOUT_S * 1000)
        # One patience for the person, whatever they are asked (plan reviews, approvals).
        self.questions.timeout_s = self.approvals.timeout_s = timeout_ms / 1000
        try:
            loaded = load_layers(root, options.config, user_file=user_config_path(), editor_trusted=options.trusted)
        except DshError as exc:
            err = jsonrpc_error(exc.kind, exc.message, **exc.data)
            raise DshRpcError(err["code"], err["message"], err["data"]) from None
        experimental = params.capabilities.experimental if params.capabilities else None
        dsh_caps = experimental.get("dsh") if isinstance(experimental, dict) else None
        self.questions.client_can_answer = isinstance(dsh_caps, dict) and dsh_caps.get("questions") is True
        self.approvals.client_can_answer = isinstance(dsh_caps, dict) and dsh_caps.get("permissions") is True
        # A headless run (dshd run) says so; the Host's headless rules go by this, never by a name.
        self.headless = isinstance(dsh_caps, dict) and dsh_caps.get("headless") is True
        # What every chat says for this client's acts, told apart from the others' names.
        self.host.name(self, client_name(getattr(getattr(params, "client_info", None), "name", None), self.client_name))
        # Shared with every connection on this folder: the first one's config stands.
        self.dsh_workspace, self.config_report = self.host.workspace(root, loaded, editor_trust=True)
        self.settings_notice = None
        if self.config_report is not loaded and to_wire.config_report(self.config_report) != to_wire.config_report(loaded):
            # Said in the editor at `initialized` (the keys, what is in force, the ways out).
            self.settings_notice = settings_differ.notice(
                settings_differ.differing_keys(loaded.effective(), self.config_report.effective()),
                trust_differs=loaded.trusted != self.config_report.trusted,
            )
            logger.warning(
                "workspace %s is already open in this daemon with the settings of the client that opened it first; "
                "this client's settings are not used until the daemon restarts",
                root,
            )
        logger.info(
            "workspace %s (questions: %s, permissions: %s)",
            root, self.questions.client_can_answer, self.approvals.client_can_answer,
        )

    def _on_initialized(self) -> None:
        """Tell the person once (one initialize per daemon) which config keys were ignored."""
        notice = self.config_report.notice() if self.config_report is not None else None
        if notice is not None:
            logger.warning("%s", notice)
            self.protocol.notify(
                "window/showMessage", {"type": MESSAGE_TYPE_WARNING, "message": notice}
            )
        if getattr(self, "settings_notice", None) is not None:
            self.protocol.notify("window/showMessage", {"type": MESSAGE_TYPE_WARNING, "message": self.settings_notice})

    def _workspace_root(self, params: InitializeParams) -> Path:
        try:
            if params.root_uri:
                return _uri_to_path(params.root_uri)
            if params.workspace_folders:
                return _uri_to_path(params.workspace_folders[0].uri)
        except ValueError as exc:
            raise _invalid_init("rootUri", str(exc)) from None
        if params.root_path:
            return Path(params.root_path)
        return Path(os.getcwd())

    def connection_lost(self) -> None:
        self.questions.fail_all()
        self.approvals.fail_all()
        super().connection_lost()

    async def on_stop(self) -> None:
        self.questions.fail_all()
        self.approvals.fail_all()
        # This connection only: it leaves its sessions (the last one out disarms their goals).
        self.host.disconnect(self)
        if self._owns_host:
            await self.host.shutdown()

    # ---- agents and notifications ------------------------------------------------

    def attach(self, agent) -> None:
        """Attach this connection to the agent (once): the host tells every attached
        connection, asks this one the agent's open questions, and calls follow_agent."""
        self.host.attach(self, agent)

    def follow_agent(self, agent, running=None) -> None:
        """Forward this agent's changes to the client (once per agent); ``running``: the
        deltas its running turn streamed before this connection came."""
        if self.hub.attached(agent.agent_id):
            return
        torn = agent.store.torn_tail
        if torn is not None:
            logger.warning(
                "session %s: an incomplete last write (%d bytes, never acknowledged) was cut on open; a copy is in %s",
                agent.session_id, torn.length, torn.saved_to,
            )
        if self._trace is not None:
            trace, sid = self._trace, agent.session_id
            agent.store.on_durable = lambda event: trace.write(f"{sid} {event.seq} {time.monotonic_ns()}\n")
        self.hub.attach(agent, running)
        self._watch_mcp(agent)
        self._tell_moved_aside(agent)

    def unfollow(self, agent) -> None:
        remove = self._mcp_watches.pop(agent.agent_id, None)
        if remove is not None:
            remove()
        super().unfollow(agent)

    def _tell_moved_aside(self, agent) -> None:
        """State a clone brought under .dsh/ that was moved aside, never used: one warning
        each, to the editor that opened the session (the words are escaped where made)."""
        service = agent.features.get(CheckpointService)
        while service is not None and service.warnings:
            message = service.warnings.pop(0)
            logger.warning("session %s: %s", agent.session_id, message)
            self._host_notify("window/showMessage", {"type": MESSAGE_TYPE_WARNING, "message": message})

    def _watch_mcp(self, agent) -> None:
        """A failed MCP server of this agent: one warning the editor shows (not a chat line)."""
        from dshd.mcp.servers import McpServers  # the SDK is not loaded by this

        servers = agent.features.get(McpServers)
        if servers is None or agent.agent_id in self._mcp_watches:
            return

        def failed(state) -> None:
            message = words.mcp_server_failed_text(state.name, state.reason)
            logger.warning("session %s: %s", agent.session_id, message)
            self._host_notify("window/showMessage", {"type": MESSAGE_TYPE_WARNING, "message": message})

        self._mcp_watches[agent.agent_id] = servers.add_listener(failed)

    # The hub's door (dshd.api.hub.Door): each agent's news as dsh/* notifications,
    # carrying that agent's id only.

    def _notify(self, agent, method: str, payload: dict) -> None:
        params = {"agentId": agent.agent_id, "sessionId": agent.session_id, **payload}
        self.protocol.send_notification(method, params)

    def agent_event(self, agent, event: dict) -> None:
        self._notify(agent, "dsh/session/event", {"event": event})

    def agent_delta(self, agent, delta) -> None:
        self._notify(agent, "dsh/agent/delta", to_wire.delta(delta))

    def plan_changed(self, agent, view) -> None:
        self._notify(agent, "dsh/plan/changed", to_wire.plan_view(view))

    def goal_changed(self, agent, notice) -> None:
        self._notify(agent, "dsh/goal/changed", to_wire.goal_notice(notice))

    def chat_item(self, agent, item) -> None:
        self._notify(agent, "dsh/chat/item", {"item": to_wire.chat_item(item)})

    def activity_changed(self, agent, state) -> None:
        self._notify(agent, "dsh/agent/activity", to_wire.activity(state))

    def tool_started(self, agent, call_id: str) -> None:
        pass  # the chat's tool-call item follows it (waiting -> running), through the hub's upserts

    def plan_view(self, agent) -> dict:
        plan = agent.features.get(PlanModeController)
        return to_wire.plan_view(None if plan is None else plan.get())


class ClientLogHandler(logging.Handler):
    """Sends dshd's own log records to the editor as ``window/logMessage`` (its output
    panel), besides stderr. Records raised while sending are not sent again."""

    LEVELS = {
        logging.ERROR: 1,  # LSP's MessageType: Error, Warning, Info, Log
        logging.WARNING: 2,
        logging.INFO: 3,
    }

    def __init__(self, server: DshServer, level: int) -> None:
        super().__init__(level)
        self._server = server
        self._sending = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._sending or self._server.protocol.writer is None:
            return
        kind = next((v for k, v in self.LEVELS.items() if record.levelno >= k), 4)
        self._sending = True
        try:
            self._server.protocol.notify(
                "window/logMessage", {"type": kind, "message": self.format(record)}
            )
        except Exception:
            pass
        finally:
            self._sending = False


def serve(argv: list[str] | None = None) -> int:
    from dshd.daemon.server import run_stdio

    # stderr gets DSHD_LOG_LEVEL (default WARNING: logging every message at INFO halves
    # throughput); the editor's output panel gets dshd's own INFO and up.
    stderr_level = logging.getLevelName(os.environ.get("DSHD_LOG_LEVEL", "WARNING").upper())
    client_level = logging.getLevelName(os.environ.get("DSHD_CLIENT_LOG_LEVEL", "INFO").upper())
    stream = logging.StreamHandler()
    stream.setLevel(stderr_level)
    # Both scrub every key the daemon has read out of what they write: no key, nor a
    # piece of one, reaches stderr or the editor's log panel.
    stream.setFormatter(RedactingFormatter("dshd %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=stderr_level, handlers=[stream])
    daemon = DshDaemon()
    handler = ClientLogHandler(daemon, client_level)
    handler.setFormatter(RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    dshd_logger = logging.getLogger("dshd")
    dshd_logger.addHandler(handler)
    dshd_logger.setLevel(min(stderr_level, client_level))
    return run_stdio(daemon)
