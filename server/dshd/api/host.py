"""The host: one per daemon process, shared by every connection of both front doors.

A connection (a ``dshd serve`` stdio pair, or one socket connection of the shared
daemon, dsh or ACP) is a :class:`Client`. The host holds

- the workspaces, one per real root: every connection that initializes on the same
  folder gets the same :class:`~dshd.agent.workspace.Workspace`, so opening a session the
  daemon holds returns its live agent (one store, one lock, one running turn);
- the live connections, and which agents each one is attached to;
- the questions open on each agent (plan reviews and approvals): each goes to every
  attached connection that can answer it, the first valid answer wins, then every
  attached connection is told who answered what (:class:`Resolution`) and the others'
  asks are withdrawn; a connection that attaches while a question is open is asked too;
  with nobody able to answer, the question fails closed at once;
- ``on_empty``: called when the last connection leaves (the shared daemon starts its
  idle timer there; ``dshd serve`` stops).

When the last connection attached to an agent leaves it, the agent's goal is disarmed
(nothing starts a round with nobody watching); the turn already running goes on to its
end, and what it asks fails closed. A headless run attaches as a client like any other,
so while one is attached the goal stays armed.

The host knows no wire: each door turns the calls below into its own messages. It is a
core value for both doors (``dshd.daemon.host`` is where the socket daemon takes it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

from dshd.agent.approvals import ApprovalAnswer, ApprovalRequest, ApprovalsUnavailable
from dshd.agent.questions import AgentRef, QuestionsUnavailable
from dshd.agent.workspace import Workspace
from dshd.api.escape import shown
from dshd.api.unchosen_model import workspace_model
from dshd.folds.events import TurnClose
from dshd.services.acting import answered_by
from dshd.services.goals import GoalService

log = logging.getLogger("dshd.host")

QuestionKind = Literal["plan-review", "permission"]
ATTACH_TURNS = 4  # loop turns an attaching client's first ask waits: its open's answer goes first


@attrs.frozen
class AttachedClient:
    """One entry of an agent's client list, as seen by the connection it is sent to."""

    client_id: str
    client_name: str
    you: bool


@attrs.frozen
class Resolution:
    """A question answered: who answered (their client's name) and the winning choice
    (``approve``/``revise`` for a plan review; ``allow-once``/``allow-session``/``reject``
    for a permission)."""

    agent_id: str
    session_id: str
    question_id: str  # the plan question's id; a permission's callId
    kind: QuestionKind
    outcome: str
    by_client_name: str


class Client(Protocol):
    """One connection, of either door, as the host sees it. ``client_id`` and a default
    ``client_name`` ("client <n>") are set by :meth:`Host.connect`; the door replaces the
    name with the one its client gives at initialize. ``headless`` (False until the door
    sees the client declare it at initialize): a headless run, nobody at it."""

    client_id: str
    client_name: str
    headless: bool

    def can_answer(self, kind: QuestionKind) -> bool: ...
    async def ask_questions(self, agent: Any, questions: list[dict[str, Any]]) -> list[Any]: ...
    async def ask_approval(self, request: ApprovalRequest) -> ApprovalAnswer: ...
    def follow(self, agent: Any, running: list[Any]) -> None: ...  # forward the agent's news from now on
    # (``running``: the deltas of the turn running now, streamed before this client came)
    def unfollow(self, agent: Any) -> None: ...  # stop forwarding it
    def clients_changed(self, agent: Any, clients: list[AttachedClient]) -> None: ...
    def question_resolved(self, resolution: Resolution) -> None: ...
    def answer_too_late(self, resolution: Resolution) -> None: ...  # its answer came after the winner's


def _plan_outcome(question_id: str, answers: Any) -> str | None:
    """The choice of a clean plan-review answer, or None (not a valid answer)."""
    if not isinstance(answers, list) or len(answers) != 1 or not isinstance(answers[0], dict):
        return None
    answer = answers[0]
    if answer.get("id") != question_id or answer.get("choice") not in ("approve", "revise"):
        return None
    return answer["choice"]


def _approval_outcome(answer: Any) -> str | None:
    if isinstance(answer, ApprovalAnswer) and answer.outcome in ("allow-once", "allow-session", "reject"):
        return answer.outcome
    return None


class OpenQuestion:
    """One question on one agent, asked of every attached client that can answer."""

    def __init__(
        self,
        host: "Host",
        agent: Any,
        kind: QuestionKind,
        question_id: str,
        ask_one: Callable[[Client], Awaitable[Any]],
        outcome_of: Callable[[Any], str | None],
        unavailable: type[Exception],
    ) -> None:
        self.host = host
        self.agent = agent
        self.kind = kind
        self.question_id = question_id
        self._ask_one = ask_one
        self._outcome_of = outcome_of
        self._unavailable = unavailable
        self.asks: dict[str, tuple[Client, asyncio.Task]] = {}  # by client id, while open
        self.answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self._invalid: list[Any] = []  # answers that were no valid choice (the seam judges the last)
        self.resolution: Resolution | None = None  # set when the first valid answer came
        self._settled: set[str] = set()  # clients whose ask ended and was looked at
        self._why: str | None = None  # why the last ask ended without an answer

    def offer(self, client: Client, *, attaching: bool = False) -> None:
        """Ask this client too (once). ``attaching``: it is attaching now, inside the
        request that attaches it: asked once that request's answer is out (the client
        knows the agent by then)."""
        if self.answer.done() or client.client_id in self.asks or not client.can_answer(self.kind):
            return
        task = asyncio.ensure_future(self._after_answer(client) if attaching else self._ask_one(client))
        self.asks[client.client_id] = (client, task)
        task.add_done_callback(lambda done: self._ended(client, done))

    async def _after_answer(self, client: Client) -> Any:
        # The request that attaches a client answers when its handler's task ends; a few
        # loop turns later that answer is written, and the question follows it.
        for _turn in range(ATTACH_TURNS):
            await asyncio.sleep(0)
        return await self._ask_one(client)

    def drop(self, client: Client) -> None:
        """The client left: its ask ends (fails closed if it was the last one)."""
        entry = self.asks.get(client.client_id)
        if entry is not None and not entry[1].done():
            entry[1].cancel()

    def _ended(self, client: Client, task: asyncio.Task) -> None:
        self._settled.add(client.client_id)
        if self.answer.done():
            if self.resolution is not None and not task.cancelled() and task.exception() is None:
                # Answered after the winner, before its ask could be withdrawn: changed nothing.
                try:
                    client.answer_too_late(self.resolution)
                except Exception:
                    log.exception("a door failed to take a late answer")
            return
        if task.cancelled():
            self._why = f"{client.client_name} went away"
        elif task.exception() is not None:
            self._why = str(task.exception()) or type(task.exception()).__name__
        else:
            answer = task.result()
            outcome = self._outcome_of(answer)
            if outcome is not None:
                agent = self.agent
                self.resolution = Resolution(
                    agent.agent_id, agent.session_id, self.question_id, self.kind, outcome, client.client_name
                )
                self.answer.set_result((client, answer, outcome))
                # The word goes now, in the step that takes the answer: nothing that comes
                # after it (another reply, a withdrawal, the asking turn cancelled before it
                # resumes) can leave a client with its ask withdrawn and no word of who won.
                self.host.tell_resolution(agent, self.resolution)
                return
            self._invalid.append(answer)
        if any(client_id not in self._settled for client_id in self.asks):
            return  # someone else may still answer (or did, and is looked at next)
        if self._invalid:
            self.answer.set_result((client, self._invalid[-1], None))
        else:
            self.answer.set_exception(self._unavailable(self._why or "no one could answer"))

    def withdraw(self) -> None:
        """Every ask still open is withdrawn (the door tells its client to close it)."""
        for _client, task in self.asks.values():
            if not task.done():
                task.cancel()


class SharedQuestions:
    """The user-questions seam of every workspace of a host (agent/questions.UserQuestions)."""

    def __init__(self, host: "Host") -> None:
        self._host = host

    async def ask(self, agent: AgentRef, questions: list[dict[str, Any]]) -> list[Any]:
        first = questions[0] if questions and isinstance(questions[0], dict) else {}
        question_id = str(first.get("id", ""))
        return await self._host.ask(
            agent,
            "plan-review",
            question_id,
            lambda client: client.ask_questions(agent, questions),
            lambda answers: _plan_outcome(question_id, answers),
            QuestionsUnavailable,
        )


class SharedApprovals:
    """The approvals seam of every workspace of a host (agent/approvals.Approvals)."""

    def __init__(self, host: "Host") -> None:
        self._host = host

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        agent = self._host.live_agent(request.agent_id)
        if agent is None:
            raise ApprovalsUnavailable("no client is attached to this session to answer approvals")
        return await self._host.ask(
            agent,
            "permission",
            request.call_id,
            lambda client: client.ask_approval(request),
            _approval_outcome,
            ApprovalsUnavailable,
        )


_ASKED = {"plan-review": "plan reviews", "permission": "approvals"}
CLIENT_NAME_MAX = 80  # characters of a client's own name kept (what other clients show)


def client_name(given: Any, fallback: str) -> str:
    """The name a client gave at initialize, as other people will read it: one line,
    escaped (api/escape.py: no control or bidi character can disguise who answered),
    at most CLIENT_NAME_MAX characters; ``fallback`` when it gave none."""
    if not isinstance(given, str) or not given.strip():
        return fallback
    name = shown(given.strip())
    return name if len(name) <= CLIENT_NAME_MAX else name[: CLIENT_NAME_MAX - 1] + "…"


class Host:
    def __init__(self, *, on_empty: Callable[[], None] | None = None) -> None:
        self.on_empty = on_empty
        self.questions = SharedQuestions(self)
        self.approvals = SharedApprovals(self)
        self.clients: dict[str, Client] = {}  # live connections, by client id
        self._numbers = itertools.count(1)
        self._workspaces: dict[str, tuple[Workspace, Any]] = {}  # real root -> (workspace, loaded config)
        self._attached: dict[str, dict[str, Client]] = {}  # agent id -> client id -> client, in attach order
        self._agents: dict[str, Any] = {}  # agent id -> the live agent some client is attached to
        self._open: dict[str, dict[str, OpenQuestion]] = {}  # agent id -> question id -> question
        self._running: dict[str, list[Any]] = {}  # agent id -> the deltas of its running turn

    # ---- connections -----------------------------------------------------------------

    def connect(self, client: Client) -> None:
        """A connection arrived: it gets its id and a default name."""
        number = next(self._numbers)
        client.client_id = f"c-{number}"
        client.client_name = f"client {number}"
        client.headless = False
        self.clients[client.client_id] = client

    def name(self, client: Client, name: str) -> str:
        """Give the client ``name`` (from :func:`client_name`), told apart from every other
        live client's: a name one of them holds gets " 2", " 3"... (two editors that give
        the same name are "Neovim" and "Neovim 2" to the people reading the chat)."""
        taken = {c.client_name for c in self.clients.values() if c is not client}
        unique, number = name, 1
        while unique in taken:
            number += 1
            unique = f"{name} {number}"
        client.client_name = unique
        return unique

    def disconnect(self, client: Client) -> None:
        """A connection left: it is detached from every agent (their goals disarmed when it
        was the last one there), its open asks end; ``on_empty`` when none is left."""
        if self.clients.pop(client.client_id, None) is None:
            return
        for agent_id in [a for a, attached in self._attached.items() if client.client_id in attached]:
            self.detach(client, self._agents[agent_id])
        if not self.clients and self.on_empty is not None:
            try:
                self.on_empty()
            except Exception:
                log.exception("on_empty failed")

    # ---- workspaces ------------------------------------------------------------------

    def workspace(self, root: Path, loaded: Any, *, editor_trust: bool) -> tuple[Workspace, Any]:
        """The workspace of ``root`` (one per real path) and the config it was made with:
        ``loaded`` (the door's LoadedConfig) makes it for the first connection there;
        later connections share that config (docs/choices.md)."""
        key = os.path.realpath(root)
        held = self._workspaces.get(key)
        if held is None:
            workspace = Workspace(
                Path(root),
                loaded.config,
                questions=self.questions,
                approvals=self.approvals,
                # An untrusted folder's model left out: prompts are told why (api/unchosen_model.py).
                model=workspace_model(loaded, editor_trust=editor_trust),
            )
            held = self._workspaces[key] = (workspace, loaded)
        return held

    async def shutdown(self) -> None:
        """Close every session of every workspace (checkpoints written, locks released)."""
        for open_questions in list(self._open.values()):
            for question in list(open_questions.values()):
                question.withdraw()
        workspaces = [w for w, _loaded in self._workspaces.values()]
        self._workspaces.clear()
        for workspace in workspaces:
            await workspace.shutdown()

    # ---- agents ----------------------------------------------------------------------

    def attach(self, client: Client, agent: Any) -> None:
        """The client follows the agent (once): every attached client is told the new
        list, and the client is asked the questions open on the agent."""
        attached = self._attached.get(agent.agent_id)
        if attached is None:
            attached = self._attached[agent.agent_id] = {}
            self._agents[agent.agent_id] = agent
            # What the turn running now streamed so far: a client attaching mid-reply gets it.
            running = self._running[agent.agent_id] = []
            agent.add_delta_listener(running.append)
            agent.add_event_listener(lambda event: running.clear() if isinstance(event, TurnClose) else None)
            agent.on_close(lambda: self._forget(agent.agent_id))
        if client.client_id in attached:
            return
        attached[client.client_id] = client
        client.follow(agent, list(self._running.get(agent.agent_id, ())))
        self._tell_clients(agent)
        for question in list(self._open.get(agent.agent_id, {}).values()):
            question.offer(client, attaching=True)

    def detach(self, client: Client, agent: Any) -> None:
        """The client stops following the agent; its asks there end. The last one to
        leave disarms the agent's goal."""
        attached = self._attached.get(agent.agent_id)
        if attached is None or attached.pop(client.client_id, None) is None:
            return
        try:
            client.unfollow(agent)
        except Exception:
            log.exception("a door failed to stop following %s", agent.agent_id)
        for question in list(self._open.get(agent.agent_id, {}).values()):
            question.drop(client)
        if attached:
            self._tell_clients(agent)
            return
        goals = agent.features.get(GoalService) if not agent.closed else None
        if goals is not None and goals.armed:
            goals.disarm()
            log.info("session %s: the last client left, its goal is disarmed", agent.session_id)

    def close_session(self, client: Client, workspace: Workspace, agent: Any) -> None:
        """``session/close`` from one client: it detaches; the agent closes (its lock
        released) only when no other client is attached."""
        self.detach(client, agent)
        if not self._attached.get(agent.agent_id):
            workspace.close(agent.agent_id)

    def clients_of(self, agent: Any) -> list[Client]:
        return list(self._attached.get(agent.agent_id, {}).values())

    def live_agent(self, agent_id: str) -> Any:
        return self._agents.get(agent_id)

    def _forget(self, agent_id: str) -> None:
        self._attached.pop(agent_id, None)
        self._agents.pop(agent_id, None)
        self._running.pop(agent_id, None)

    def _tell_clients(self, agent: Any) -> None:
        attached = self.clients_of(agent)
        for client in attached:
            listing = [AttachedClient(c.client_id, c.client_name, c is client) for c in attached]
            try:
                client.clients_changed(agent, listing)
            except Exception:
                log.exception("a door failed to take the client list")

    # ---- questions -------------------------------------------------------------------

    async def ask(
        self,
        agent: Any,
        kind: QuestionKind,
        question_id: str,
        ask_one: Callable[[Client], Awaitable[Any]],
        outcome_of: Callable[[Any], str | None],
        unavailable: type[Exception],
    ) -> Any:
        """Ask every attached client that can answer; the first valid answer is returned
        (then the others are told and withdrawn). Fails closed at once when no attached
        client can answer, and when every ask ended without an answer."""
        attached = self.clients_of(agent)
        able = [c for c in attached if c.can_answer(kind)]
        if not attached:
            raise unavailable(f"no client is attached to this session to answer {_ASKED[kind]} (the last one left)")
        # Only clients that declared themselves headless runs (capabilities.experimental.dsh
        # .headless at initialize; a name proves nothing): nobody is there to answer.
        if not able and all(c.headless for c in attached):
            if kind == "plan-review":
                # A headless run ends at a plan nobody can review: disarmed now, in the
                # turn, so no round can start after it (a request from the run would race
                # the turn's end).
                goals = agent.features.get(GoalService) if not getattr(agent, "closed", True) else None
                if goals is not None and goals.armed:
                    goals.disarm()
            raise unavailable(
                f"nobody attached to this session can answer {_ASKED[kind]}: a headless run (dshd run) "
                "approves nothing on its own; open the session in an editor to answer"
            )
        if not able:
            raise unavailable(
                f"your editor cannot answer {_ASKED[kind]} (nor can any other client attached to this session): "
                "update its dshd extension, or open the folder in an editor that can"
            )
        question = OpenQuestion(self, agent, kind, question_id, ask_one, outcome_of, unavailable)
        answered_by.set(None)  # set to the winner's name below: what records the answer names it
        open_questions = self._open.setdefault(agent.agent_id, {})
        open_questions[question_id] = question
        try:
            for client in able:
                question.offer(client)
            _winner, answer, _outcome = await asyncio.shield(question.answer)
        except BaseException:
            question.withdraw()  # the turn was cancelled, or nobody answered: every window closes
            raise
        finally:
            if open_questions.get(question_id) is question:
                del open_questions[question_id]
            if not open_questions:
                self._open.pop(agent.agent_id, None)
            if not question.answer.done():
                question.answer.cancel()
        if question.resolution is not None:
            answered_by.set(question.resolution.by_client_name)  # (every client was told when it was taken)
        question.withdraw()  # after the news: the others' windows close on it
        return answer

    def tell_resolution(self, agent: Any, resolution: Resolution) -> None:
        """Every client attached to the agent is told who answered what (the one that
        answered too), before any ask of the question is withdrawn."""
        for client in self.clients_of(agent):
            try:
                client.question_resolved(resolution)
            except Exception:
                log.exception("a door failed to take a resolution")

    def open_questions(self, agent: Any) -> list[OpenQuestion]:
        return list(self._open.get(agent.agent_id, {}).values())


__all__ = [
    "AttachedClient",
    "Client",
    "Host",
    "OpenQuestion",
    "QuestionKind",
    "Resolution",
    "SharedApprovals",
    "SharedQuestions",
    "client_name",
]
