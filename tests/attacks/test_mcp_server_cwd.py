"""A workspace's MCP server naming a folder outside the workspace as its `cwd`: the config
layers of a trusted workspace and the toy server (tests/fixtures/mcp_servers/toy.py, whose
`where` tool answers the folder it runs in) started in the sandbox by a real in-process
agent. A trusted repository's `.mcp.json` or `.dsh/config.toml` may name only a folder
inside it: an absolute folder outside, `../`, or a folder inside that is a link out is
refused, and its server never starts. Positive control in the same test: the same outside
folder named by the person's user config does start its server there (read-only in the
sandbox), and a plain folder inside starts one there."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from agent_support import events_of
from mcp_agent_support import call, servers_of

from dshd.agent import Workspace, load_config
from dshd.agent.approvals import ApprovalAnswer, InProcessApprovals
from tests.sandbox_support import needs_sandbox

TOY = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "toy.py")


def toy(marker: Path, cwd: str) -> dict:
    return {"command": sys.executable, "args": [TOY, "--marker", str(marker)], "cwd": cwd}


@needs_sandbox
async def test_a_workspaces_server_cannot_run_in_a_folder_outside_it_and_the_persons_can(tmp_path):
    # Outside /tmp, which the sandbox replaces with its own: the person's server can see it.
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    outside = Path(tempfile.mkdtemp(prefix="dshd-mcp-cwd-outside-", dir=base)).resolve()
    try:
        root = (tmp_path / "ws").resolve()
        (root / ".dsh").mkdir(parents=True)
        (root / "sub").mkdir()
        (root / "linked").symlink_to(outside)
        marks = root / "marks"  # inside: every sandboxed server may write its marker there
        marks.mkdir()
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": {
            "absolute": toy(marks / "absolute", str(outside)),
            "parent": toy(marks / "parent", "../" + outside.name),
            "linked": toy(marks / "linked", "linked"),
            "inside": toy(marks / "inside", "sub"),
        }}))  # fmt: skip
        config_toml = toy(marks / "config", str(outside))
        (root / ".dsh" / "config.toml").write_text(
            "[mcp.servers.config]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in config_toml.items())
        )
        user = tmp_path / "user.toml"
        mine = toy(marks / "mine", str(outside))
        user.write_text('plugins = ["tools", "mcp"]\n[mcp.servers.mine]\n' + "".join(f"{k} = {json.dumps(v)}\n" for k, v in mine.items()))
        replies = [{"toolCalls": [call("mcp__mine__where"), call("mcp__inside__where")]}, {"text": "done"}]
        (root / "script.json").write_text(json.dumps({"replies": replies}))
        config = load_config(root, {"model": {"script": "script.json"}}, user_file=user, trusted=True)
        ws = Workspace(root, config, approvals=InProcessApprovals(lambda request: ApprovalAnswer("allow-once")))
        agent = ws.create_session()
        try:
            await agent.prompt("go")
            states = {s.name: s for s in servers_of(agent).states()}
            results = [(e.data.ok, e.data.content) for e in events_of(agent, "tool/result")]
        finally:
            await agent.aclose()

        # Control: the person's server runs in the outside folder, the plain one inside in sub/.
        assert states["mine"].state == "ready" and states["inside"].state == "ready", states
        assert results[0] == (True, f"{outside} -") and results[1] == (True, f"{root / 'sub'} -"), results
        # The workspace's own: refused before a process starts (or left out as the file was read).
        for name in ("absolute", "parent", "linked", "config"):
            if name in states:
                assert states[name].state == "failed" and "cwd" in (states[name].reason or ""), states[name]
        assert states["config"].reason and "only your user config" in states["config"].reason
        assert sorted(p.name for p in marks.iterdir()) == ["inside", "mine"]
        assert sorted(p.name for p in outside.iterdir()) == []
    finally:
        for child in outside.iterdir():
            child.unlink()
        outside.rmdir()
