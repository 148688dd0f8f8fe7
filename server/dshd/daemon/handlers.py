"""dsh/* request handlers: thin. Each takes the strictly parsed params (dshd_protocol)
and delegates to the Workspace or the Agent; every result is built as JSON here, from
the core's plain values, by the door's one converter (daemon/to_wire.py).

Registered on the server by :func:`register`; errors are turned into JSON-RPC answers
by :func:`_guard` (DshError -> its kind's code; InvalidParams -> -32602 naming the field).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable

from dshd_protocol import InvalidParams, parse_params, types as t

from dshd.api.escape import shown
from dshd.daemon import to_wire
from dshd.daemon.rpc_errors import DshRpcError, rpc_error
from dshd.errors import DshError
from dshd.log import io_error
from dshd.plugins.goals import pause_goal
from dshd.services.checkpoints import CheckpointService
from dshd.services.goal_rounds import live_rounds
from dshd.services.goals import GoalService
from dshd.services.plan_mode import PlanModeController
from dshd.services.plan_records import PlanRecords

logger = logging.getLogger("dshd.daemon")

Handler = Callable[..., Any]
HANDLERS: dict[str, Handler] = {}


def method(name: str) -> Callable[[Handler], Handler]:
    def register_handler(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn

    return register_handler


def _plan(agent) -> PlanModeController:
    plan = agent.features.get(PlanModeController)
    if plan is None:
        raise DshError("plugin-not-loaded", 'plan mode is turned off in this workspace: add "plan" to `plugins` in .dsh/config.toml', plugin="plan")
    return plan


def _goals(agent) -> GoalService:
    goals = agent.features.get(GoalService)
    if goals is None:
        raise DshError("plugin-not-loaded", 'goals are turned off in this workspace: add "goals" to `plugins` in .dsh/config.toml', plugin="goals")
    return goals


def _checkpoints(agent) -> CheckpointService:
    checkpoints = agent.features.get(CheckpointService)
    if checkpoints is None:
        raise DshError(
            "plugin-not-loaded",
            'checkpoints are turned off in this workspace: add "checkpoints" to `plugins` in .dsh/config.toml'
            " (with [checkpoints] enabled = true)",
            plugin="checkpoints",
        )
    return checkpoints


def _ref(ref: t.GoalRef) -> dict:
    return to_wire.goal_ref(ref)


# ---- sessions -----------------------------------------------------------------------


@method(t.SESSION_CREATE)
def session_create(d, p: t.SessionCreateParams):
    agent = d.dsh_workspace.create_session(title=p.title)
    d.attach(agent)
    return {"sessionId": agent.session_id, "agentId": agent.agent_id}


@method(t.SESSION_LIST)
def session_list(d, p: t.SessionListParams):
    return {"sessions": [_titled(row) for row in d.dsh_workspace.list_sessions()]}


def _titled(row) -> dict:
    """A session row on the wire, its title as a person may read it (api/escape.py) and
    its goal with the words people read."""
    return to_wire.session_row(row, shown(row.title) if isinstance(row.title, str) else None)


@method(t.SESSION_OPEN)
def session_open(d, p: t.SessionOpenParams):
    agent = d.dsh_workspace.open_session(p.session_id, reload=p.reload)
    d.attach(agent)
    return {
        "sessionId": agent.session_id,
        "agentId": agent.agent_id,
        "plan": d.plan_view(agent),
        "goal": to_wire.goal_view(goals.get()) if (goals := agent.features.get(GoalService)) is not None else None,
        **to_wire.activity(agent.activity.state),
    }


@method(t.SESSION_FORK)
def session_fork(d, p: t.SessionForkParams):
    agent = d.dsh_workspace.fork(p.agent_id, at_seq=p.at_seq)
    d.attach(agent)
    return {"sessionId": agent.session_id, "agentId": agent.agent_id}


@method(t.SESSION_CLOSE)
def session_close(d, p: t.AgentParams):
    # This connection leaves the session; it closes (lock released) when no other is attached.
    d.host.close_session(d, d.dsh_workspace, d.dsh_workspace.agent(p.agent_id))
    return None


@method(t.SESSION_EVENTS)
def session_events(d, p: t.SessionEventsParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    after = p.after_seq or 0
    events = agent.store.events(after_seq=after, limit=p.limit)
    next_seq = events[-1].seq if events else max(after, 0)
    return {"events": [to_wire.event(e) for e in events], "nextSeq": next_seq}


# ---- chat ---------------------------------------------------------------------------


@method(t.CHAT_GET)
async def chat_get(d, p: t.ChatGetParams):
    if p.before_seq is not None and p.after_seq is not None:
        raise DshError("invalid-params", "give afterSeq or beforeSeq, not both", field="beforeSeq")
    agent = d.dsh_workspace.agent(p.agent_id)
    # Read in slices off a long log (from the chat marks: the page, not the log): the
    # connection's other requests go on meanwhile.
    items, next_seq = await d.hub.chat_page(agent, after_seq=p.after_seq or 0, limit=p.limit, before_seq=p.before_seq)
    return {"items": to_wire.chat_items(items), "nextSeq": next_seq}


# ---- the agent ----------------------------------------------------------------------


@method(t.AGENT_PROMPT)
async def agent_prompt(d, p: t.AgentTextParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    return to_wire.turn_end(await agent.prompt(p.text))


@method(t.AGENT_STEER)
def agent_steer(d, p: t.AgentTextParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    return {"queued": agent.steer(p.text)}


@method(t.AGENT_CANCEL)
async def agent_cancel(d, p: t.AgentParams):
    await d.dsh_workspace.agent(p.agent_id).cancel()
    return None


# ---- plan mode ----------------------------------------------------------------------


@method(t.PLAN_SET)
def plan_set(d, p: t.PlanSetParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    outcome = _plan(agent).set(p.active)
    return {"outcome": outcome, "state": d.plan_view(agent)}


@method(t.PLAN_GET)
def plan_get(d, p: t.AgentParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    _plan(agent)
    return d.plan_view(agent)


@method(t.PLAN_HISTORY)
def plan_history(d, p: t.AgentParams):
    # P-21: a fold of the log: the plan plugin's (kept up to date from the log), else
    # made now (the plugin is not loaded, the log still has the plans).
    agent = d.dsh_workspace.agent(p.agent_id)
    records = agent.features.get(PlanRecords) or PlanRecords(agent.store)
    return {"plans": [to_wire.plan_record(record) for record in records.history()]}


# ---- goals --------------------------------------------------------------------------


@method(t.GOAL_GET)
def goal_get(d, p: t.AgentParams):
    return to_wire.goal_view(_goals(d.dsh_workspace.agent(p.agent_id)).get())


@method(t.GOAL_ROUNDS)
def goal_rounds(d, p: t.AgentParams):
    # G-22: a pure fold of the log (no goal service needed: the log is the truth), read
    # whole once per open session, then only the events committed since.
    return to_wire.goal_rounds(live_rounds(d.dsh_workspace.agent(p.agent_id).store).rounds())


@method(t.GOAL_CREATE)
def goal_create(d, p: t.GoalCreateParams):
    goals = _goals(d.dsh_workspace.agent(p.agent_id))
    return to_wire.goal_view(goals.create(p.objective, max_rounds=p.max_rounds, max_tokens=p.max_tokens))


@method(t.GOAL_EDIT)
def goal_edit(d, p: t.GoalEditParams):
    goals = _goals(d.dsh_workspace.agent(p.agent_id))
    return to_wire.goal_view(goals.edit(_ref(p.ref), objective=p.objective, max_rounds=p.max_rounds, max_tokens=p.max_tokens))


@method(t.GOAL_PAUSE)
async def goal_pause(d, p: t.GoalRefParams):
    # The running round is cancelled before the pause is written (plugins/goals.py).
    agent = d.dsh_workspace.agent(p.agent_id)
    _goals(agent)
    return to_wire.goal_view(await pause_goal(agent, _ref(p.ref)))


@method(t.GOAL_RESUME)
def goal_resume(d, p: t.GoalRefParams):
    return to_wire.goal_view(_goals(d.dsh_workspace.agent(p.agent_id)).resume(_ref(p.ref)))


@method(t.GOAL_COMPLETE)
def goal_complete(d, p: t.GoalRefParams):
    return to_wire.goal_view(_goals(d.dsh_workspace.agent(p.agent_id)).complete(_ref(p.ref)))


@method(t.GOAL_BLOCK)
def goal_block(d, p: t.GoalBlockParams):
    reason = {"code": p.reason.code, "message": p.reason.message}
    return to_wire.goal_view(_goals(d.dsh_workspace.agent(p.agent_id)).block(_ref(p.ref), reason))


@method(t.GOAL_CLEAR)
def goal_clear(d, p: t.GoalRefParams):
    return {"ref": _ref(_goals(d.dsh_workspace.agent(p.agent_id)).clear(_ref(p.ref)))}


@method(t.GOAL_DISARM)
def goal_disarm(d, p: t.AgentParams):
    return to_wire.goal_view(_goals(d.dsh_workspace.agent(p.agent_id)).disarm())


# ---- permissions ----------------------------------------------------------------------


@method(t.PERMISSION_GET)
def permission_get(d, p: t.AgentParams):
    return d.dsh_workspace.agent(p.agent_id).permissions.view()


@method(t.PERMISSION_SET)
def permission_set(d, p: t.PermissionSetParams):
    agent = d.dsh_workspace.agent(p.agent_id)
    return agent.permissions.set(sandbox=p.sandbox, approve=p.approve)


# ---- checkpoints ------------------------------------------------------------------------


@method(t.CHECKPOINT_LIST)
async def checkpoint_list(d, p: t.AgentParams):
    checkpoints = _checkpoints(d.dsh_workspace.agent(p.agent_id))
    return {"checkpoints": [to_wire.checkpoint_info(info) for info in await checkpoints.list()]}


@method(t.CHECKPOINT_DIFF)
async def checkpoint_diff(d, p: t.CheckpointDiffParams):
    checkpoints = _checkpoints(d.dsh_workspace.agent(p.agent_id))
    return {"files": [to_wire.file_restore(change) for change in await checkpoints.diff(p.seq)]}


@method(t.CHECKPOINT_RESTORE)
async def checkpoint_restore(d, p: t.CheckpointRestoreParams):
    if not p.files and not p.conversation:
        raise DshError("invalid-params", "nothing to restore: files and conversation are both false", field="files")
    agent = d.dsh_workspace.agent(p.agent_id)
    outcome = await _checkpoints(agent).restore(p.seq, files=p.files, conversation=p.conversation, force=p.force)
    fork = None
    if outcome.fork_at is not None:
        # The service found where the conversation forks; the fork is made as dsh/session/fork makes one.
        fork = d.dsh_workspace.fork(agent.agent_id, at_seq=outcome.fork_at)
        d.attach(fork)
    return to_wire.restore_outcome(outcome, fork)


# ---- configuration -------------------------------------------------------------------


@method(t.CONFIG_GET)
def config_get(d, p: t.ConfigGetParams):
    return to_wire.config_report(d.config_report)


# ---- registration ---------------------------------------------------------------------


def _require_initialized(d) -> None:
    if d.dsh_workspace is None:
        # LSP's ServerNotInitialized.
        raise DshRpcError(-32002, "the daemon is not initialized: send initialize first", None)


def _guard(d, name: str, fn: Handler) -> Handler:
    """Parse params strictly, run the handler, shape the result; errors become answers.

    Every wrapper is a coroutine function, even for a synchronous handler: pygls starts
    coroutine handlers as tasks, which asyncio runs in the order they were created, so
    requests take effect in the order they arrived (a `prompt` followed at once by a
    `steer` opens its turn before the steer looks for one). A synchronous handler run
    inline would overtake an earlier request whose task had not started yet.
    """
    is_async = inspect.iscoroutinefunction(fn)

    async def run(params: Any) -> Any:
        _require_initialized(d)
        try:
            parsed = parse_params(name, params)
            result = fn(d, parsed)
            if is_async:
                result = await result
            return result
        except (DshError, InvalidParams) as exc:
            raise rpc_error(exc) from None
        except OSError as exc:  # disk full, read-only, permission: io-error naming the path, no traceback
            raise rpc_error(io_error(exc)) from None

    run.__name__ = f"dsh_{fn.__name__}"
    return run


def register(d) -> None:
    missing = {m for m, spec in t.METHODS.items() if spec.kind == "request"} - set(HANDLERS)
    if missing:
        raise RuntimeError(f"no handler for {sorted(missing)}")
    for name, fn in HANDLERS.items():
        d.feature(name)(_guard(d, name, fn))
