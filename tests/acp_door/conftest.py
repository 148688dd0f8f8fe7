"""Fixtures for the ACP door: a workspace with a scripted model, and `dshd acp` started
in it and driven by a real client (each test that takes ``client`` runs once with the
Python SDK and once with the TypeScript SDK)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp_door.clients import CLIENTS, AcpTestClient
from tests.e2e.conftest import write_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


class Clients:
    """Starts clients (each with its own `dshd acp`); closes them all at the end."""

    def __init__(self, workspace: Path, tmp_path: Path, kind: str) -> None:
        self.workspace = workspace
        self.tmp_path = tmp_path
        self.kind = kind
        self.started: list[AcpTestClient] = []

    async def start(self, kind: str | None = None, *, initialize: bool = True) -> AcpTestClient:
        kind = kind or self.kind
        client = CLIENTS[kind](self.workspace, self.tmp_path / f"dshd-acp-{len(self.started)}.stderr")
        await client.start()
        self.started.append(client)
        if initialize:
            client.init_result = await client.initialize()
        return client

    async def close_all(self) -> None:
        for client in reversed(self.started):
            await client.close()
        self.started.clear()

    def stderr(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.tmp_path.glob("dshd-acp-*.stderr")))


@pytest.fixture(params=sorted(CLIENTS))
async def clients(request, workspace: Path, tmp_path: Path):
    pool = Clients(workspace, tmp_path, request.param)
    yield pool
    await pool.close_all()


@pytest.fixture
async def client(clients: Clients) -> AcpTestClient:
    return await clients.start()
