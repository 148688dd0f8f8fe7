"""A restore never overwrites what the person changed since the checkpoint: the checkpoints
plugin in a real workspace (scripted model, real tools, real shadow repository and log).
The restore is refused naming the files, nothing is put back; control in the same test: the
same restore with `force` does put them back, and is recorded as forced."""

from __future__ import annotations

import pytest
from agent_support import events_of, make_workspace

from dshd.errors import DshError
from tests.services.test_checkpoints import NO_ASKING, service_of, write


async def test_a_persons_change_is_protected_until_forced(tmp_path):
    ws = make_workspace(tmp_path, [{"toolCalls": [write("a.txt", "agent\n")]}, {"text": "done"}], config=NO_ASKING)
    agent = ws.create_session()
    await agent.prompt("go")
    service = service_of(agent)
    [info] = await service.list()
    (tmp_path / "a.txt").write_text("mine\n")  # the person edits after the step
    (tmp_path / "other.txt").write_text("also mine\n")
    diff = {f.path: f for f in await service.diff(info.seq)}
    assert diff["a.txt"].changed_by_person and diff["a.txt"].status == "deleted"
    assert diff["other.txt"].changed_by_person
    with pytest.raises(DshError) as refused:
        await service.restore(info.seq)
    assert refused.value.kind == "person-changed" and refused.value.data == {"paths": ["a.txt", "other.txt"]}
    assert (tmp_path / "a.txt").read_text() == "mine\n"  # nothing restored
    assert events_of(agent, "checkpoint/restored") == []
    outcome = await service.restore(info.seq, force=True)
    assert outcome.forced == ("a.txt", "other.txt") and not (tmp_path / "a.txt").exists()
    assert events_of(agent, "checkpoint/restored")[0].data.forced == ["a.txt", "other.txt"]
    await ws.shutdown()
