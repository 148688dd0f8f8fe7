"""The model transcript: the messages every request carries, built from the log alone.

Events become messages like this:

* ``user/message`` -> a user message (a person's text, a plugin's narration, a goal round);
* ``assistant/message`` -> an assistant message;
* ``tool/call`` -> a call on the assistant message just before it (or an assistant
  message of its own when the reply had no text); its ``callId`` is the session's own id
  of the call (agent/call_ids.py), and :meth:`Transcript.for_model` gives the model its
  own id back where the two differ (``providerCallId``);
* ``tool/result`` -> a tool message answering its call;
* ``context/compact`` -> every message that came from an event at or before its
  ``throughSeq`` is replaced by one user message carrying the summary;
* nothing else enters: ``plan/mode``, ``request/header`` and ``goal/change`` never do
  (PM-5: plan state and goals reach the model through their prompt sections, rendered
  from the folds on every request, never through the transcript or a summary).

:func:`build` is the cold path: it reads the log only from the last compaction's
``throughSeq`` on (the folded state says where), so the first request of a long, compacted
session costs what its tail costs. A fork, a reload and a restart build the same transcript
from the same log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dshd.models import Message, ToolCallRequest
from dshd.folds.events import AssistantMessage, ContextCompact, ToolCall, ToolResult, UserMessage

if TYPE_CHECKING:
    from dshd.services.store import SessionStore

SUMMARY_INTRO = (
    "The earlier part of this conversation was compacted to fit the context window. "
    "Summary of it, written for you to carry on from:"
)


def summary_message(summary: str) -> Message:
    """The user message that stands for everything a compaction summarized."""
    return Message("user", f"{SUMMARY_INTRO}\n\n{summary}")


class Transcript:
    """Messages in log order, each remembering the seq of the event it came from."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._seqs: list[int] = []
        self.compact_seq = 0  # seq of the last context/compact applied (0: none)
        # The last reply that reported token usage, while it is still in the transcript:
        # the index of its message and inputTokens + outputTokens (the context it filled).
        self.usage_index: int | None = None
        self.usage_tokens = 0
        # The session's call id -> the provider's, for the calls whose ids differ.
        self._provider_ids: dict[str, str] = {}

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> "Transcript":
        transcript = cls()
        for event in events:
            transcript.apply(event)
        return transcript

    @property
    def compactable(self) -> bool:
        """True when there is more than a summary to compact."""
        return len(self.messages) > (1 if self.compact_seq else 0)

    def apply(self, event: Any) -> None:
        cls = event.__class__
        if cls is UserMessage:
            self._add(event.seq, Message("user", event.data.text))
        elif cls is AssistantMessage:
            self._add(event.seq, Message("assistant", event.data.text))
            usage = event.data.usage
            if usage is not None:
                self.usage_index = len(self.messages) - 1
                self.usage_tokens = usage.inputTokens + usage.outputTokens
        elif cls is ToolCall:
            call = ToolCallRequest(event.data.callId, event.data.name, dict(event.data.arguments))
            if event.data.providerCallId is not None:
                self._provider_ids[event.data.callId] = event.data.providerCallId
            last = self.messages[-1] if self.messages else None
            if last is not None and last.role == "assistant":
                self.messages[-1] = Message("assistant", last.text, last.tool_calls + (call,))
            else:
                self._add(event.seq, Message("assistant", "", (call,)))
        elif cls is ToolResult:
            data = event.data
            self._add(event.seq, Message("tool", data.content, call_id=data.callId, ok=data.ok))
        elif cls is ContextCompact:
            self._compact(event.seq, event.data.throughSeq, event.data.summary)

    def _add(self, seq: int, message: Message) -> None:
        self.messages.append(message)
        self._seqs.append(seq)

    def _compact(self, seq: int, through_seq: int, summary: str) -> None:
        keep = next((i for i, s in enumerate(self._seqs) if s > through_seq), len(self._seqs))
        self.messages = [summary_message(summary)] + self.messages[keep:]
        self._seqs = [seq] + self._seqs[keep:]
        self.compact_seq = seq
        # Usage reported before the compaction measured a context that is gone.
        self.usage_index, self.usage_tokens = None, 0

    def for_model(self) -> tuple[Message, ...]:
        """The messages as the model is sent them: each call and its result under the
        provider's own call id (the session's ids are for everything else)."""
        ids = self._provider_ids
        if not ids:
            return tuple(self.messages)
        out: list[Message] = []
        for message in self.messages:
            if message.tool_calls and any(call.call_id in ids for call in message.tool_calls):
                calls = tuple(
                    ToolCallRequest(ids.get(call.call_id, call.call_id), call.name, call.arguments)
                    for call in message.tool_calls
                )
                message = Message(message.role, message.text, calls, message.call_id, message.ok)
            elif message.call_id is not None and message.call_id in ids:
                message = Message(message.role, message.text, message.tool_calls, ids[message.call_id], message.ok)
            out.append(message)
        return tuple(out)

    def seq_of(self, index: int) -> int:
        """The seq of the event message ``index`` came from."""
        return self._seqs[index]

    def messages_after(self, through_seq: int) -> list[Message]:
        """The messages that came from events after ``through_seq``."""
        return [m for m, s in zip(self.messages, self._seqs) if s > through_seq]


def build(store: "SessionStore") -> Transcript:
    """The transcript of the session as logged, read from the last compaction on."""
    context = store.state.context
    built = Transcript()
    store.each_event(built.apply, after_seq=context.through_seq if context.compact_seq else 0)
    return built
