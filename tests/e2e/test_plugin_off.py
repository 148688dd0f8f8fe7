"""A method of a plugin that is not on answers ``plugin-not-loaded`` naming the plugin, in
``data.plugin`` and in its message, so an editor can say exactly what to add to `plugins`
(it once said `Add "?" to plugins`: the daemon sent no name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from .conftest import Daemon, write_workspace

CASES = [
    ("plan", "dsh/plan/set", {"active": True}),
    ("goals", "dsh/goal/create", {"objective": "o"}),
    ("checkpoints", "dsh/checkpoint/list", {}),
    ("checkpoints", "dsh/checkpoint/diff", {"seq": 2}),
    ("checkpoints", "dsh/checkpoint/restore", {"seq": 2}),
]


async def test_each_off_plugin_is_named(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws", plugins=["tools"])
    daemons = Daemon(root)
    try:
        client = await daemons.start()
        agent = (await client.request("dsh/session/create", {}))["agentId"]
        for plugin, method, params in CASES:
            with pytest.raises(JsonRpcException) as info:
                await client.request(method, {"agentId": agent, **params})
            data = info.value.data
            assert data == {"kind": "plugin-not-loaded", "plugin": plugin}, (method, data)
            assert f'add "{plugin}" to `plugins` in .dsh/config.toml' in info.value.message, info.value.message
            assert "?" not in info.value.message
        # With the plugin on, the same request works: the name was the right one to add.
        write_workspace(tmp_path / "on", plugins=["tools", "checkpoints"])
        on = await daemons.__class__(tmp_path / "on").start()
        on_agent = (await on.request("dsh/session/create", {}))["agentId"]
        assert (await on.request("dsh/checkpoint/list", {"agentId": on_agent}))["checkpoints"] == []
        await on.stop()
    finally:
        await daemons.stop_all()
