"""`dshd log show PATH --goal [--svg FILE]`: the current goal's rounds as a table and a
picture, run as the real command; the same records `dsh/goal/rounds` sends; what a log
wrote is escaped in both (a hostile stopReason neither breaks the SVG nor injects markup)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from dshd.folds.events import decode_line
from dshd.folds.rounds import goal_rounds
from dshd.log import iter_records
from log.test_log_sample import SAMPLE
from rounds_log import SESSION, Log

DSHD = [sys.executable, "-m", "dshd"]
SVG = "{http://www.w3.org/2000/svg}"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(DSHD + list(args), capture_output=True, text=True, timeout=60)


def rounds_in(path: Path):
    return goal_rounds(decode_line(line) for _n, _o, line in iter_records(path))


def test_goal_table_has_a_row_per_round_of_the_samples_goal(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    shutil.copy(SAMPLE, path)
    expected = rounds_in(path)
    assert expected.goal_id == "g-7f3a2c" and len(expected.rounds) == 4
    proc = run("log", "show", str(path), "--goal")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("goal g-7f3a2c: 4 rounds"))
    header, *rows = lines[summary + 1 :]
    assert header.split() == ["round", "turn", "rev", "started", "took", "waited", "input", "cached", "output", "tools", "outcome"]
    assert len(rows) == 4
    for row, record in zip(rows, expected.rounds):
        cells = row.split()
        assert cells[:4] == [str(record.round), str(record.turn), str(record.revision), record.started_at]
        assert cells[-1] == record.outcome and cells[-2] == str(record.tool_calls)
    # Without --goal the events are listed instead (control: the flag chose the table).
    plain = run("log", "show", str(path))
    assert "round  turn" not in plain.stdout and "goal/change" in plain.stdout


def test_svg_draws_one_bar_per_round_and_escapes_what_the_log_wrote(tmp_path: Path) -> None:
    log = Log(tmp_path / "sessions")
    log.goal_change("create", 0)
    log.round(1.0)
    log.reply(2.0, 5000, 100)
    log.call(2.0, "p1", "exit_plan_mode", {"plan": "# Plan\n"})
    log.result(12.0, "p1", review={"outcome": "approved"})
    log.close(13.0)
    log.round(14.0)
    log.reply(15.0, 6000, 50)
    hostile = '</text><script>alert(1)</script>\x1b[31m&"'
    log.close(16.0, hostile)
    log.round(17.0)  # still running
    log.store.close()
    path = tmp_path / "sessions" / SESSION / "log.jsonl"
    picture = tmp_path / "rounds.svg"

    proc = run("log", "show", str(path), "--goal", "--svg", str(picture))
    assert proc.returncode == 0, proc.stderr
    assert f"picture: {picture}" in proc.stdout
    assert "\x1b" not in proc.stdout  # the terminal gets the escape escaped
    root = ET.fromstring(picture.read_text(encoding="utf-8"))  # well-formed XML
    assert root.tag == f"{SVG}svg"
    assert root.find(f".//{SVG}script") is None
    tips = [t.text for t in root.iter(f"{SVG}title")]
    for n in (1, 2, 3):
        assert any(tip.startswith(f"round {n} ") for tip in tips), n
    assert any("</script>" in tip for tip in tips)  # the text is there, as text
    assert not any("\x1b" in (t.text or "") for t in root.iter())
    # Round 1's wait (the 10 s plan review) is drawn, and the outcomes' colours.
    fills = {r.get("fill") for r in root.iter(f"{SVG}rect")}
    assert {"#ffb300", "#2e7d32", "#1565c0", "#ef6c00"} <= fills
    waits = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#ffb300" and r.find(f"{SVG}title") is not None]
    assert len(waits) == 1 and waits[0].find(f"{SVG}title").text.startswith("round 1 ")


def test_no_goal_and_bad_paths_are_said_plainly(tmp_path: Path) -> None:
    log = Log(tmp_path / "sessions")
    log.prompt(1.0)
    log.close(2.0)
    log.store.close()
    path = tmp_path / "sessions" / SESSION / "log.jsonl"
    proc = run("log", "show", str(path), "--goal")
    assert proc.returncode == 0 and "no current goal" in proc.stdout
    missing = run("log", "show", str(tmp_path / "nope.jsonl"), "--goal")
    assert missing.returncode == 1 and "no such file" in missing.stderr
    unwritable = run("log", "show", str(path), "--svg", str(tmp_path / "no-dir" / "x.svg"))
    assert unwritable.returncode == 1 and "cannot write" in unwritable.stderr and "Traceback" not in unwritable.stderr
    both = run("log", "show", str(path), "--goal", "--chat")
    assert both.returncode == 2 and "--chat" in both.stderr


def test_a_log_that_is_not_sound_shows_the_rounds_before_the_bad_line(tmp_path: Path) -> None:
    log = Log(tmp_path / "sessions")
    log.goal_change("create", 0)
    log.round(1.0)
    log.close(2.0)
    log.round(3.0)
    log.close(4.0)
    log.store.close()
    path = tmp_path / "sessions" / SESSION / "log.jsonl"
    sound = run("log", "show", str(path), "--goal")  # control: both rounds while the log is sound
    assert sound.returncode == 0 and "goal g1: 2 rounds" in sound.stdout
    lines = path.read_bytes().splitlines(keepends=True)
    # Round 2's turn/open gets a seq gap: replay stops there.
    bad = next(i for i, line in enumerate(lines) if b'"turn/open"' in line and b'"turn":2' in line)
    lines[bad] = lines[bad].replace(b'"seq":%d' % (bad + 1), b'"seq":%d' % (bad + 9), 1)
    path.write_bytes(b"".join(lines))
    proc = run("log", "show", str(path), "--goal")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "log is NOT sound" in proc.stdout and "goal g1: 1 round," in proc.stdout
    assert f"{bad + 1:>6}  !! seq gap" in proc.stdout
