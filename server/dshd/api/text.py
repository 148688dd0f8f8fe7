"""Chat items as plain text lines, for terminals (``dshd demo``, ``dshd log show --chat``).

Takes items as the wire writes them (``dsh/chat/item`` params, or
``dshd.daemon.to_wire.chat_item``): a terminal client renders what the editors render,
from the same items and their words.

``opening(item)`` is what to print when an item first appears (a tool call being made, a
plan up for review); ``closing(item)`` what to print when it is settled (the result, the
verdict); ``lines(item)`` both, for an item shown once it is complete.
"""

from __future__ import annotations

from typing import Any

from dshd.api.words import clip

WIDTH = 9  # "[agent]  "


def _tag(tag: str, text: str) -> list[str]:
    head = f"[{tag}] ".ljust(WIDTH)
    body = text.splitlines() or [""]
    return [head + body[0]] + [" " * WIDTH + line for line in body[1:]]


def opening(item: dict[str, Any]) -> list[str]:
    kind = item.get("kind")
    if kind == "session":
        return _tag("session", item["text"])
    if kind == "user-message":
        sender = item.get("sender")
        if sender == "person":
            return _tag("you", item["text"])
        if sender == "goal":
            return _tag("goal", f"{item['label']}: {' '.join(item['text'].split())}")
        return _tag(item.get("plugin") or "plugin", item["text"])
    if kind == "assistant-message":
        return _tag("agent", item["text"] or "(no text)")
    if kind == "tool-call":
        return _tag("agent", f"{item['title']} ({item['name']})" if item["title"] != item["name"] else f"calls {item['name']}")
    if kind == "plan-review":
        return _tag("agent", f"proposes a plan: {item['title']}")
    if kind in ("permission", "plan-mode", "compaction", "retry"):
        return _tag({"plan-mode": "plan", "compaction": "context"}.get(kind, kind), item["text"])
    if kind == "goal":
        return _tag("goal", item["text"])
    if kind == "turn-end":
        return _tag("turn", item["text"])
    return []


def settled(item: dict[str, Any]) -> bool:
    """Whether an item has reached its end (a tool's result, a review's verdict)."""
    if item.get("partial"):
        return False
    if item.get("kind") == "tool-call":
        return item.get("status") not in ("running", "waiting")  # waiting: for its approval
    if item.get("kind") == "plan-review":
        return item.get("outcome") != "pending"
    return True


def closing(item: dict[str, Any]) -> list[str]:
    kind = item.get("kind")
    if kind == "tool-call" and item.get("status") not in ("running", "waiting"):
        verdict = "discarded (the turn ended first)" if item.get("discarded") else item["status"]
        result = clip((item.get("result") or "").replace("\n", " ⏎ "), 160)
        return _tag("tool", f"{verdict}: {result}" if result else verdict)
    if kind == "plan-review" and item.get("outcome") != "pending":
        text = item["outcomeText"]
        detail = item.get("feedback") or item.get("detail")
        return _tag("review", text + (f"\n{detail}" if detail else ""))
    return []


def lines(item: dict[str, Any]) -> list[str]:
    """An item shown whole: what it is, then how it ended."""
    out = opening(item)
    if item.get("kind") == "plan-review":
        out += [" " * WIDTH + "│ " + line for line in item.get("plan", "").rstrip("\n").splitlines()]
    return out + closing(item)
