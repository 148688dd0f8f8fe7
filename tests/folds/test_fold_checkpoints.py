"""checkpoint/taken and checkpoint/restored: the fold's rules and their exact reasons
(docs/log-format.md), strict replay of both (a wrong line named with its reason), and the
store's single writer "checkpoints" (SPEC K-1, K-2)."""

from __future__ import annotations

import json

import msgspec
import pytest

from dshd.errors import DshError
from dshd.folds import replay
from dshd.folds.events import decode_line
from dshd.services.store import SessionStore
from folds.test_fold_session import AT, Builder

TREE = "4b825dc642cb6eb9a060e54bf8d69288fbe4904a"


def taken(step=1, tree=TREE, files=3, phase="before"):
    return {"step": step, "tree": tree, "files": files, "phase": phase}


def in_step(step=1) -> Builder:
    b = Builder().open()
    for n in range(1, step + 1):
        b.header(n, turn=1)
    return b.add("tool/call", {"callId": "c1", "name": "run_command", "arguments": {}}, turn=1)


def after_turn() -> Builder:
    b = in_step().add("checkpoint/taken", taken(), turn=1)
    b.add("tool/result", {"callId": "c1", "ok": True, "content": ""}, turn=1)
    b.add("checkpoint/taken", taken(phase="after"), turn=1)
    return b.add("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)


def test_checkpoints_of_a_step_and_a_restore_between_turns_are_accepted():
    b = after_turn()
    assert b.state.seq == 8
    before = b.state
    b.add("checkpoint/restored", {"checkpoint": 5, "files": ["a.txt", "src/b.py"], "forced": ["a.txt"]})
    b.add("checkpoint/restored", {"checkpoint": 5, "files": []})
    # Neither event changes the folded state beyond its seq.
    assert b.state.turn == before.turn and b.state.context == before.context and b.state.seq == 10


def test_a_later_step_takes_its_own_step_number():
    b = in_step(step=3)
    b.add("checkpoint/taken", taken(step=3), turn=1)
    assert b.rejects("checkpoint/taken", taken(step=2), turn=1) == "checkpoint/taken step 2 but the open turn is at step 3"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (taken(step=0), "checkpoint/taken step 0 is below 1"),
        (taken(step=-4), "checkpoint/taken step -4 is below 1"),
        (taken(step=2), "checkpoint/taken step 2 but the open turn is at step 1"),
        (taken(phase="during"), "checkpoint/taken phase 'during' is not before or after"),
        (taken(phase="Before"), "checkpoint/taken phase 'Before' is not before or after"),
        (taken(tree="abc"), "checkpoint/taken tree 'abc' is not a 40-hex tree id"),
        (taken(tree=TREE.upper()), f"checkpoint/taken tree {TREE.upper()!r} is not a 40-hex tree id"),
        (taken(tree=TREE + "0"), f"checkpoint/taken tree {TREE + '0'!r} is not a 40-hex tree id"),
        (taken(tree=TREE[:-1] + "g"), f"checkpoint/taken tree {TREE[:-1] + 'g'!r} is not a 40-hex tree id"),
        (taken(files=-1), "checkpoint/taken files -1 is below 0"),
    ],
)
def test_a_wrong_checkpoint_taken_is_rejected_with_its_reason(data, reason):
    assert in_step().rejects("checkpoint/taken", data, turn=1) == reason


def test_checkpoint_taken_belongs_to_a_turn():
    assert Builder().rejects("checkpoint/taken", taken()) == "checkpoint/taken outside a turn"
    # In a turn's time but without the envelope's turn.
    assert in_step().rejects("checkpoint/taken", taken()) == "checkpoint/taken outside a turn"
    assert after_turn().rejects("checkpoint/taken", taken(), turn=1) == "event in turn 1 but no turn is open"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"checkpoint": 0, "files": []}, "checkpoint/restored names checkpoint 0, which is not an earlier seq"),
        ({"checkpoint": 10, "files": []}, "checkpoint/restored names checkpoint 10, which is not an earlier seq"),
        ({"checkpoint": 5, "files": ["/etc/passwd"]}, "checkpoint/restored file '/etc/passwd' is not a relative workspace path"),
        ({"checkpoint": 5, "files": ["a/../../x"]}, "checkpoint/restored file 'a/../../x' is not a relative workspace path"),
        ({"checkpoint": 5, "files": ["a//b"]}, "checkpoint/restored file 'a//b' is not a relative workspace path"),
        ({"checkpoint": 5, "files": ["./a"]}, "checkpoint/restored file './a' is not a relative workspace path"),
        ({"checkpoint": 5, "files": [""]}, "checkpoint/restored file '' is not a relative workspace path"),
        ({"checkpoint": 5, "files": ["a\0b"]}, "checkpoint/restored file 'a\\x00b' is not a relative workspace path"),
        ({"checkpoint": 5, "files": ["a"], "forced": ["b"]}, "checkpoint/restored forced 'b' is not one of its files"),
    ],
)
def test_a_wrong_checkpoint_restored_is_rejected_with_its_reason(data, reason):
    assert after_turn().rejects("checkpoint/restored", data) == reason


def test_a_restore_never_happens_inside_a_turn():
    assert in_step().rejects("checkpoint/restored", {"checkpoint": 1, "files": []}) == (
        "checkpoint/restored while turn 1 is open"
    )


@pytest.mark.parametrize(
    "data",
    [
        {"step": 1, "tree": TREE, "files": 1},  # phase missing
        {**taken(), "extra": 1},  # unknown key
        {**taken(), "step": "1"},  # wrong type
    ],
)
def test_a_malformed_checkpoint_taken_does_not_decode(data):
    line = {"type": "checkpoint/taken", "seq": 3, "at": AT, "turn": 1, "data": data}
    with pytest.raises(msgspec.ValidationError):
        decode_line(json.dumps(line).encode())


def test_only_the_checkpoints_writer_writes_them_and_replay_names_a_wrong_line(tmp_path):
    store = SessionStore.create(tmp_path, "s-ckpt")
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    store.commit("request/header", {"step": 1, "planActive": False, "sections": [], "tools": []}, turn=1)
    store.commit("tool/call", {"callId": "c1", "name": "run_command", "arguments": {}}, turn=1)
    with pytest.raises(ValueError, match="written only by writer='checkpoints'"):
        store.commit("checkpoint/taken", taken(), turn=1)
    before = store.commit("checkpoint/taken", taken(), turn=1, writer="checkpoints")
    store.commit("tool/result", {"callId": "c1", "ok": True, "content": "done"}, turn=1)
    store.commit("checkpoint/taken", taken(phase="after", tree="0" * 40), turn=1, writer="checkpoints")
    store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    with pytest.raises(ValueError, match="written only by writer='checkpoints'"):
        store.commit("checkpoint/restored", {"checkpoint": before.seq, "files": ["a"]}, writer="approvals")
    store.commit("checkpoint/restored", {"checkpoint": before.seq, "files": ["a"]}, writer="checkpoints")
    last = store.state.seq
    store.close()
    path = tmp_path / "s-ckpt" / "log.jsonl"
    assert replay(path, use_checkpoint=False).state.seq == last == 9
    assert replay(path).state.seq == last  # through the projection checkpoint too
    # A restore appended by hand that names a later seq: replay names its line and reason.
    line = {"type": "checkpoint/restored", "seq": 10, "at": AT, "data": {"checkpoint": 11, "files": []}}
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    with pytest.raises(DshError) as info:
        replay(path, use_checkpoint=False)
    assert info.value.data == {
        "seq": 10, "line": 10, "reason": "checkpoint/restored names checkpoint 11, which is not an earlier seq",
    }


def test_replay_rejects_a_checkpoint_taken_between_turns(tmp_path):
    store = SessionStore.create(tmp_path, "s-ckpt2")
    store.commit("turn/open", {"turn": 1, "cause": "prompt"}, turn=1)
    store.commit("request/header", {"step": 1, "planActive": False, "sections": [], "tools": []}, turn=1)
    store.commit("turn/close", {"turn": 1, "stopReason": "end-turn"}, turn=1)
    store.close()
    path = tmp_path / "s-ckpt2" / "log.jsonl"
    line = {"type": "checkpoint/taken", "seq": 5, "at": AT, "data": taken()}
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    with pytest.raises(DshError) as info:
        replay(path, use_checkpoint=False)
    assert info.value.data == {"seq": 5, "line": 5, "reason": "checkpoint/taken outside a turn"}
