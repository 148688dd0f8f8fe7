"""One session open on the ACP connection: its agent's changes as ``session/update``s.

The connection's hub (dshd.api.hub) follows the agent and the door hands this session
each piece of news, after the change is durable:

- committed events and live deltas -> :class:`UpdateTranslator` (messages, tool calls);
- plan view -> ``current_mode_update`` + ``config_option_update``, only when the
  *recorded* state changes. A choice that waits for the next step (``queued``) sends
  nothing until the step commits it;
- goal notices (every change, round starts, arm and disarm) -> ``session_info_update``
  with ``_meta.goal`` (null after clear).

A prompt that arrives while a turn runs (a goal's continuation round) is steered into
that turn, and its answer is that turn's stop reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from acp.schema import AvailableCommand, AvailableCommandsUpdate, SessionInfoUpdate, UnstructuredCommandInput

from dshd.acp import goal_command
from dshd.acp.convert import TurnUsage, goal_meta, goal_update, mode_updates
from dshd.acp.updates import UpdateTranslator, agent_text, user_text
from dshd.agent.turn_end import TurnEnd
from dshd.api.escape import shown
from dshd.services.goals import GoalService

if TYPE_CHECKING:
    from dshd.acp.peer import Peer
    from dshd.agent.loop import Agent

log = logging.getLogger("dshd.acp")

KEPT_CLOSES = 16  # turn/close payloads kept for prompts that wait on a turn
KEPT_OWN_PROMPTS = 16  # prompts this client sent whose user/message has not come back yet
KEPT_USAGE = 16  # turns whose token totals are kept for the prompt that waits on them


class LiveSession:
    def __init__(self, agent: "Agent", peer: "Peer", root: Path) -> None:
        self.agent = agent
        self.peer = peer
        self.root = root
        self.session_id = agent.session_id
        self.context_window = agent.config.model.contextWindow
        self.translator = UpdateTranslator(root, live=True, context_window=self.context_window, tools=agent.tools)
        self.mode = agent.store.state.plan.active
        self._closes: OrderedDict[int, Any] = OrderedDict()
        self._waiters: dict[int, list[asyncio.Future]] = {}
        # The client shows what its own person typed; a prompt from another client attached
        # to the session (the shared daemon) is sent as a user message.
        self._own_prompts: deque[str] = deque(maxlen=KEPT_OWN_PROMPTS)
        # Each turn's tokens (its model calls' usage summed), for the prompt's answer.
        self._usage: OrderedDict[int, TurnUsage] = OrderedDict()
        # Plan reviews this client approved while a goal could start: once the approval is
        # in the log, the chat names /goal (the review offers no option that starts one).
        self._goal_hints: deque[str] = deque(maxlen=KEPT_OWN_PROMPTS)

    def close(self) -> None:
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.cancel()

    # ---- what the client is told once --------------------------------------------------

    def replay(self) -> None:
        """The whole history, as updates (``session/load``), then the session's info."""
        history = UpdateTranslator(self.root, live=False, context_window=self.context_window, tools=self.agent.tools)
        for event in self.agent.store.events():
            self._send(history.event(msgspec.to_builtins(event)))
        self.send_info()

    def send_info(self) -> None:
        state = self.agent.store.state
        goals = self.agent.features.get(GoalService)
        update = SessionInfoUpdate(
            session_update="session_info_update",
            title=shown(state.title) if state.title is not None else None,
            updated_at=state.last_at,
            field_meta={"goal": goal_meta(goals.get()) if goals is not None else None},
        )
        self._send([update])

    def send_commands(self) -> None:
        commands = []
        for name in self.agent.commands.names():
            command, _ = self.agent.commands.resolve("/" + name)
            commands.append(
                AvailableCommand(
                    name=name,
                    description=command.description,
                    input=UnstructuredCommandInput(hint="optional: what follows the command"),
                )
            )
        if goal_command.offered(self.agent):  # the door's own (goal_command.py)
            commands.append(
                AvailableCommand(
                    name=goal_command.NAME,
                    description=goal_command.DESCRIPTION,
                    input=UnstructuredCommandInput(hint="optional: the goal's objective (default: carry out the approved plan)"),
                )
            )
        self._send([AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)])

    def hint_goal_after(self, call_id: str) -> None:
        """This client approves the plan of ``call_id``: once that approval is in the log
        (another client's answer may win first), the chat says how to start a goal."""
        self._goal_hints.append(call_id)

    def send_text(self, text: str) -> None:
        self._send([agent_text(text)])

    # ---- prompts -----------------------------------------------------------------------

    async def prompt(self, text: str) -> TurnEnd:
        """How the turn this prompt ran in ended (with the model error, if any)."""
        agent = self.agent
        self._own_prompts.append(text)
        if agent.turn_running and not text.startswith("/"):
            turn = agent.store.state.turn.last_turn
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(turn, []).append(waiter)
            agent.steer(text)
            return await waiter
        result = await agent.prompt(text)
        return self._closes.pop(result.turn, result)  # the close has the error, if any

    # ---- news from the hub ---------------------------------------------------------------

    def _send(self, updates: list[Any]) -> None:
        for update in updates:
            self.peer.update(self.session_id, update)

    def on_event(self, event: dict[str, Any]) -> None:
        data = event.get("data") or {}
        if event.get("type") == "user/message" and data.get("source") == "user":
            if data.get("text") in self._own_prompts:
                self._own_prompts.remove(data["text"])
            else:  # another client's prompt
                self._send([user_text(data, f"user-{event.get('seq')}")])
        self._send(self.translator.event(event))
        if event.get("type") == "tool/result" and data.get("callId") in self._goal_hints:
            self._goal_hints.remove(data["callId"])
            if (data.get("review") or {}).get("outcome") == "approved" and goal_command.can_start(self.agent):
                self.send_text(f"\n\nNote: {goal_command.HINT}\n")
        if event.get("type") == "assistant/message":
            self._count_usage(event.get("turn"), data.get("usage"))
        if event.get("type") == "turn/close":
            self._turn_closed(event["data"])

    def _turn_closed(self, data: dict[str, Any]) -> None:
        error = data.get("error")
        said = {"kind": error.get("kind"), "message": error.get("message")} if isinstance(error, dict) else None
        result = TurnEnd(data["turn"], data["stopReason"], said)
        for waiter in self._waiters.pop(data["turn"], []):
            if not waiter.done():
                waiter.set_result(result)
        self._closes[data["turn"]] = result
        while len(self._closes) > KEPT_CLOSES:
            self._closes.popitem(last=False)

    def _count_usage(self, turn: Any, usage: Any) -> None:
        if not isinstance(turn, int) or not isinstance(usage, dict):
            return
        total = self._usage.setdefault(turn, TurnUsage())
        total.add(usage)
        while len(self._usage) > KEPT_USAGE:
            self._usage.popitem(last=False)

    def turn_usage(self, turn: int | None) -> "TurnUsage | None":
        """The tokens the turn's model calls used (None: no call reported any, or a command)."""
        return self._usage.pop(turn, None) if turn is not None else None

    def on_delta(self, delta: Any) -> None:
        self._send(self.translator.delta(delta))

    def on_tool_started(self, call_id: str) -> None:
        self._send(self.translator.tool_started(call_id))

    def on_plan(self, view: Any) -> None:
        if view.active != self.mode:
            self.mode = view.active
            self._send(mode_updates(view.active))

    def on_goal(self, notice: Any) -> None:
        self._send([goal_update(notice.view, notice.op, notice.revision)])
