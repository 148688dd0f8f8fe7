"""Which client did what: the name of the client whose request is being handled, for the
events that record a person's act (a prompt, a steer, a goal write, a cancel, an answer).

Two context variables, so no signature between a door and the log has to carry the name:

- ``acting``: set by a door around each request it handles (its client's name); read
  where the request's own code writes an event (``user/message`` of a prompt or steer,
  ``goal/change``, the cancel's ``turn/close``). A turn runs in a task of its own with it
  unset, as does the goal driver: what the model or a round does is nobody's act.
- ``answered_by``: set by the host when a question it put to the clients is answered
  (the winner's name; unset when no one answered), in the task that asked; read by the
  code that records the answer (``permission/decision``, a plan review's ``review``).

Names are what people read (escaped, one line: ``dshd.api.host.client_name``); the log
keeps them as they were then.
"""

from __future__ import annotations

import contextvars

acting: contextvars.ContextVar[str | None] = contextvars.ContextVar("dshd_acting_client", default=None)
answered_by: contextvars.ContextVar[str | None] = contextvars.ContextVar("dshd_answered_by", default=None)


def unattributed() -> contextvars.Context:
    """A copy of the current context with no acting client (for a task that runs on its
    own: a turn, the goal driver)."""
    context = contextvars.copy_context()
    context.run(acting.set, None)
    return context


def with_client(data: dict, name: str | None) -> dict:
    """``data`` with ``client`` set to ``name`` when there is one (else unchanged)."""
    if name:
        data["client"] = name
    return data
