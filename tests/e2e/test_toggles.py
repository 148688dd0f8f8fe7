"""Plan-mode toggles over the wire (PM-8..PM-14, PM-22): ``dsh/plan/set`` and the
``/plan`` command while a slow turn runs and while idle, read back from the results,
``dsh/plan/changed`` notifications and the session log on disk.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.e2e.conftest import write_workspace
from tests.e2e.support import of_type, read_log

SLOW_MS = 800


def plan_notes(client, agent: str) -> list[tuple[bool, bool | None]]:
    return [
        (n["params"]["active"], n["params"].get("pending"))
        for n in client.notifications
        if n["method"] == "dsh/plan/changed" and n["params"]["agentId"] == agent
    ]


def slow_tool_step(delay_ms: int = SLOW_MS) -> dict:
    """A slow reply that calls a tool, so the turn takes a second step after it.
    (goal_complete with no goal fails harmlessly.)"""
    return {"toolCalls": [{"name": "goal_complete", "arguments": {}}], "delayMs": delay_ms}


async def start_slow_turn(client, agent: str, text: str) -> asyncio.Future:
    """Prompt in the background; return once the turn's first model call is in flight."""
    header = client.wait_for(
        lambda n: n["method"] == "dsh/session/event"
        and n["params"]["agentId"] == agent
        and n["params"]["event"]["type"] == "request/header",
        timeout=5,
    )
    prompt = asyncio.ensure_future(client.request("dsh/agent/prompt", {"agentId": agent, "text": text}))
    await header
    return prompt


async def plan_set(client, agent: str, active: bool) -> dict:
    return await client.request("dsh/plan/set", {"agentId": agent, "active": active})


def assert_mode_before_header(events: list[dict], mode_event: dict, *, planning: bool) -> dict:
    """The plan/mode event is followed, in its turn, by a request/header that it built."""
    later = [e for e in events if e["seq"] > mode_event["seq"] and e["type"] == "request/header"]
    assert later, "no request/header after the plan/mode"
    header = later[0]
    assert header.get("turn") == mode_event.get("turn") or mode_event.get("turn") is None
    assert header["data"]["planActive"] is planning
    assert ("plan:policy" in header["data"]["sections"]) is planning
    return header


async def test_plan_set_during_a_slow_turn_queues_cancels_noops(workspace, daemons):
    write_workspace(workspace, replies=[slow_tool_step(), {"text": "done"}])
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]

    prompt = await start_slow_turn(client, agent, "Add retries.")
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await plan_set(client, agent, True) == {"outcome": "queued", "state": {"active": False, "pending": True}}
    assert await plan_set(client, agent, True) == {"outcome": "noop", "state": {"active": False, "pending": True}}
    assert await plan_set(client, agent, False) == {"outcome": "cancelled", "state": {"active": False}}
    assert await plan_set(client, agent, False) == {"outcome": "noop", "state": {"active": False}}
    assert await plan_set(client, agent, True) == {"outcome": "queued", "state": {"active": False, "pending": True}}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": False, "pending": True}
    assert loop.time() - started < SLOW_MS / 1000, "the toggles waited for the model call"
    # A choice never starts a step by itself: nothing was appended while the model ran.
    assert not of_type(read_log(workspace, session_id), "plan/mode")

    assert await prompt == {"turn": 1, "stopReason": "end-turn"}
    events = read_log(workspace, session_id)
    [mode] = of_type(events, "plan/mode")
    assert mode["data"] == {"active": True} and mode["turn"] == 1
    # PM-10: appended at the next accepted step, after step 1's tool results and
    # before the request/header it affects.
    [tool_result] = of_type(events, "tool/result")
    assert tool_result["seq"] < mode["seq"]
    header = assert_mode_before_header(events, mode, planning=True)
    assert header["data"]["step"] == 2
    # PM-14: the model's last request said "off", so it is told, between the two.
    narration = [e for e in of_type(events, "user/message") if e["data"]["source"] == "plugin"]
    assert len(narration) == 1 and narration[0]["data"]["plugin"] == "plan"
    assert mode["seq"] < narration[0]["seq"] < header["seq"]
    assert [h["data"]["planActive"] for h in of_type(events, "request/header")] == [False, True]

    # Idle: the choice is appended at once (no turn field), then "noop" repeats it.
    assert await plan_set(client, agent, False) == {"outcome": "committed", "state": {"active": False}}
    assert await plan_set(client, agent, False) == {"outcome": "noop", "state": {"active": False}}
    events = read_log(workspace, session_id)
    last_mode = of_type(events, "plan/mode")[-1]
    assert last_mode["data"] == {"active": False} and "turn" not in last_mode
    # The last request planned, so the model is told plan mode went off (outside a turn).
    assert events[-1]["seq"] == last_mode["seq"] + 1
    assert events[-1]["type"] == "user/message" and events[-1]["data"]["plugin"] == "plan"
    assert "turn" not in events[-1]

    assert plan_notes(client, agent) == [
        (False, True),  # queued
        (False, None),  # cancelled
        (False, True),  # queued again
        (True, None),  # appended at step 2
        (False, None),  # committed while idle
    ]


async def test_a_choice_at_prompt_time_is_appended_by_the_next_turns_first_step(workspace, daemons):
    # Turn 1 has a single step, so a choice made during it waits for turn 2 (PM-11).
    write_workspace(workspace, replies=[{"text": "one step", "delayMs": SLOW_MS}, {"text": "planned"}])
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]

    prompt = await start_slow_turn(client, agent, "first")
    assert (await plan_set(client, agent, True))["outcome"] == "queued"
    assert await prompt == {"turn": 1, "stopReason": "end-turn"}
    # The turn ended without another step: still pending, nothing appended.
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": False, "pending": True}
    assert not of_type(read_log(workspace, session_id), "plan/mode")
    await asyncio.sleep(0.2)
    assert not of_type(read_log(workspace, session_id), "turn/open")[1:], "a choice started a turn"

    assert await client.request("dsh/agent/prompt", {"agentId": agent, "text": "second"}) == {
        "turn": 2,
        "stopReason": "end-turn",
    }
    events = read_log(workspace, session_id)
    [mode] = of_type(events, "plan/mode")
    assert mode["turn"] == 2 and mode["data"] == {"active": True}
    turn2_open = [e for e in of_type(events, "turn/open") if e["data"]["turn"] == 2][0]
    assert turn2_open["seq"] < mode["seq"]
    header = assert_mode_before_header(events, mode, planning=True)
    assert header["data"]["step"] == 1
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}


async def test_plan_commands_through_prompt(workspace, daemons):
    write_workspace(
        workspace,
        replies=[
            {"text": "A plan for the retry policy follows."},  # turn 1 (/plan <message>)
            slow_tool_step(),  # turn 2 step 1
            {"text": "tests next"},  # turn 2 step 2
        ],
    )
    client = await daemons.start()
    created = await client.request("dsh/session/create", {})
    agent, session_id = created["agentId"], created["sessionId"]

    async def command(text: str) -> dict:
        return await client.request("dsh/agent/prompt", {"agentId": agent, "text": text})

    # Idle: /plan on, /plan again changes nothing, /plan off.
    assert await command("/plan") == {"turn": None, "stopReason": "command"}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    assert await command("/plan") == {"turn": None, "stopReason": "command"}
    assert await command("/plan off") == {"turn": None, "stopReason": "command"}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": False}
    assert [m["data"]["active"] for m in of_type(read_log(workspace, session_id), "plan/mode")] == [True, False]

    # /plan <message>: plan mode on, then the message is the next step's user message.
    assert await command("/plan Sketch the retry policy") == {"turn": 1, "stopReason": "end-turn"}
    events = read_log(workspace, session_id)
    mode = of_type(events, "plan/mode")[-1]
    assert mode["data"] == {"active": True}
    [turn_open] = of_type(events, "turn/open")
    assert mode["seq"] < turn_open["seq"]
    assert turn_open["data"]["cause"] == "steer"
    [message] = of_type(events, "user/message")
    assert message["data"] == {"text": "Sketch the retry policy", "source": "user", "client": "client 1"}
    [header] = of_type(events, "request/header")
    assert header["data"]["planActive"] is True and "plan:policy" in header["data"]["sections"]
    assert message["seq"] < header["seq"]

    # During a running turn: /plan off queues, /plan drops that pending exit,
    # /plan off queues again, then /plan <message> drops it and steers the message in.
    prompt = await start_slow_turn(client, agent, "Implement it.")
    assert await command("/plan off") == {"turn": None, "stopReason": "command"}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True, "pending": False}
    assert await command("/plan") == {"turn": None, "stopReason": "command"}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    assert await command("/plan off") == {"turn": None, "stopReason": "command"}
    assert await command("/plan Write the tests first") == {"turn": None, "stopReason": "command"}
    assert await client.request("dsh/plan/get", {"agentId": agent}) == {"active": True}
    assert await prompt == {"turn": 2, "stopReason": "end-turn"}

    events = read_log(workspace, session_id)
    turn2 = [e for e in events if e.get("turn") == 2]
    # Nothing toggled in the log: every pending choice was dropped before a step took it.
    assert not of_type(turn2, "plan/mode")
    steered = [e for e in of_type(turn2, "user/message") if e["data"]["text"] == "Write the tests first"]
    assert len(steered) == 1 and steered[0]["data"]["source"] == "user"
    header2 = [h for h in of_type(turn2, "request/header") if h["data"]["step"] == 2][0]
    assert steered[0]["seq"] < header2["seq"]
    assert header2["data"]["planActive"] is True
