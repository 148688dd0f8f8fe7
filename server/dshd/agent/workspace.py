"""The workspace: one per daemon; owns the live agents of ``<root>/.dsh/sessions/``.

Identity rules (SPEC 6 "Sessions and agents"):

* ``sessionId`` = ``s-`` + 26 characters of lowercase Crockford base32 (a ULID: 48 bits
  of milliseconds, 80 random bits, so ids sort by creation), issued here by the
  protocol's own token rule (``dshd_protocol.ids``: vocabulary, the one part of the
  wire package the core imports). :func:`is_session_id` is the check (anything else,
  e.g. ``../x``, is ``invalid-params`` field ``sessionId``).
* ``agentId`` = ``a-`` + 16 hex characters, fresh for every load. Opening a session
  this workspace already holds returns its live agent; ``reload=True`` closes it and
  loads again. Ids of agents that were replaced or closed get ``stale-agent``; ids
  never issued get ``unknown-agent``.

Fork (``fork(agent_id, at_seq)``): a new session whose log starts with a new
``session/start`` carrying ``forkedFrom {sessionId, seq: atSeq}``, then events 2..atSeq
of the source re-committed through the new store (so every one passes the folds again;
``at`` stamps are new). If the cut falls inside a turn, the fork closes that turn at
once: failed ``tool/result`` "not run: turn forked" for calls without a result, then
``turn/close`` with stopReason "forked". Plan and goal state come from the log alone
(PM-7, G-1): a pending plan choice of the source is not carried over, and the fork's
goal starts disarmed.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

import msgspec

from dshd.agent.approvals import Approvals
from dshd.agent.config import Config
from dshd.agent.instructions import ProjectInstructions
from dshd.agent.loop import Agent
from dshd.agent.questions import UserQuestions
from dshd.errors import DshError
from dshd.services.goals import GoalService
from dshd.log import io_error, statekey
from dshd.log.dsh_gitignore import DSH_GITIGNORE, ensure_dsh_gitignore  # noqa: F401 (DSH_GITIGNORE: tests)
from dshd.log.safefs import check_entries, open_dir
from dshd.models import ModelAdapter
from dshd.models.registry import model_from_config
from dshd.services.listing import SessionIndex, SessionRow
from dshd.services.store import SessionStore
from dshd_protocol.ids import is_session_id, new_session_id

log = logging.getLogger(__name__)

def _check_session_id(session_id: object) -> str:
    if not is_session_id(session_id):
        raise DshError("invalid-params", f"not a session id: {session_id!r}", field="sessionId")
    return session_id  # type: ignore[return-value]


def write_dsh_gitignore(dsh_dir: Path) -> None:
    """``.dsh/.gitignore`` made, or completed with the lines it lacks (never replaced);
    failing to write it never stops a session (dshd.log.dsh_gitignore)."""
    ensure_dsh_gitignore(dsh_dir)


def check_dsh_folder(root: Path) -> None:
    """Refuse (``unsafe-path``) a ``.dsh`` that is a link or holds ``.gitignore`` as a
    link or non-regular file: checked before a session is made there."""
    dsh_dir = root / ".dsh"
    try:
        dsh_fd = open_dir(dsh_dir, root)
    except FileNotFoundError:
        return
    try:
        check_entries(dsh_fd, dsh_dir, (".gitignore",))
    finally:
        os.close(dsh_fd)


class Workspace:
    def __init__(
        self,
        root: Path,
        config: Config,
        *,
        questions: UserQuestions | None = None,
        approvals: Approvals | None = None,
        model: ModelAdapter | None = None,
    ) -> None:
        self.root = Path(root)
        self.config = config
        self.questions = questions
        self.approvals = approvals
        # One model for the workspace: the scripted model's replies run in order across
        # every turn of every session, as one script for one demo.
        self.model = model if model is not None else model_from_config(config)
        self.sessions_dir = self.root / ".dsh" / "sessions"
        # The state key (what tells dshd's own state under .dsh/ from a clone's) is made
        # before any sandbox starts, so each one hides its folder (made later, it would
        # appear in a sandbox already running).
        try:
            statekey.state_key()
        except DshError as exc:
            log.warning("%s: nothing under .dsh/ that needs it is trusted", exc.message)
        self._index = SessionIndex(self.root, is_session_id)
        self._agents: dict[str, Agent] = {}  # live, by agentId
        self._by_session: dict[str, Agent] = {}
        self._retired: set[str] = set()  # agentIds issued and no longer live
        # Plugins by name, imported once, when the first agent needs them (not on the way to
        # the daemon's initialize answer: the tools plugin alone pulls in pathspec and
        # difflib); the loop itself imports none of them.
        self._plugin_modules: list[Any] | None = None
        # AGENTS.md: a core section of every agent (not a plugin), one stat cache per workspace.
        self.instructions = ProjectInstructions(self.root)

    # ---- sessions ------------------------------------------------------------------

    def create_session(self, title: str | None = None) -> Agent:
        if title is not None and not isinstance(title, str):
            raise DshError("invalid-params", "title must be a string", field="title")
        # Every component from the workspace down is walked without following links
        # (unsafe-path, nothing made or written, if .dsh or .dsh/sessions is a link).
        check_dsh_folder(self.root)
        try:
            store = SessionStore.create(self.sessions_dir, new_session_id(), title=title, base=self.root)
        except OSError as exc:
            raise io_error(exc, self.sessions_dir, "create") from None
        # Every new session: an older dshd's (or the person's) file may lack a line.
        write_dsh_gitignore(self.sessions_dir.parent)
        return self._load(store)

    def open_session(self, session_id: str, *, reload: bool = False) -> Agent:
        _check_session_id(session_id)
        live = self._by_session.get(session_id)
        if live is not None:
            if not reload:
                return live
            self._retire(live)
        try:
            store = SessionStore.open(self.sessions_dir, session_id, base=self.root)
        except FileNotFoundError:
            raise DshError("invalid-params", f"no session {session_id} in this workspace", field="sessionId") from None
        except OSError as exc:
            raise io_error(exc, self.sessions_dir, "open") from None
        return self._load(store)

    def fork(self, agent_id: str, at_seq: int | None = None) -> Agent:
        source = self.agent(agent_id)
        last = source.store.state.seq
        if at_seq is None:
            at_seq = last
        if isinstance(at_seq, bool) or not isinstance(at_seq, int) or not 1 <= at_seq <= last:
            raise DshError("invalid-params", f"atSeq must be an integer from 1 to {last}", field="atSeq")
        events = source.store.events(after_seq=1, limit=at_seq - 1) if at_seq > 1 else []
        # The prefix is copied as it was written (its times, turns, data), checked by the
        # fold and made durable a batch at a time, not re-committed event by event.
        try:
            store = SessionStore.create(
                self.sessions_dir,
                new_session_id(),
                title=source.store.state.title,
                forked_from={"sessionId": source.session_id, "seq": at_seq},
                base=self.root,
            )
        except OSError as exc:
            raise io_error(exc, self.sessions_dir, "create") from None
        try:
            store.copy_events(events)
        except BaseException:
            store.close()
            raise
        return self._load(store, left_open_reason="forked")

    def close(self, agent_id: str) -> None:
        self._retire(self.agent(agent_id))

    def agent(self, agent_id: str) -> Agent:
        live = self._agents.get(agent_id) if isinstance(agent_id, str) else None
        if live is not None:
            return live
        if agent_id in self._retired:
            raise DshError("stale-agent", f"agent {agent_id} was replaced or closed; open the session again")
        raise DshError("unknown-agent", f"no open session has the agent id {agent_id!r}: open the session first")

    def list_sessions(self) -> list[SessionRow]:
        """The rows of the session list (services.listing: kept in memory until a log changes)."""

        def live(session_id: str):
            agent = self._by_session.get(session_id)
            if agent is None:
                return None
            goals = agent.features.get(GoalService)
            return agent.store.state, goals is not None and goals.armed

        try:
            rows = self._index.rows(live)
        except OSError as exc:
            raise io_error(exc, self.sessions_dir, "list") from None
        return [self._with_activity(row) for row in rows]

    def _with_activity(self, row: SessionRow) -> SessionRow:
        """The row with what its live agent does now (kept rows are shared: a copy is made)."""
        agent = self._by_session.get(row.session_id)
        if agent is None or row.refused is not None:
            return row
        state = agent.activity.state
        if state.activity == "idle":
            return row
        return msgspec.structs.replace(row, activity=state.activity, question=state.question)

    async def shutdown(self) -> None:
        agents = list(self._agents.values())
        for agent in agents:
            self._retire(agent)
        for agent in agents:
            await agent.aclose()

    # ---- internals -----------------------------------------------------------------

    def _load(self, store: SessionStore, left_open_reason: str = "interrupted") -> Agent:
        try:
            agent = Agent(
                store,
                self.config,
                self.model,
                questions=self.questions,
                approvals=self.approvals,
                root=self.root,
                left_open_reason=left_open_reason,
            )
        except BaseException:
            store.close()
            raise
        try:
            agent.sections.add(self.instructions.section())
            for name, plugin in zip(self.config.plugins, self._plugins()):
                agent.plugins[name] = plugin.attach(agent, self.config)
        except BaseException:
            agent.close()
            raise
        self._agents[agent.agent_id] = agent
        self._by_session[agent.session_id] = agent
        return agent

    def _plugins(self) -> list[Any]:
        if self._plugin_modules is None:
            self._plugin_modules = [importlib.import_module(f"dshd.plugins.{name}") for name in self.config.plugins]
        return self._plugin_modules

    def _retire(self, agent: Agent) -> None:
        self._agents.pop(agent.agent_id, None)
        if self._by_session.get(agent.session_id) is agent:
            del self._by_session[agent.session_id]
        self._retired.add(agent.agent_id)
        agent.close()


__all__ = ["Workspace", "is_session_id", "new_session_id"]
