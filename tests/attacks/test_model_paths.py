"""A hostile model: the scripted model stands for a model that does what an injected prompt
says, and aims every file tool, and a command's folder, out of the workspace (`../x`, an
absolute path, `..` through a folder, a search and a listing of the parent) or into dshd's
own `.dsh/` and the person's `.git/`. The real dshd over stdio, trusted, asking nothing.

Every such call is a failed result naming the rule, and nothing outside is read, written or
listed. Positive control in the same turn: the same calls aimed at a twin of the outside
file inside the workspace (relative, absolute, `..` that stays inside) do read, write, list
and find it, so a tool that answered nothing could not pass; and the outside file is there
to be read by this user, so only the tools' wall keeps it out."""

from __future__ import annotations

import json

from tests.e2e.support import read_log
from tests.e2e.test_tools import calls, results, run_turn, tools_workspace

OUTSIDE = "the-outside-bytes-7f3a\n"  # the log never holds "bytes-7f3a": no call names it
TWIN = "INSIDE-twin\n"


async def test_a_models_paths_out_of_the_workspace_are_refused_and_the_same_calls_inside_work(workspace, daemons):
    daemons.trusted = True  # approve = [] is the person's own choice here: nothing is asked
    parent = workspace.parent
    (parent / "secret.txt").write_text(OUTSIDE)
    assert (parent / "secret.txt").read_text() == OUTSIDE  # readable by this user: no wall but the tools'
    probes = [
        ("read_file", {"path": "../secret.txt"}, "outside the workspace"),
        ("read_file", {"path": str(parent / "secret.txt")}, "outside the workspace"),
        ("read_file", {"path": "inside/../../secret.txt"}, "outside the workspace"),
        ("write_file", {"path": "../planted.txt", "content": "planted\n"}, "outside the workspace"),
        ("write_file", {"path": str(parent / "planted.txt"), "content": "planted\n"}, "outside the workspace"),
        ("edit_file", {"path": "../secret.txt", "oldText": "outside", "newText": "EDITED"}, "outside the workspace"),
        ("list_files", {"path": ".."}, "outside the workspace"),
        ("search", {"pattern": "[0-9]f3a|twin", "path": ".."}, "outside the workspace"),
        ("run_command", {"command": "touch ran-outside", "cwd": "../"}, "outside the workspace"),
        ("write_file", {"path": ".dsh/config.toml", "content": "plugins = []\n"}, ".dsh/"),
        ("edit_file", {"path": ".git/HEAD", "oldText": "main", "newText": "evil"}, ".git/"),
    ]
    controls = [
        ("read_file", {"path": "inside/secret.txt"}, "INSIDE-twin"),
        ("read_file", {"path": str(workspace / "inside" / "secret.txt")}, "INSIDE-twin"),
        ("read_file", {"path": "inside/../inside/secret.txt"}, "INSIDE-twin"),
        ("write_file", {"path": "inside/planted.txt", "content": "planted\n"}, ""),
        ("edit_file", {"path": "inside/secret.txt", "oldText": "INSIDE", "newText": "EDITED"}, ""),
        ("list_files", {"path": "inside"}, "secret.txt"),
        ("search", {"pattern": "[0-9]f3a|twin", "path": "inside"}, "twin"),
    ]
    tools_workspace(workspace, [calls(*[(name, args) for name, args, _ in probes + controls]), {"text": "ok"}])
    (workspace / "inside").mkdir()
    (workspace / "inside" / "secret.txt").write_text(TWIN)
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config_before = (workspace / ".dsh" / "config.toml").read_text()
    outside_before = sorted(p.name for p in parent.iterdir())

    client = await daemons.start()
    sid, _ = await run_turn(client)
    outcomes = results(read_log(workspace, sid))
    assert len(outcomes) == len(probes) + len(controls)
    for result, (name, args, rule) in zip(outcomes, probes):
        assert result["name"] == name and not result["ok"], (args, result)
        assert rule in result["content"], (args, result)
    for result, (name, args, seen) in zip(outcomes[len(probes):], controls):
        assert result["name"] == name and result["ok"], (args, result)  # control: inside, the same call works
        assert seen in result["content"], (args, result)
    assert "bytes-7f3a" not in json.dumps(read_log(workspace, sid))
    # Nothing outside changed: no file made, the secret not edited; dshd's and git's files as they were.
    assert sorted(p.name for p in parent.iterdir()) == outside_before
    assert (parent / "secret.txt").read_text() == OUTSIDE
    assert (workspace / ".dsh" / "config.toml").read_text() == config_before
    assert (workspace / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    # The controls' writes landed inside.
    assert (workspace / "inside" / "planted.txt").read_text() == "planted\n"
    assert (workspace / "inside" / "secret.txt").read_text() == "EDITED-twin\n"
