"""A session's title when it was created without one: its first prompt's words.

The fold takes it from the first ``user/message`` the person wrote (source "user"), so
every reader of the log (the session list, ACP's ``session/list``, a fork) gets the same
title with no second store. Slash commands are not words of the prompt: ``/plan fix the
parser`` titles the session "fix the parser" (the plan command steers only the rest in,
and a leading command left in the text is dropped here too). Markdown links keep their
text, attached context (``<context ...>`` sections) is not part of the title, and the
words are cut at a word boundary to :data:`WORDS_MAX` characters.
"""

from __future__ import annotations

import re

WORDS_MAX = 80
_COMMAND = re.compile(r"^/[A-Za-z][\w-]*(?=\s|$)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_CONTEXT = re.compile(r"<context\b[^>]*>.*?</context>", re.DOTALL)


def title_from_prompt(text: str) -> str | None:
    """The title a prompt gives its session, or None when it has no words."""
    if not isinstance(text, str):
        return None
    text = _CONTEXT.sub(" ", text)
    words = " ".join(text.split())
    while True:
        command = _COMMAND.match(words)
        if command is None:
            break
        words = words[command.end() :].lstrip()
    words = _LINK.sub(lambda m: m.group(1), words).strip()
    if not words:
        return None
    if len(words) <= WORDS_MAX:
        return words
    cut = words[: WORDS_MAX - 1]
    space = cut.rfind(" ")
    if space >= WORDS_MAX // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "\u2026"
