"""H-2 under a race: the real dshd over stdio runs a few hundred write_file, edit_file,
read_file, list_files and search calls on ``sub/`` while a racer process (tests/file_racer.py)
swaps ``sub`` for a symbolic link to a folder outside the workspace and back as fast as it
can. Nothing may land in, or be read from, the outside folder.

Positive controls in the same test: the same calls with no racer all succeed and land
inside; the racer really swapped (its count), and while it swaps, the by-name way the tools
used before (resolve, check, then open by name) does land outside."""

from __future__ import annotations

import pytest

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

RACER = Path(__file__).resolve().parents[1] / "file_racer.py"
SECRET = "OUTSIDE-SECRET"
ROUNDS = 30  # replies of the scripted model, each with one call of every kind below
WRITES_PER_ROUND = 6


def round_calls(n: int) -> dict:
    calls = [{"name": "write_file", "arguments": {"path": f"sub/w{n}-{i}.txt", "content": f"inside {n}-{i}\n"}}
             for i in range(WRITES_PER_ROUND)]
    calls += [
        # "value" occurs once, before and after: each edit matches whatever the others did.
        {"name": "edit_file", "arguments": {"path": "sub/edit.txt", "oldText": "value", "newText": "value!"}},
        {"name": "edit_file", "arguments": {"path": "sub/edit.txt", "oldText": "value", "newText": "value!"}},
        {"name": "read_file", "arguments": {"path": "sub/data.txt"}},
        {"name": "read_file", "arguments": {"path": "sub/edit.txt"}},
        {"name": "list_files", "arguments": {"path": "sub"}},
        {"name": "search", "arguments": {"pattern": "SECRET|inside", "path": "sub"}},
    ]
    return {"toolCalls": calls}


def seed(root: Path, outside: Path) -> dict[str, bytes]:
    replies = [round_calls(n) for n in range(ROUNDS)] + [{"text": "done"}]
    write_workspace(root, replies, plugins=["tools"], extra_config="\n[tools]\napprove = []\n[agent]\nmaxSteps = 64\n")
    sub = root / "sub"
    sub.mkdir()
    (sub / "data.txt").write_text("inside data\n")
    (sub / "edit.txt").write_text("value\n")
    outside.mkdir()
    (outside / "data.txt").write_text(f"{SECRET}\n")
    (outside / "edit.txt").write_text("value\n")
    (outside / "only-outside.txt").write_text(f"{SECRET} only\n")
    return snapshot(outside)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


async def run_rounds(daemons) -> tuple[str, list[dict]]:
    """One turn of every round through a fresh daemon (which reads the script afresh)."""
    daemons.trusted = True
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}, timeout=300)
    assert result["stopReason"] == "end-turn", result
    events = read_log(daemons.root, created["sessionId"])
    names = {e["data"]["callId"]: e["data"]["name"] for e in of_type(events, "tool/call")}
    out = [{"name": names[e["data"]["callId"]], **e["data"]} for e in of_type(events, "tool/result")]
    await client.stop()
    return created["sessionId"], out


def start_racer(sub: Path, outside: Path, count_file: Path) -> subprocess.Popen:
    racer = subprocess.Popen(
        [sys.executable, str(RACER), str(sub), str(outside), str(count_file)], stdout=subprocess.PIPE, text=True
    )
    # The atomic exchange keeps the name always there (a gap would let a write make a new folder).
    assert racer.stdout is not None and racer.stdout.readline().strip() == "exchange"
    return racer


def stop_racer(racer: subprocess.Popen, count_file: Path) -> int:
    racer.send_signal(signal.SIGTERM)
    assert racer.wait(timeout=30) == 0
    return int(count_file.read_text())


def naive_write_lands_outside(root: Path, outside: Path, seconds: float = 10.0) -> int:
    """The old way (resolve and check, then open by name), against the running racer:
    how many of its writes landed outside."""
    deadline = time.monotonic() + seconds
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        name = f"naive-{attempt}.txt"
        try:
            target = (root / "sub" / name).resolve()
            if not target.is_relative_to(root):
                continue  # the check the old code made: caught this time
            with open(root / "sub" / name, "w") as f:
                f.write("naive\n")
        except OSError:
            continue
        if any(p.name.startswith("naive-") for p in outside.iterdir()):
            break
    return sum(1 for p in outside.iterdir() if p.name.startswith("naive-"))


def naive_search_reads_outside(root: Path, seconds: float = 10.0) -> bool:
    """ripgrep as the tools run it, given the folder by name, against the running racer:
    whether it ever reported a line of the outside folder (what the tools' check drops)."""
    from dshd.tools.search import COMMON, rg_binary

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = subprocess.run([rg_binary(), *COMMON, "--no-heading", "SECRET", "--", "sub"], cwd=root,
                             capture_output=True, text=True)
        if SECRET in out.stdout:
            return True
    return False


@pytest.mark.slow
async def test_a_racing_swap_never_lets_a_file_tool_reach_outside(tmp_path, daemons):
    root = daemons.root.resolve()
    outside = tmp_path / "outside"
    before = seed(root, outside)

    # (a) No racer: every call goes through and lands inside.
    _, calm = await run_rounds(daemons)
    assert len(calm) == ROUNDS * 12 and all(r["ok"] for r in calm), [r for r in calm if not r["ok"]][:3]
    assert all((root / "sub" / f"w{n}-{i}.txt").read_text() == f"inside {n}-{i}\n"
               for n in range(ROUNDS) for i in range(WRITES_PER_ROUND))
    assert (root / "sub" / "edit.txt").read_text() == "value" + "!" * (2 * ROUNDS) + "\n"
    assert snapshot(outside) == before

    # The same rounds again, with the racer swapping sub/ for a link to outside/.
    for p in (root / "sub").iterdir():
        if p.name.startswith("w"):
            p.unlink()
    (root / "sub" / "edit.txt").write_text("value\n")
    count_file = tmp_path / "swaps"
    racer = start_racer(root / "sub", outside, count_file)
    try:
        raced_session, raced = await run_rounds(daemons)
        # (b) The racer is effective: the by-name way lands outside while it runs.
        naive_outside = naive_write_lands_outside(root, outside)
        naive_search = naive_search_reads_outside(root)
    finally:
        swaps = stop_racer(racer, count_file)
    assert swaps > 1000, swaps
    assert naive_outside >= 1, "the racer never made a by-name write land outside: the probe proves nothing"
    assert naive_search, "ripgrep never read outside during the race: the search probe proves nothing"
    for p in outside.iterdir():
        if p.name.startswith("naive-"):
            p.unlink()

    # Nothing landed outside, nothing changed there, nothing from there was read or listed.
    assert snapshot(outside) == before
    assert len(raced) == ROUNDS * 12
    failed = [r for r in raced if not r["ok"]]
    odd = [r["content"] for r in failed if not ("unsafe-path" in r["content"] and "sub" in r["content"])]
    assert not odd, odd[:5]
    assert not [r for r in raced if SECRET in r["content"] or "only-outside" in r["content"]]
    log_text = "\n".join(json.dumps(e) for e in read_log(root, raced_session))
    assert SECRET not in log_text
    # Calls did go through during the race (it is not all refusals), and they landed inside.
    written = [r for r in raced if r["name"] == "write_file" and r["ok"]]
    assert written and len(failed) > 0, (len(written), len(failed))
    for r in written:
        name = r["content"].split(" ", 1)[0].removeprefix("sub/")
        assert (root / "sub" / name).read_text().startswith("inside ")
    assert not [p for p in root.rglob("*.dsh-tmp")]
    dropped = sum("left out" in r["content"] for r in raced if r["ok"])
    print(f"race: {swaps} swaps, {len(written)} writes ok, {len(failed)} refused as unsafe-path, "
          f"{dropped} listings/searches with entries dropped, {naive_outside} by-name writes outside")


async def test_racer_leaves_the_folder_in_place(tmp_path):
    """The racer itself: after SIGTERM the folder is a folder again and the link is gone."""
    sub, outside = tmp_path / "sub", tmp_path / "outside"
    sub.mkdir()
    outside.mkdir()
    (sub / "keep").write_text("k")
    count_file = tmp_path / "n"
    racer = start_racer(sub, outside, count_file)
    await asyncio.sleep(0.3)
    assert stop_racer(racer, count_file) > 10
    assert sub.is_dir() and not sub.is_symlink() and (sub / "keep").read_text() == "k"
    assert not os.path.lexists(str(sub) + ".racer-link")
