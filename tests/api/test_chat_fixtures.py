"""The chat projection (dshd.api.chat) against the shared fixtures in tests/fixtures/chat,
the same files the Neovim and VS Code suites render; and its promises: stable ids, no
crash on any event, items that are valid wire values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dshd.api import chat, words
from dshd.api.chat import ChatProjection, project
from dshd.daemon.to_wire import chat_item as to_json, delta_from_wire as delta_from_json
from dshd_protocol import from_wire
from dshd_protocol import types as T
from dshd_protocol.schema import load_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
SCHEMA = load_schema()
ITEM_SCHEMA = Draft202012Validator({"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": "#/$defs/ChatItem"})
LIVE_ONLY = ("retry",)


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def events_of(doc: dict) -> list[dict]:
    return [s["event"] for s in doc["steps"] if "event" in s]


def test_there_are_fixtures():
    assert {"conversation", "plan-review", "goals", "permissions", "failures", "compaction", "odd-logs"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_projection_gives_the_fixture_upserts_and_items(name):
    doc = load(name)
    projection = ChatProjection()
    for number, step in enumerate(doc["steps"], start=1):
        if "event" in step:
            changed = projection.apply_event(step["event"])
        else:
            changed = projection.apply_delta(delta_from_json(step["delta"]))
        assert [to_json(i) for i in changed] == step["upserts"], f"{name}: step {number}"
    assert [to_json(i) for i in projection.items()] == doc["items"]


@pytest.mark.parametrize("name", NAMES)
def test_a_client_that_upserts_by_id_ends_with_the_items(name):
    """The client contract: replace an item with the same id in place, append a new id."""
    doc = load(name)
    order: list[str] = []
    shown: dict[str, dict] = {}
    for step in doc["steps"]:
        for item in step["upserts"]:
            if item["id"] not in shown:
                order.append(item["id"])
            shown[item["id"]] = item
    assert [shown[i] for i in order] == doc["items"]


@pytest.mark.parametrize("name", NAMES)
def test_items_are_valid_wire_values(name):
    doc = load(name)
    every = doc["items"] + [u for s in doc["steps"] for u in s["upserts"]]
    for item in every:
        from_wire(T.ChatItem, item, root="item")
        ITEM_SCHEMA.validate(item)
    ids = [i["id"] for i in doc["items"]]
    assert len(ids) == len(set(ids)), name


@pytest.mark.parametrize("name", NAMES)
def test_the_log_alone_gives_the_same_ids(name):
    """A reload (the events, no deltas) gives the same items under the same ids; only what
    never reached the log is missing: retry notices and discarded streaming."""
    doc = load(name)
    durable = [i for i in doc["items"] if i["kind"] not in LIVE_ONLY and not i.get("discarded") and not i.get("partial")]
    assert [to_json(i) for i in project(events_of(doc))] == durable


def test_every_kind_is_in_some_fixture():
    kinds = {i["kind"] for name in NAMES for i in load(name)["items"]}
    assert kinds == set(chat.KINDS)
    streamed = {(i["kind"], i["partial"]) for name in NAMES for s in load(name)["steps"] for i in s["upserts"] if "partial" in i}
    assert {("assistant-message", True), ("tool-call", True), ("plan-review", True)} <= streamed


def test_paging_walks_the_whole_list():
    doc = load("failures")
    projection = ChatProjection()
    for step in doc["steps"]:
        if "event" in step:
            projection.apply_event(step["event"])
        else:
            projection.apply_delta(delta_from_json(step["delta"]))
    for limit in (1, 2, 3, 5, 100):
        seen: dict[str, dict] = {}
        after = 0
        while True:
            page, next_seq = projection.page(after, limit)
            for item in page:
                seen[item.id] = to_json(item)
            durable = [i for i in page if getattr(i, "seq", None) is not None]
            if len(durable) < limit:
                break
            assert next_seq > after
            after = next_seq
        assert list(seen.values()) == [to_json(i) for i in projection.items()], limit
    items, next_seq = projection.page(0)
    assert [to_json(i) for i in items] == doc["items"] and next_seq == events_of(doc)[-1]["seq"]
    assert projection.page(next_seq) == ([], next_seq)


# ---- the words a person reads (checked here, not only copied from the projection) ------------


def _items(name: str) -> dict[str, dict]:
    return {i["id"]: i for i in load(name)["items"]}


def test_words_of_the_conversation():
    items = _items("conversation")
    assert items["user-3"]["label"] == "You"
    assert items["assistant-1.1"]["text"] == "Let me look at the client." and items["assistant-1.1"]["usage"]["outputTokens"] == 40
    assert items["tool-1.1.call-1"]["title"] == "Read http/client.py" and items["tool-1.1.call-1"]["status"] == "ok"
    assert items["turn-end-1"]["text"] == "Turn 1 finished"
    streamed = [u for s in load("conversation")["steps"] for u in s["upserts"] if u["id"] == "assistant-1.1"]
    assert [u["text"] for u in streamed] == ["Let me ", "Let me look at ", "Let me look at the client.", "Let me look at the client."]
    assert [u["partial"] for u in streamed] == [True, True, True, False]


def test_words_of_plan_reviews():
    items = _items("plan-review")
    sent_back, approved, invalid, open_ = (items[i] for i in ("tool-1.1.call-p1", "tool-1.2.call-p2", "tool-2.1.call-p3", "tool-2.2.call-p4"))
    assert sent_back["outcome"] == "sent-back" and sent_back["outcomeText"] == "sent back with feedback"
    assert sent_back["feedback"].startswith("Feedback: Cap the backoff.") and "Line 5: 3. Retry on every exception." in sent_back["feedback"]
    assert approved["outcome"] == "approved" and approved["previousId"] == sent_back["id"]
    assert invalid["outcome"] == "not-reviewed" and "# heading" in invalid["detail"]
    assert open_["outcome"] == "pending" and open_["outcomeText"] == "waiting for your review"
    assert open_["questionId"] == "plan-review-call-p4" and open_["previousId"] == approved["id"]  # the last plan a person saw
    assert items["user-18"]["label"] == "Plan mode"


def test_words_of_goals_say_rounds_used_and_no_revision():
    items = [i for i in load("goals")["items"] if i["kind"] == "goal"]
    texts = [i["text"] for i in items]
    assert texts == [
        'Goal set: "Ship retries for the HTTP client" (budget 40 rounds, 200k tokens)',
        "Goal paused (2/40 rounds used, 12.4k tokens)",
        "Goal resumed (2/40 rounds used, 12.4k tokens)",
        "Goal blocked: urllib3 2.x conflicts with the pinned requests 2.25 (dependency-conflict)",
        'Goal edited: "Ship retries, with requests 2.32" (budget 60 rounds, 200k tokens)',
        "Goal complete (3/60 rounds used, 19k tokens)",
        "Goal cleared",
    ]
    assert all("rev" not in t.lower() for t in texts)
    assert [i["revision"] for i in items] == [1, 2, 3, 4, 5, 6, 6]  # kept for detail views
    labels = [i["label"] for i in load("goals")["items"] if i["kind"] == "user-message"]
    assert labels == ["Goal round 1 of 40", "Goal round 2 of 40", "Goal round 3 of 40"]


def test_words_of_permissions_failures_and_compaction():
    perms = [i["text"] for i in load("permissions")["items"] if i["kind"] == "permission"]
    assert perms == [
        "You allowed run_command once",
        "You rejected write_file: Edit the import, do not rewrite the file.",
        "You allowed edit_file for this session",
        "run_command not run: no one could answer",
    ]  # the policy's and an earlier allow-session's decisions show no item of their own
    failures = _items("failures")
    assert failures["retry-1.1.2"]["text"] == "Model call failed; trying again (attempt 2) in 1.5 s"
    assert failures["turn-end-1"]["error"]["kind"] == "rate-limit"
    assert failures["turn-end-1"]["text"].startswith("Turn 1 stopped: model error (rate limited): The server said 429")
    assert failures["assistant-2.1"]["discarded"] is True and failures["assistant-2.1"]["partial"] is False
    assert failures["turn-end-3"]["text"] == "Turn 3 interrupted: the daemon stopped while it ran"
    assert _items("compaction")["compaction-10"]["text"] == "Context compacted: 182k -> 14k tokens"


def test_words_of_mcp_server_failures():
    notices = [i for i in load("mcp-servers")["items"] if i["kind"] == "notice"]
    assert [(n["server"], n["seq"], "about" in n) for n in notices] == [("time", 2, False), ("docs", 7, False)]
    assert notices[0]["text"] == (
        'MCP server "time" failed: could not start: exited with status 1. '
        "Its tools are gone for this session; open the session again to restart it."
    )
    assert "\x1b" not in notices[1]["text"] and "\\u001b[2J" in notices[1]["text"]  # the server's words, escaped


def test_tokens_and_seconds_round_halves_up_without_floats():
    cases = {0: "0", 999: "999", 1000: "1k", 1049: "1k", 1050: "1.1k", 12400: "12.4k", 18950: "19k", 99950: "100k",
             182000: "182k", 999499: "999k", 999500: "1M", 1250000: "1.3M"}  # fmt: skip
    assert {n: words.tokens(n) for n in cases} == cases
    assert [words.seconds(ms) for ms in (999, 1000, 1500, 1549, 30000)] == ["999 ms", "1 s", "1.5 s", "1.5 s", "30 s"]


# ---- never a crash ------------------------------------------------------------------------------

KNOWN = ["session/start", "turn/open", "turn/close", "user/message", "request/header", "assistant/message",
         "tool/call", "tool/result", "plan/mode", "goal/change", "permission/decision", "context/compact", "mcp/server", "future/x"]  # fmt: skip
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["text", "callId", "turn", "step", "goal", "op", "ok", "name", "plan", "arguments", "state", "reason"]), inner, max_size=4),
    max_leaves=10,
)  # fmt: skip
_event = st.fixed_dictionaries(
    {"seq": st.integers(0, 50), "type": st.sampled_from(KNOWN), "at": st.just("2026-11-29T18:30:00Z"), "data": _json},
    optional={"turn": st.integers(1, 3) | st.none() | st.text(max_size=2)},
)
_delta = st.builds(
    lambda turn, step, kind, text, call_id, name: delta_from_json(
        {"turn": turn, "step": step, "kind": kind, "text": text, "callId": call_id, "name": name}
    ),
    st.integers(1, 3), st.integers(1, 3), st.sampled_from(["text", "tool-arguments", "retry", "future"]),
    st.none() | st.text(max_size=6), st.none() | st.sampled_from(["c1", "c2"]), st.none() | st.sampled_from(["exit_plan_mode", "read_file"]),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_event, _delta), max_size=25))
def test_any_events_and_deltas_project_without_an_exception(inputs):
    projection = ChatProjection()
    for value in inputs:
        if isinstance(value, dict):
            projection.apply_event(value)
        else:
            projection.apply_delta(value)
    items = projection.items()
    assert len({i.id for i in items}) == len(items)
    for item in items:
        to_json(item)


def test_partial_json_string_reads_what_arrived():
    read = chat.partial_json_string
    assert read('{"plan": "# Pl', "plan") == "# Pl"
    assert read('{"plan": "a\\nb', "plan") == "a\nb"
    assert read('{"plan": "a\\', "plan") == "a"  # an escape cut in half waits
    assert read('{"plan": "caf\\u00e', "plan") == "caf"
    assert read('{"plan": "x", "other": 1}', "plan") == "x"
    assert read('{"pla', "plan") is None and read('{"plan": 3}', "plan") is None


@pytest.mark.parametrize("name", NAMES)
def test_fixture_events_are_a_sound_log(name, tmp_path):
    """The fixtures' events are what the daemon writes: they replay strictly. A fixture that
    shows the projection an event type this daemon does not know (a newer daemon's) is a log
    strict replay refuses, at that event's line."""
    from dshd.folds import replay
    from dshd.folds.events import EVENT_CLASSES
    from dshd.folds.replay import ReplayError

    events = events_of(load(name))
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    unknown = [line for line, e in enumerate(events, start=1) if e["type"] not in EVENT_CLASSES]
    if not unknown:
        assert replay(path, use_checkpoint=False).events == len(events)
        return
    with pytest.raises(ReplayError) as refused:
        replay(path, use_checkpoint=False)
    assert refused.value.line == unknown[0]
    assert events[unknown[0] - 1]["type"] in refused.value.reason
