"""A goal's rounds (``dshd.folds.rounds``) as people read them: a table of lines for a
terminal and a picture (SVG), both from the same records ``dsh/goal/rounds`` sends.

Everything from the log that is shown (the goal id, an outcome) is made safe to read
first (``shown``: control and bidi characters escaped), and in the picture also escaped
as XML text, so a log cannot inject markup or break the file.
"""

from __future__ import annotations

from datetime import datetime
from xml.sax.saxutils import escape

from dshd.api.words import seconds, tokens
from dshd.folds.rounds import RUNNING, GoalRoundRecord, GoalRounds
from dshd.formats import shown

# Outcome colours: finished, still running, stopped by the person, failed, anything else.
OUTCOME_COLOURS = {
    "end-turn": "#2e7d32",
    RUNNING: "#1565c0",
    "cancelled": "#757575",
    "model-error": "#c62828",
    "error": "#c62828",
    "interrupted": "#c62828",
}
OTHER_OUTCOME = "#ef6c00"
CACHED_COLOUR, INPUT_COLOUR, OUTPUT_COLOUR, WAIT_COLOUR = "#90caf9", "#1e88e5", "#8e24aa", "#ffb300"


def _ms_between(start: str, end: str | None) -> int | None:
    if end is None:
        return None
    try:
        parse = datetime.fromisoformat
        took = parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0, round(took.total_seconds() * 1000))


def duration(ms: int) -> str:
    """A time as people read it: 500 ms, 4.5 s, then minutes (40m 05s) and hours (2h 03m)."""
    if ms < 60_000:
        return seconds(ms)
    whole = (ms + 500) // 1000
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _count(n: int, estimated: bool) -> str:
    return ("~" if estimated else "") + tokens(n)


def _totals(rounds: list[GoalRoundRecord]) -> tuple[int, int, int, int, bool]:
    return (
        sum(r.tokens.input for r in rounds),
        sum(r.tokens.cached_input for r in rounds),
        sum(r.tokens.output for r in rounds),
        sum(r.waited_ms for r in rounds),
        any(r.estimated for r in rounds),
    )


def summary(result: GoalRounds) -> str:
    """One line: the goal, its rounds, tokens, cache share and waiting."""
    if result.goal_id is None:
        return "no current goal"
    rounds = result.rounds
    inp, cached, out, waited, estimated = _totals(rounds)
    share = f" ({cached * 100 // inp}% cached)" if inp else ""
    return (
        f"goal {shown(result.goal_id)}: {len(rounds)} round{'s' if len(rounds) != 1 else ''}, "
        f"{_count(inp, estimated)} in{share} + {_count(out, estimated)} out tokens, waited for you {duration(waited)}"
    )


COLUMNS = ("round", "turn", "rev", "started", "took", "waited", "input", "cached", "output", "tools", "outcome")


def table(result: GoalRounds) -> list[str]:
    """The summary line, then one row per round under a header (no rows: the summary only)."""
    lines = [summary(result)]
    if not result.rounds:
        return lines
    rows = [COLUMNS]
    for r in result.rounds:
        took = _ms_between(r.started_at, r.ended_at)
        rows.append((
            str(r.round), str(r.turn), str(r.revision), shown(r.started_at),
            "-" if took is None else duration(took), duration(r.waited_ms),
            _count(r.tokens.input, r.estimated), _count(r.tokens.cached_input, r.estimated),
            _count(r.tokens.output, r.estimated), str(r.tool_calls), shown(r.outcome),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for row in rows:
        # Numbers right-aligned, the time and the outcome left-aligned.
        cells = [cell.ljust(w) if i in (3, 10) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return lines


# ---- the picture ---------------------------------------------------------------------------


def _text(x: float, y: float, body: str, *, size: int = 11, anchor: str = "start", fill: str = "#212121") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">'
        f"{escape(shown(body))}</text>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str | None = None) -> str:
    inner = f"<title>{escape(shown(tip))}</title>" if tip else ""
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}">{inner}</rect>'


def svg(result: GoalRounds) -> str:
    """One bar per round: its tokens stacked (cached input, other input, output) above, its
    wait for a person below, a strip in its outcome's colour between; a tooltip per round."""
    rounds = result.rounds
    n = max(1, len(rounds))
    bar = max(3.0, min(28.0, 900.0 / n))
    left, top, tokens_h, strip_h, wait_h = 60.0, 48.0, 220.0, 8.0, 80.0
    width = left + n * bar + 20.0
    width = max(width, 780.0)  # room for the legend
    height = top + tokens_h + strip_h + wait_h + 70.0
    most_tokens = max((r.tokens.input + r.tokens.output for r in rounds), default=0) or 1
    most_wait = max((r.waited_ms for r in rounds), default=0) or 1
    base = top + tokens_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        _text(left, 20, summary(result), size=13),
        _text(left - 6, top + 4, _count(most_tokens, False), anchor="end", size=10),
        _text(left - 6, base, "0", anchor="end", size=10),
        _text(left - 6, base + strip_h + wait_h, duration(most_wait), anchor="end", size=10),
        _text(8, top + tokens_h / 2, "tokens", size=10),
        _text(8, base + strip_h + wait_h / 2, "waited", size=10),
    ]
    for i, r in enumerate(rounds):
        x = left + i * bar
        w = max(1.0, bar - 1.0)
        t = r.tokens
        took = _ms_between(r.started_at, r.ended_at)
        tip = (
            f"round {r.round} (turn {r.turn}, revision {r.revision}): {r.outcome}; "
            f"{_count(t.input, r.estimated)} in ({_count(t.cached_input, r.estimated)} cached) + "
            f"{_count(t.output, r.estimated)} out tokens; {r.tool_calls} tool calls; "
            f"waited {duration(r.waited_ms)}" + ("" if took is None else f"; took {duration(took)}")
        )
        scale = tokens_h / most_tokens
        cached = min(t.cached_input, t.input)
        y = base
        for amount, colour in ((cached, CACHED_COLOUR), (t.input - cached, INPUT_COLOUR), (t.output, OUTPUT_COLOUR)):
            h = amount * scale
            if h > 0:
                y -= h
                parts.append(_rect(x, y, w, h, colour, tip))
        parts.append(_rect(x, base + 1, w, strip_h - 2, OUTCOME_COLOURS.get(r.outcome, OTHER_OUTCOME), tip))
        wait = r.waited_ms * wait_h / most_wait
        if wait > 0:
            parts.append(_rect(x, base + strip_h, w, wait, WAIT_COLOUR, tip))
        every = max(1, round(40 / bar))
        if i % every == 0:
            parts.append(_text(x + w / 2, base + strip_h + wait_h + 14, str(r.round), size=9, anchor="middle"))
    legend = [
        (CACHED_COLOUR, "cached input"), (INPUT_COLOUR, "input"), (OUTPUT_COLOUR, "output"), (WAIT_COLOUR, "waited for you"),
        (OUTCOME_COLOURS["end-turn"], "finished"), (OUTCOME_COLOURS[RUNNING], "running"),
        (OUTCOME_COLOURS["cancelled"], "cancelled"), (OUTCOME_COLOURS["model-error"], "failed"), (OTHER_OUTCOME, "other"),
    ]  # fmt: skip
    x, y = left, height - 18
    for colour, label in legend:
        parts.append(_rect(x, y - 9, 10, 10, colour))
        parts.append(_text(x + 14, y, label, size=10))
        x += 24 + 6.2 * len(label)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

