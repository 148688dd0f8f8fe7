"""A session created without a title takes its first prompt's words (folds/titles.py),
the same through the reference fold (``apply``) and replay's hot loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from dshd.folds.replay import replay
from dshd.folds.titles import WORDS_MAX, title_from_prompt
from dshd.services.store import SessionStore


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("/plan fix the parser", "fix the parser"),
        ("fix the parser", "fix the parser"),
        ("  Fix   the\nparser  ", "Fix the parser"),
        ("/plan /compact tidy up", "tidy up"),
        ("/plan", None),
        ("   ", None),
        ("look at [client.py](file:///w/http/client.py)\nplease", "look at client.py please"),
        ('read this\n\n<context uri="file:///w/a.py">\nprint(1)\n</context>', "read this"),
        ("a/b is not a command", "a/b is not a command"),
        ("/usr/bin is a path, not a command", "/usr/bin is a path, not a command"),
    ],
)
def test_title_from_prompt(prompt, title):
    assert title_from_prompt(prompt) == title


def test_a_long_prompt_is_cut_at_a_word():
    title = title_from_prompt("word " * 100)
    assert title is not None and len(title) <= WORDS_MAX and title.endswith("\u2026")
    assert title[:-1].split() == ["word"] * len(title[:-1].split())


def _session(tmp_path: Path, title: str | None) -> SessionStore:
    return SessionStore.create(tmp_path / ".dsh" / "sessions", "s-" + "0" * 25 + ("1" if title else "2"), title=title)


@pytest.mark.parametrize("given", [None, "Given title"])
def test_the_fold_takes_the_first_person_prompt_only_when_untitled(tmp_path, given):
    store = _session(tmp_path, given)
    store.commit("turn/open", {"turn": 1, "cause": "continuation"}, turn=1)
    store.commit("user/message", {"text": "Continue the goal", "source": "plugin", "plugin": "goals"}, turn=1)
    store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    assert store.state.title == given  # a plugin's message is not the person's prompt
    store.commit("turn/open", {"turn": 2, "cause": "prompt"}, turn=2)
    store.commit("user/message", {"text": "fix the parser", "source": "user"}, turn=2)
    store.commit("user/message", {"text": "and the lexer", "source": "user"}, turn=2)
    store.commit("turn/close", {"turn": 2, "stopReason": "end-turn"}, turn=2)
    expected = given or "fix the parser"
    assert store.state.title == expected
    path = store.path
    store.close()
    # Replay's hot loop (no checkpoint) agrees with the fold the store used.
    assert replay(path, use_checkpoint=False).state.title == expected
