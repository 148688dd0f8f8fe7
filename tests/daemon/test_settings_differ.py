"""The words a later client of the shared daemon reads when its settings differ (pure)."""

from __future__ import annotations

from dshd.daemon.settings_differ import NOTICE_START, differing_keys, notice


def test_equal_settings_say_nothing_and_the_daemons_own_tables_never_count() -> None:
    live = {"model": {"provider": "scripted"}, "plugins": ["plan"], "daemon": {"idleTimeoutS": 60.0}}
    mine = {**live, "daemon": {"idleTimeoutS": 5.0}, "trust": {"folders": ["/x"]}}
    assert differing_keys(mine, live) == []
    assert notice([]) is None


def test_the_keys_that_differ_are_named_with_both_values() -> None:
    live = {"model": {"provider": "scripted", "model": "x"}, "plugins": ["plan"], "tools": {"sandbox": "workspace-write"}}
    mine = {"model": {"provider": "openai", "model": "y"}, "plugins": ["plan", "goals"], "tools": {"sandbox": "workspace-write"}}
    differ = differing_keys(mine, live)
    assert [key for key, _, _ in differ] == ["model.model", "model.provider", "plugins"]
    text = notice(differ)
    assert text.startswith(NOTICE_START + ": model.model (yours: y; in force: x); model.provider (yours: openai; in force: scripted); plugins (yours: [plan, goals]; in force: [plan])")
    assert "dshd serve" in text and "dshd daemon restart" in text and ":Dsh restart" in text
    assert notice([], trust_differs=True).startswith(NOTICE_START + ": workspace trust.")


def test_a_value_is_escaped_and_cut_and_many_keys_are_counted() -> None:
    hostile = "evil\u202e\x1b[2J" + "z" * 100
    [(key, mine, live)] = differing_keys({"model": {"model": hostile}}, {"model": {"model": "x"}})
    text = notice([(key, mine, live)])
    assert "\u202e" not in text and "\x1b" not in text and "z" * 50 not in text
    many = [(f"k{i}", i, None) for i in range(12)]
    assert "and 4 more" in notice(many) and "k8" not in notice(many)
