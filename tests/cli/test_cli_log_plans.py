"""`dshd log verify` and `log show` on a log with a `/plan forget` (P-22): sound, and said
in words."""

from __future__ import annotations

from dshd.services.store import SessionStore

from .test_cli_log import run


def test_log_show_says_which_plan_was_forgotten(tmp_path):
    with SessionStore.create(tmp_path, "plans") as store:
        store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
        store.commit("tool/call", {"callId": "c-1", "name": "exit_plan_mode", "arguments": {"plan": "# Plan: A\n"}}, turn=1)
        review = {"outcome": "approved"}
        store.commit("tool/result", {"callId": "c-1", "ok": True, "content": "{}", "review": review}, turn=1)
        store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
        store.commit("plan/forget", {"callId": "c-1"}, writer="plan")
    path = tmp_path / "plans" / "log.jsonl"
    assert run("log", "verify", str(path)).returncode == 0
    shown = run("log", "show", str(path))
    assert shown.returncode == 0
    assert "plan/forget       approved plan of call c-1 forgotten (/plan forget)" in shown.stdout
