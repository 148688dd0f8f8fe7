"""run_command's ``cwd`` is walked from a handle on the root and the command runs only in
the folder that was checked (tools/run.py), end to end: the real dshd over stdio in
full-access (where nothing else would stop a write outside).

- A ``cwd`` that is a link leading out is refused as unsafe-path and nothing runs (a
  marker outside is not made); control: a ``cwd`` inside runs and makes its marker there.
- While a racer process (tests/file_racer.py) swaps ``sub`` for a link to an outside
  folder and back as fast as it can, a few dozen commands with ``cwd = "sub"`` make
  markers: none lands outside, every refusal says unsafe-path. Controls: the racer swapped,
  and a command started by name (the old way) does land outside meanwhile."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log
from tests.attacks.test_file_races import start_racer, stop_racer

ROUNDS = 8
PER_ROUND = 6
FULL_ACCESS = '\n[agent]\nmaxSteps = 64\n[tools]\napprove = []\nsandbox = "full-access"\n'


async def run_replies(daemons, replies: list[dict], network: bool = False) -> list[dict]:
    extra = FULL_ACCESS + ("network = true\n" if network else "")
    write_workspace(daemons.root, replies + [{"text": "done"}], plugins=["tools"], extra_config=extra)
    daemons.trusted = True
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    result = await client.request("dsh/agent/prompt", {"agentId": created["agentId"], "text": "go"}, timeout=300)
    assert result["stopReason"] == "end-turn", result
    await client.stop()
    return [e["data"] for e in of_type(read_log(daemons.root, created["sessionId"]), "tool/result")]


def run(command: str, cwd: str) -> dict:
    return {"name": "run_command", "arguments": {"command": command, "cwd": cwd}}


@pytest.mark.slow
async def test_a_cwd_link_leading_out_is_refused_and_nothing_runs(tmp_path, daemons):
    root = daemons.root.resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub").mkdir()
    (root / "out").symlink_to(outside)
    refused, ran = await run_replies(daemons, [{"toolCalls": [run("touch marker", "out"), run("touch marker", "sub")]}])
    assert not refused["ok"] and "unsafe-path" in refused["content"] and "out" in refused["content"], refused
    assert list(outside.iterdir()) == []  # nothing ran there
    assert ran["ok"] and (root / "sub" / "marker").exists(), ran  # control: a cwd inside runs there


# Network on: the outside folder (under /tmp) is visible in the sandbox, so a command that
# followed the swapped link would write there; off: /tmp is hidden (its sockets).
@pytest.mark.slow
@pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
async def test_a_racing_swap_of_the_cwd_never_runs_a_command_outside(tmp_path, daemons, network):
    root = daemons.root.resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub").mkdir()
    replies = [{"toolCalls": [run(f"touch m-{n}-{i}", "sub") for i in range(PER_ROUND)]} for n in range(ROUNDS)]
    count_file = tmp_path / "swaps"
    racer = start_racer(root / "sub", outside, count_file)
    try:
        raced = await run_replies(daemons, replies, network)
        # Control: the racer is effective: a command started by the folder's name lands outside.
        naive = 0
        deadline = time.monotonic() + 15
        while naive == 0 and time.monotonic() < deadline:
            try:
                subprocess.run(["/bin/sh", "-c", "touch naive"], cwd=root / "sub", check=False, timeout=10)
            except OSError:
                pass
            naive = sum(1 for p in outside.iterdir() if p.name == "naive")
    finally:
        swaps = stop_racer(racer, count_file)
    assert swaps > 1000, swaps
    assert naive == 1, "a command started by name never landed outside: the probe proves nothing"
    assert [p.name for p in outside.iterdir() if p.name != "naive"] == []  # no command ran outside
    assert len(raced) == ROUNDS * PER_ROUND
    failed = [r for r in raced if not r["ok"]]
    odd = [r["content"] for r in failed if not ("unsafe-path" in r["content"] and "sub" in r["content"])]
    assert not odd, odd[:3]
    ran = [r for r in raced if r["ok"]]
    made = sorted(p.name for p in (root / "sub").iterdir() if p.name.startswith("m-"))
    # What ran, ran inside (most calls are refused: the racer swaps far faster than a
    # command starts; the first test's control shows a cwd inside runs).
    assert len(made) == len(ran), (len(ran), made)
    print(f"cwd race (network {'on' if network else 'off'}): {swaps} swaps, {len(ran)} commands ran inside, {len(failed)} refused as unsafe-path")
