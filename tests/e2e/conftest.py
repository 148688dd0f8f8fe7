"""End-to-end fixtures: the real `dshd serve` over stdio, driven by pytest-lsp's client.

Each test gets a fresh workspace (with a scripted model) and a daemon started on it.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest
import pytest_lsp
from pytest_lsp import LanguageClientProtocol

from dshd.client import DshClient, RawDshMessages

PLAN_SECTION = "Plan first: propose a plan with exit_plan_mode before changing files."


class E2EProtocol(RawDshMessages, LanguageClientProtocol):
    """pytest-lsp's client protocol, keeping dsh/* messages as plain JSON."""


def make_lsp_client():
    client = pytest_lsp.LanguageClient(protocol_cls=E2EProtocol)
    from pytest_lsp.client import register_lsp_features

    register_lsp_features(client)
    return client


def write_workspace(
    root: Path,
    replies: list[dict] | None = None,
    *,
    plugins: list[str] | None = None,
    extra_config: str = "",
) -> Path:
    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    (root / "script.json").write_text(json.dumps({"replies": replies or []}))
    plugin_list = json.dumps(plugins if plugins is not None else ["plan", "goals"])
    (root / ".dsh" / "config.toml").write_text(
        textwrap.dedent(
            f"""\
            plugins = {plugin_list}

            [plan]
            section = "{PLAN_SECTION}"

            [model]
            provider = "scripted"
            script = "script.json"
            """
        )
        + extra_config
    )
    return root


class Daemon:
    """Starts daemons on a workspace; stops them all at the end of the test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clients: list[DshClient] = []
        # True: start daemons with initializationOptions.trusted, for tests whose workspace
        # config loosens guarded keys (approve, sandbox) as the person's own settings.
        self.trusted = False
        self.runtime = None  # the shared daemon's runtime folder, with DSHD_E2E_VIA=connect

    async def start(
        self,
        *,
        questions: bool = True,
        answer: Callable[[dict], Any] | None = None,
        config: dict | None = None,
        init_options: dict | None = None,
        approve: Callable[[dict], Any] | None = None,
        permissions: bool | None = None,
        env: dict | None = None,
    ) -> DshClient:
        """``approve(params)`` answers dsh/permission/ask (declared when given, or by
        ``permissions``); ``env`` adds to the daemon's environment."""
        client = DshClient(answer_questions=answer, lsp_factory=make_lsp_client, answer_permissions=approve)
        env = {**os.environ, "DSHD_LOG_LEVEL": os.environ.get("DSHD_LOG_LEVEL", "WARNING"), **(env or {})}
        if self.trusted:
            init_options = {"trusted": True, **(init_options or {})}
        command = None
        if os.environ.get("DSHD_E2E_VIA") == "connect":
            # By hand: DSHD_E2E_VIA=connect runs these tests through `dshd connect` and one
            # shared daemon per test (tests that kill "the daemon" then kill the forwarder).
            from tests.shared_daemon_support import Runtime, connect_command

            if self.runtime is None:
                self.runtime = Runtime()
            env = {**env, **self.runtime.env}
            command = connect_command()
        await client.start(
            self.root, config=config, questions=questions, env=env, init_options=init_options, permissions=permissions,
            command=command,
        )
        self.clients.append(client)
        return client

    async def stop_all(self) -> None:
        for client in self.clients:
            if not client.lsp.stopped:
                await client.stop()
        if self.runtime is not None:
            self.runtime.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


@pytest.fixture
async def daemons(workspace: Path):
    d = Daemon(workspace)
    yield d
    await d.stop_all()
