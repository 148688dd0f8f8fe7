"""`dshd demo`: the article's scenario, run against the real daemon as a real client.

The daemon is started as a child process over stdio in a fresh workspace with the
scripted model; this process plays both the editor and the person at the keyboard,
and prints what a person would see: the chat (the daemon's chat items, as the editors
render them), the plan review, the status bar (in the editors' words).

Scenario: /plan; the model proposes a plan with exit_plan_mode; the person sends it
back once with feedback and a line comment; the revised plan is approved; a goal with
a 40-round and a 100k-token budget; rounds (and the tokens their replies report) are
spent; the model blocks the goal with
`dependency-conflict`; the person resumes it; the daemon is restarted; the goal is
found active and disarmed with nothing running; the person resumes; the model
completes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from dshd.api import text
from dshd.client import DshClient

PLAN_V1 = """# Plan: retries for the HTTP client

1. Add a `RetryPolicy` (attempts, backoff) to `http/client.py`.
2. Wrap `HttpClient.send` in the policy.
3. Retry on every exception.
4. Add tests for the policy.
"""

PLAN_V2 = """# Plan: retries for the HTTP client (revised)

1. Add a `RetryPolicy` (attempts, exponential backoff capped at 30 s) to `http/client.py`.
2. Wrap `HttpClient.send` in the policy.
3. Retry only on connection errors and 502/503/504, never on other 4xx/5xx.
4. Add tests for the policy, including the cap.
"""

def _used(input_tokens: int, output_tokens: int) -> dict:
    """A reply's token usage, as a real provider reports it (the scripted model passes it on)."""
    return {"inputTokens": input_tokens, "outputTokens": output_tokens}


SCRIPT_FIRST_RUN = {
    "replies": [
        # turn 1, under plan mode: a plan, sent back; a revised plan, approved; a reply.
        {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN_V1}}], "usage": _used(1840, 212)},
        {"toolCalls": [{"name": "exit_plan_mode", "arguments": {"plan": PLAN_V2}}], "usage": _used(2310, 236)},
        {"text": "Plan approved. I will start with the RetryPolicy.", "usage": _used(2620, 18)},
        # goal rounds 1-3: work, then a blocker (each round's tokens count toward the goal).
        {"text": "Round 1: added RetryPolicy with capped exponential backoff.", "usage": _used(3120, 410)},
        {"text": "Round 2: HttpClient.send now retries connection errors and 502/503/504.", "usage": _used(3650, 380)},
        {
            "toolCalls": [
                {
                    "name": "goal_block",
                    "arguments": {
                        "code": "dependency-conflict",
                        "message": "urllib3 2.x (needed for the retry adapter) conflicts with the pinned requests 2.25",
                    },
                }
            ],
            "usage": _used(4100, 95),
        },
        {"text": "Blocked: someone has to choose between bumping requests and dropping urllib3 2.x.", "usage": _used(4260, 30)},
        # after the person resumes: one round, then a slow one that the restart interrupts.
        {"text": "Round 4: bumped requests to 2.32; the retry tests pass.", "usage": _used(4480, 350)},
        {"text": "Round 5: (this reply never arrives: the daemon restarts first)", "delayMs": 60000},
    ]
}

SCRIPT_AFTER_RESTART = {
    "replies": [
        {"toolCalls": [{"name": "goal_complete", "arguments": {}}], "usage": _used(5010, 40)},
        {"text": "Done: retries with capped backoff are in, with tests.", "usage": _used(5090, 22)},
    ]
}

PLAN_SECTION = "Plan first. Do not change files yet: propose a plan with exit_plan_mode and wait for approval."


class Person:
    """Plays the editor user: reads plans, sends the first one back, approves the second."""

    def __init__(self, out) -> None:
        self.out = out
        self.reviews = 0

    def answer(self, params: dict) -> dict:
        answers = []
        for q in params.get("questions", []):
            self.reviews += 1
            self.out.section(f"plan review #{self.reviews} opens in the editor: {q.get('title', '')}")
            self.out.quote(q.get("plan", ""))
            if self.reviews == 1:
                line = 3 + 2  # "3. Retry on every exception." is line 5 of the plan
                text = q["plan"].splitlines()[line - 1]
                feedback = "Cap the backoff, and do not retry requests that can never succeed."
                comment = "Retrying a 400 or a 404 only hides bugs: retry connection errors and 502/503/504."
                self.out.person(f"Keep planning: \"{feedback}\"")
                self.out.person(f"  comment on line {line} ({text.strip()!r}): \"{comment}\"")
                answers.append({"id": q["id"], "choice": "revise", "feedback": feedback, "comments": [{"line": line, "text": comment}]})
            else:
                self.out.person("Approve")
                answers.append({"id": q["id"], "choice": "approve"})
        return {"answers": answers}


class Transcript:
    def __init__(self, stream=sys.stdout) -> None:
        self.stream = stream
        self._opened: set[str] = set()
        self._settled: set[str] = set()

    def _p(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)

    def section(self, title: str) -> None:
        self._p()
        self._p(f"── {title}")

    def person(self, text: str) -> None:
        self._p(f"  [you]    {text}")

    def quote(self, text: str) -> None:
        for n, line in enumerate(text.rstrip("\n").splitlines(), start=1):
            self._p(f"           {n:>2} │ {line}")

    def status(self, text: str) -> None:
        self._p(f"  [status] {text}")

    def chat_item(self, item: dict) -> None:
        """One dsh/chat/item upsert, printed the way the editors show the chat: an item when
        it appears, and its result or verdict when it settles (streaming is not printed)."""
        if item.get("partial"):
            return
        if item["id"] not in self._opened:
            self._opened.add(item["id"])
            for line in text.opening(item):
                self._p("  " + line)
        if text.settled(item) and item["id"] not in self._settled:
            self._settled.add(item["id"])
            for line in text.closing(item):
                self._p("  " + line)

    def seen(self, items: list[dict]) -> None:
        """Items already on screen (a reopened session's history): not printed again."""
        for item in items:
            self._opened.add(item["id"])
            if text.settled(item):
                self._settled.add(item["id"])


def status_text(goal: dict | None) -> str:
    """The status bar, in the editors' words: the daemon's own status text of the GoalView
    it sent (with the Neovim icon)."""
    return f"◎ {goal['status']['text'] if goal else 'no goal'}"


async def run_demo(workspace: Path, out: Transcript) -> None:
    dsh = workspace / ".dsh"
    dsh.mkdir(parents=True, exist_ok=True)
    (workspace / "demo-script.json").write_text(json.dumps(SCRIPT_FIRST_RUN, indent=1))
    (workspace / "demo-script-after-restart.json").write_text(json.dumps(SCRIPT_AFTER_RESTART, indent=1))
    (dsh / "config.toml").write_text(
        textwrap.dedent(
            f"""\
            plugins = ["plan", "goals"]

            [plan]
            section = "{PLAN_SECTION}"

            [model]
            provider = "scripted"
            script = "demo-script.json"
            """
        )
    )
    person = Person(out)
    out.section(f"dshd demo · workspace {workspace}")

    client = await start_client(workspace, person, out, config=None)
    created = await client.request("dsh/session/create", {"title": "HTTP retries"})
    agent = created["agentId"]
    session_id = created["sessionId"]
    out.status(f"session {session_id}, agent {agent}")
    await follow_chat(client, agent, out)

    out.section("plan mode, then a plan reviewed in the editor")
    out.person("/plan")
    await client.request("dsh/agent/prompt", {"agentId": agent, "text": "/plan"})
    plan = await client.request("dsh/plan/get", {"agentId": agent})
    out.status(f"plan mode {'on' if plan['active'] else 'off'}")
    result = await client.request(
        "dsh/agent/prompt", {"agentId": agent, "text": "Add retries with backoff to our HTTP client."}, timeout=120
    )
    plan = await client.request("dsh/plan/get", {"agentId": agent})
    out.status(f"turn {result['turn']} done ({result['stopReason']}); plan mode {'on' if plan['active'] else 'off'}")

    out.section("a goal with a 40-round budget and a 100k-token budget")
    out.person("goal: \"Ship retries for the HTTP client\" (40 rounds, 100k tokens)")
    blocked = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"].get("op") == "block", timeout=120
    )
    goal = await client.request(
        "dsh/goal/create",
        {"agentId": agent, "objective": "Ship retries for the HTTP client", "maxRounds": 40, "maxTokens": 100000},
    )
    note = await blocked
    goal = note["params"]["goal"]
    out.status(f"blocked: {goal['blockedReason']['message']}")
    await wait_idle(client, agent)

    out.section("the person fixes the pin and resumes")
    out.person("resume the goal")
    round5 = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed"
        and n["params"].get("op") == "round"
        and n["params"]["goal"]["roundsStarted"] == 5,
        timeout=120,
    )
    goal = await client.request(
        "dsh/goal/resume", {"agentId": agent, "ref": {"id": goal["id"], "revision": goal["revision"]}}
    )
    await round5

    out.section("the editor restarts the daemon while round 5 is running")
    code = await client.stop()
    out.status(f"daemon exited with code {code}")
    client = await start_client(
        workspace, person, out, config={"model": {"provider": "scripted", "script": "demo-script-after-restart.json"}}
    )
    opened = await client.request("dsh/session/open", {"sessionId": session_id})
    agent = opened["agentId"]
    goal = opened["goal"]
    await follow_chat(client, agent, out)
    out.status(f"reopened as agent {agent}: {status_text(goal)}")
    tail = (await client.request("dsh/session/events", {"agentId": agent}))["events"][-1]
    if tail["type"] == "turn/close":
        out.status(f"the log's open turn {tail['data']['turn']} was closed on load: {tail['data']['stopReason']}")
    last_seq = (await client.request("dsh/session/events", {"agentId": agent}))["nextSeq"]
    await asyncio.sleep(0.5)
    later = await client.request("dsh/session/events", {"agentId": agent, "afterSeq": last_seq})
    out.status(f"nothing runs by itself: {len(later['events'])} events in the half second after opening")

    out.section("the person resumes; the model completes the goal")
    completed = client.wait_for(
        lambda n: n["method"] == "dsh/goal/changed" and n["params"].get("op") == "complete", timeout=120
    )
    out.person("resume the goal")
    goal = await client.request(
        "dsh/goal/resume", {"agentId": agent, "ref": {"id": goal["id"], "revision": goal["revision"]}}
    )
    await completed
    await wait_idle(client, agent)
    code = await client.stop()
    out.section(f"done: daemon exited with code {code}")
    out.status(f"session log: {dsh / 'sessions' / session_id / 'log.jsonl'}")


async def wait_idle(client: DshClient, agent: str, timeout: float = 30) -> None:
    """Until the agent's last turn has closed (read from the log, not guessed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        events = (await client.request("dsh/session/events", {"agentId": agent}))["events"]
        opens = sum(1 for e in events if e["type"] == "turn/open")
        closes = sum(1 for e in events if e["type"] == "turn/close")
        if opens == closes:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the agent did not go idle")


async def follow_chat(client: DshClient, agent: str, out: Transcript) -> None:
    """Ask for the agent's chat (which subscribes to its dsh/chat/item upserts)."""
    out.seen((await client.request("dsh/chat/get", {"agentId": agent}))["items"])


async def start_client(workspace: Path, person: Person, out: Transcript, config: dict | None) -> DshClient:
    client = DshClient(answer_questions=person.answer)
    await client.start(workspace, config=config)

    def show(note: dict) -> None:
        if note["method"] == "dsh/chat/item":
            out.chat_item(note["params"]["item"])
        elif note["method"] == "dsh/goal/changed":
            # The status bar, as in the editors, follows dsh/goal/changed alone.
            params = note["params"]
            out.status(f"{status_text(params.get('goal')):<40} ← goal/changed {params['op']}, revision {params['revision']}")

    client.listeners.append(show)
    return client


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dshd demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", type=Path, help="run in this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    out = Transcript()
    if args.workspace:
        args.workspace.mkdir(parents=True, exist_ok=True)
        asyncio.run(run_demo(args.workspace.resolve(), out))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="dshd-demo-"))
    try:
        asyncio.run(run_demo(tmp, out))
        out.status("(the temporary workspace is removed now; `dshd demo --workspace DIR` keeps it)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0
