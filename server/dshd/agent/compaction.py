"""Context compaction: the request-size estimate, the summary request and its figures.

The estimate of a request, in tokens: when a reply still in the transcript reported its
usage, ``inputTokens + outputTokens`` of the last such reply (the context it filled) plus
characters/4 of every message after it; otherwise characters/4 of the whole request
(system prompt, tool specs, messages). Characters/4 is a rough rule for English and code;
the usage a provider reports corrects it as soon as there is one.

The summary request has its own system prompt (:data:`SUMMARY_SYSTEM`, prompt section id
``context:compact`` in its ``request/header``), no tools, and one user message holding the
conversation rendered as text. Rendering it as text rather than as the original messages
lets it be clipped to fit (long items are cut in the middle, then the oldest items are
left out) and keeps the request valid for every provider.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dshd.models import Message, ModelRequest, ToolSpec
from dshd.models.usage import message_chars, text_tokens, tools_chars  # characters/4, shared with usage estimates
from dshd.agent.transcript import SUMMARY_INTRO, Transcript, summary_message

COMPACT_SECTION_ID = "context:compact"

SUMMARY_SYSTEM = """\
You are compacting the context of a coding agent that works in a person's workspace. \
The conversation below is about to be replaced by your summary: the agent will carry on \
from the summary alone, so write what it needs to go on without asking again.

Write, in this order:
1. The person's requests and instructions. Quote the most recent request, and every \
constraint the person set, word for word.
2. What has been done: files read, created or changed (with their paths), commands run \
and what they showed, decisions taken and why.
3. Errors met and how they were fixed, or what still fails.
4. Where the work stands now: what was in progress when the conversation ended.
5. The next steps, in order.

Keep exact names: paths, functions, commands, identifiers, error messages. Leave out \
pleasantries and finished detours that do not matter for what comes next. Do not say \
whether plan mode is on, nor the goal's phase, budget or rounds: the agent is told those \
separately, fresh on every request. Reply with the summary only, in at most about \
{words} words."""

_DEFAULT_WORDS = 1500
_MIN_WORDS = 100


def estimate_request(system: str, tools: Sequence[ToolSpec], transcript: Transcript) -> int:
    """Estimated tokens of a request made of ``system``, ``tools`` and the transcript."""
    if transcript.usage_index is not None:
        after = transcript.messages[transcript.usage_index + 1 :]
        return transcript.usage_tokens + text_tokens(sum(map(message_chars, after)))
    return text_tokens(len(system) + tools_chars(tools) + sum(map(message_chars, transcript.messages)))


def estimate_after(system: str, tools: Sequence[ToolSpec], summary: str, kept: Sequence[Message]) -> int:
    """Estimated tokens of the next request once ``summary`` replaced the rest (``kept``:
    the messages after the summarized part)."""
    chars = len(system) + tools_chars(tools) + message_chars(summary_message(summary))
    return text_tokens(chars + sum(map(message_chars, kept)))


def keep_chars(threshold_tokens: int | None) -> int:
    """How much verbatim tail a compaction may keep: a quarter of the compaction threshold
    (2,000 tokens without a context window), in characters."""
    tokens = 2000 if threshold_tokens is None else threshold_tokens // 4
    return tokens * 4


def kept_from(transcript: Transcript, max_chars: int) -> int:
    """Where the verbatim tail a compaction keeps starts (an index into the messages).

    The user messages that end the transcript (the prompt a turn opened with, text steered
    in) are kept word for word when together they are at most ``max_chars`` and something
    comes before them (after any earlier summary) to summarize; otherwise nothing is kept
    (the index is the end)."""
    messages = transcript.messages
    end = len(messages)
    first = 1 if transcript.compact_seq else 0
    start = end
    while start > first and messages[start - 1].role == "user":
        start -= 1
    if start in (first, end) or sum(map(message_chars, messages[start:])) > max_chars:
        return end
    return start


def summary_words(context_window: int | None) -> int:
    """How long a summary may be: about a tenth of the window, 100 to 1,500 words."""
    if context_window is None:
        return _DEFAULT_WORDS
    return max(_MIN_WORDS, min(_DEFAULT_WORDS, int(context_window * 0.1 * 0.75)))


def summary_request(
    messages: Sequence[Message], *, focus: str = "", budget_tokens: int | None = None, words: int = _DEFAULT_WORDS
) -> ModelRequest:
    """The request that asks the model for a summary of ``messages``, at most
    ``budget_tokens`` (estimated) when given."""
    system = SUMMARY_SYSTEM.format(words=words)
    ask = "Write the summary now."
    if focus.strip():
        ask += f" The person asked it to pay special attention to: {focus.strip()}"
    frame = len(system) + len("<conversation>\n\n</conversation>\n\n") + len(ask)
    budget_chars = None if budget_tokens is None else max(0, budget_tokens * 4 - frame)
    history = render_history(messages, budget_chars)
    text = f"<conversation>\n{history}\n</conversation>\n\n{ask}"
    return ModelRequest(system, (Message("user", text),), ())


def _entry(message: Message) -> str:
    if message.role == "user":
        return f"[user]\n{message.text}"
    if message.role == "tool":
        return f"[tool result {message.call_id}, {'ok' if message.ok else 'failed'}]\n{message.text}"
    parts = [f"[assistant]\n{message.text}"] if message.text else []
    for call in message.tool_calls:
        parts.append(f"[tool call {call.call_id}: {call.name}]\n{json.dumps(call.arguments, ensure_ascii=False)}")
    return "\n\n".join(parts) or "[assistant]"


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    note = "\n[... {} characters left out ...]\n"
    keep = max(0, limit - len(note) - 8)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return text[:head] + note.format(cut) + (text[-tail:] if tail else "")


def render_history(messages: Sequence[Message], budget_chars: int | None = None) -> str:
    """The conversation as text for the summary request, within ``budget_chars``: long
    items are cut in the middle first; if that is not enough the oldest items are left
    out (a leading summary of an earlier compaction is kept, clipped if need be)."""
    entries = [_entry(m) for m in messages]
    sep = "\n\n"

    def size(items: list[str]) -> int:
        return sum(map(len, items)) + len(sep) * max(0, len(items) - 1)

    if budget_chars is None or size(entries) <= budget_chars:
        return sep.join(entries)
    for limit in (8000, 4000, 2000, 1000, 500):
        entries = [clip_middle(e, limit) for e in entries]
        if size(entries) <= budget_chars:
            return sep.join(entries)
    keep_first = bool(messages) and messages[0].role == "user" and messages[0].text.startswith(SUMMARY_INTRO)
    first = entries[:1] if keep_first else []
    rest = entries[1:] if keep_first else entries
    dropped = 0
    while rest and size(first + [f"[{dropped} earlier items left out]"] + rest) > budget_chars:
        rest = rest[1:]
        dropped += 1
    out = first + ([f"[{dropped} earlier items left out]"] if dropped else []) + rest
    if size(out) > budget_chars and first:
        over = size(out) - budget_chars
        out[0] = clip_middle(out[0], max(200, len(out[0]) - over))
    return sep.join(out)
