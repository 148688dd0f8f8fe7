"""The approved plan survives compaction (P-22), against the real ``dshd serve`` and a
real provider (the official OpenAI SDK talking to a loopback server that keeps every
request it gets).

The plan must be in what the model is sent exactly once on every request: as the
``exit_plan_mode`` call's argument while that call is in the transcript, as prompt section
``plan:approved`` once a compaction has summarized it away; ``/plan forget`` drops it
(durably: a daemon started afresh agrees), and a newer approved plan replaces it.
"""

from __future__ import annotations

import json
import secrets

from pygls.exceptions import JsonRpcException

from loopback_models import Call, LoopbackModelServer, Reply

from .conftest import PLAN_SECTION
from .support import of_type, read_log

KEY_ENV = "DSHD_E2E_PLAN_KEY"

PLAN_1 = "# Plan: retries for the HTTP client\n\n1. Add RetryPolicy(attempts=4).\n2. Retry on 502/503/504 only.\n"
PLAN_2 = "# Plan: a circuit breaker instead\n\n1. Add CircuitBreaker(threshold=5).\n2. Open it after 5 failures.\n"
SUMMARY = "Summary: the person and the agent worked on the HTTP client."
COMPACTING = "You are compacting the context"


def times_in(value, needle: str) -> int:
    """How often ``needle`` is in a request body's strings, tool-call arguments (JSON in a
    string) read as what they hold."""
    if isinstance(value, dict):
        return sum(times_in(v, needle) for v in value.values())
    if isinstance(value, list):
        return sum(times_in(v, needle) for v in value)
    if isinstance(value, str):
        if value.startswith("{"):
            try:
                return times_in(json.loads(value), needle)
            except ValueError:
                pass
        return value.count(needle)
    return 0


def work_requests(server) -> list[dict]:
    """The bodies of the requests that were not summary requests, in order."""
    return [r.json for r in server.requests if COMPACTING not in json.dumps(r.json)]


async def start(daemons, server, approve):
    (daemons.root / ".dsh" / "config.toml").write_text(f'plugins = ["plan"]\n\n[plan]\nsection = "{PLAN_SECTION}"\n')
    config = {
        "model": {
            "provider": "openai", "model": "loopback-model", "baseUrl": server.base_url,
            "apiKeyEnv": KEY_ENV, "timeoutS": 20, "maxRetries": 0,
        }
    }  # fmt: skip
    return await daemons.start(config=config, answer=approve, env={KEY_ENV: "sk-" + secrets.token_hex(16)})


def approve(params):
    return {"answers": [{"id": params["questions"][0]["id"], "choice": "approve"}]}


async def prompt(client, agent: str, text: str) -> dict:
    return await client.request("dsh/agent/prompt", {"agentId": agent, "text": text})


def sections(events: list[dict]) -> list[list[str]]:
    return [h["data"]["sections"] for h in of_type(events, "request/header")]


async def test_the_approved_plan_is_sent_exactly_once_before_and_after_compaction(daemons):
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(tool_calls=[Call("exit_plan_mode", {"plan": PLAN_1})]),  # turn 1: the plan, approved
            Reply(text="Starting with RetryPolicy."),
            Reply(text="RetryPolicy added."),  # turn 2: before any compaction
            Reply(text=SUMMARY),  # /compact
            Reply(text="Retrying on 502 now."),  # turn 4: after the compaction
            Reply(text="Tests pass."),  # turn 5, in a daemon started afresh
            Reply(text="Forgotten."),  # turn 7, after /plan forget
            Reply(tool_calls=[Call("exit_plan_mode", {"plan": PLAN_2})]),  # turn 9: a newer plan
            Reply(text="Breaker first."),
            Reply(text=SUMMARY),  # /compact again
            Reply(text="Breaker added."),  # turn 11
        )
        client = await start(daemons, server, approve)
        created = await client.request("dsh/session/create", {})
        sid, agent = created["sessionId"], created["agentId"]
        assert (await prompt(client, agent, "/plan"))["stopReason"] == "command"
        assert (await prompt(client, agent, "Add retries."))["stopReason"] == "end-turn"
        assert (await prompt(client, agent, "Go on."))["stopReason"] == "end-turn"
        # Not before: the plan is in the transcript, as the call's argument, once.
        bodies = work_requests(server)
        assert [times_in(b, PLAN_1) for b in bodies] == [0, 1, 1]
        assert not any("plan:approved" in s for s in sections(read_log(daemons.root, sid)))

        assert (await prompt(client, agent, "/compact"))["stopReason"] == "compacted"
        assert (await prompt(client, agent, "Next step."))["stopReason"] == "end-turn"
        after = work_requests(server)[-1]
        assert times_in(after, PLAN_1) == 1  # now from the section, not the summarized call
        system = after["messages"][0]
        assert system["role"] == "system" and PLAN_1 in system["content"]
        assert not any("exit_plan_mode" in json.dumps(m) for m in after["messages"][1:])
        events = read_log(daemons.root, sid)
        assert sections(events)[-1].count("plan:approved") == 1

        # Durable: a daemon started afresh on the log renders it the same.
        await daemons.stop_all()
        client = await start(daemons, server, approve)
        agent = (await client.request("dsh/session/open", {"sessionId": sid}))["agentId"]
        assert (await prompt(client, agent, "And the tests."))["stopReason"] == "end-turn"
        assert times_in(work_requests(server)[-1], PLAN_1) == 1

        # /plan forget drops it, durably, and a second one says there is nothing to forget.
        assert (await prompt(client, agent, "/plan forget"))["stopReason"] == "command"
        try:
            await prompt(client, agent, "/plan forget")
        except JsonRpcException as exc:
            assert exc.code == -32602 and "no approved plan to forget" in str(exc)
        else:
            raise AssertionError("a second /plan forget was accepted")
        await daemons.stop_all()
        client = await start(daemons, server, approve)
        agent = (await client.request("dsh/session/open", {"sessionId": sid}))["agentId"]
        assert (await prompt(client, agent, "Anything else?"))["stopReason"] == "end-turn"
        assert times_in(work_requests(server)[-1], PLAN_1) == 0
        events = read_log(daemons.root, sid)
        forgets = of_type(events, "plan/forget")
        [approved_call] = [c for c in of_type(events, "tool/call") if c["data"]["name"] == "exit_plan_mode"]
        assert [f["data"] for f in forgets] == [{"callId": approved_call["data"]["callId"]}]
        assert "plan:approved" not in sections(events)[-1]

        # A newer approved plan replaces it: once compacted, only the new one is sent.
        assert (await prompt(client, agent, "/plan"))["stopReason"] == "command"
        assert (await prompt(client, agent, "Try a breaker instead."))["stopReason"] == "end-turn"
        assert (await prompt(client, agent, "/compact"))["stopReason"] == "compacted"
        assert (await prompt(client, agent, "Build it."))["stopReason"] == "end-turn"
        last = work_requests(server)[-1]
        assert (times_in(last, PLAN_2), times_in(last, PLAN_1)) == (1, 0)
        assert sections(read_log(daemons.root, sid))[-1].count("plan:approved") == 1
        history = await client.request("dsh/plan/history", {"agentId": agent})
        assert [p["outcome"] for p in history["plans"]] == ["approved", "approved"]
