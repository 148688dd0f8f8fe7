"""Tool call identities: one per call for the whole session, whatever ids the provider sends.

Servers may reuse a call id in a later reply (some local servers number the calls of
every reply from 0), and a careless one may repeat an id inside a reply. The log's
``callId`` is what everything after the call keys on: its approval, its
``permission/decision``, its ``tool/result``, the chat items of both doors, an ACP
client's tool card, a plan review's question. So each call gets an id no other call of
the session has:

* the provider's id, when the session has not used it yet (the usual case: ids stay
  what the provider sent);
* otherwise ``<provider id>-<turn>.<step>.<index>`` (with ``.<n>`` added in the unlikely
  case that is taken too), and the event records the provider's id as
  ``providerCallId``: the model is sent its own ids back (agent/transcript.py).

The ids the session used are read from the log once, the first time a reply has calls
(:meth:`SessionStore.tool_call_ids`), and kept in step with every ``tool/call`` committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dshd.services.store import SessionStore


class CallIds:
    """The call ids a session has used, and the ids of new calls."""

    def __init__(self, store: "SessionStore") -> None:
        self._store = store
        self._used: set[str] | None = None  # read from the log on first need

    def noted(self, call_id: str) -> None:
        """A ``tool/call`` with this id was committed."""
        if self._used is not None:
            self._used.add(call_id)

    def used(self) -> set[str]:
        if self._used is None:
            self._used = self._store.tool_call_ids()
        return self._used

    def for_reply(self, turn: int, step: int) -> "ReplyCallIds":
        return ReplyCallIds(self, turn, step)


class ReplyCallIds:
    """The ids of one reply's calls, by the provider's call index: fixed the first time
    an index is seen (a live delta), so the live pieces and the committed call agree."""

    def __init__(self, ids: CallIds, turn: int, step: int) -> None:
        self._ids = ids
        self._turn, self._step = turn, step
        self._by_index: dict[int, str] = {}
        self._taken: set[str] = set()  # ids given in this reply, not yet committed
        self._provider_ids: dict[str, str] = {}  # our id -> the provider's, where they differ

    def of(self, index: int, provider_id: str) -> str:
        given = self._by_index.get(index)
        if given is not None:
            return given
        used = self._ids.used()
        call_id = provider_id
        if not call_id or call_id in used or call_id in self._taken:
            base = f"{provider_id or 'call'}-{self._turn}.{self._step}.{index}"
            call_id, n = base, 1
            while call_id in used or call_id in self._taken:
                n += 1
                call_id = f"{base}.{n}"
        self._by_index[index] = call_id
        self._taken.add(call_id)
        if call_id != provider_id:
            self._provider_ids[call_id] = provider_id
        return call_id

    def provider_id(self, call_id: str) -> str | None:
        """The provider's id of the call ``call_id`` names, when it is not ``call_id``."""
        return self._provider_ids.get(call_id)
