"""Two real ACP clients of `dshd acp`, behind one small test interface:

- :class:`PythonSdkClient`: the official Python SDK's ``ClientSideConnection``
  (``acp.spawn_agent_process``), called through its typed methods;
- :class:`TsSdkClient`: the official TypeScript SDK (``@agentclientprotocol/sdk``) on
  Node, through ``ts_client.mjs``, which relays our commands to ``ctx.request(...)`` and
  the agent's updates and permission requests back to us.

Both hand results, updates and permission requests over as the JSON the wire carried
(camelCase), so one test body runs against either client.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

REPO = Path(__file__).resolve().parents[2]
TS_DRIVER = Path(__file__).with_name("ts_client.mjs")
NODE_CACHE = Path(os.environ.get("DSHD_VSCODE_CACHE") or REPO / ".cache" / "vscode")
NODE = NODE_CACHE / "node24" / "bin" / "node"
TS_SDK = NODE_CACHE / "acp-client" / "node_modules" / "@agentclientprotocol" / "sdk"

PermissionAnswer = Callable[[dict], "dict | Awaitable[dict]"]


def dshd_acp_command(*, shared: bool = False) -> list[str]:
    """`dshd acp --stdio` (the door in its own process); ``shared``: `dshd acp`, the
    forwarder to the workspace's shared daemon (its environment must then name a private
    XDG_RUNTIME_DIR, as tests/e2e/test_shared_daemon.py does)."""
    exe = Path(sys.executable).with_name("dshd")
    args = ["acp"] if shared else ["acp", "--stdio"]
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "dshd", *args]


def agent_env() -> dict[str, str]:
    return {**os.environ, "DSHD_LOG_LEVEL": os.environ.get("DSHD_LOG_LEVEL", "INFO")}


class AcpError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code} {message} {data!r}")
        self.code = code
        self.message = message
        self.data = data


def text_blocks(prompt: str | list[dict]) -> list[dict]:
    return [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt


class AcpTestClient:
    """What every test uses; subclasses talk to the agent."""

    name = "?"

    def __init__(self, workspace: Path, stderr_path: Path) -> None:
        self.workspace = workspace
        self.stderr_path = stderr_path
        self.updates: list[dict] = []  # session/update params, in arrival order
        self.permission_requests: list[dict] = []
        # Both, in the order they arrived: ("update" | "permission", params).
        self.wire: list[tuple[str, dict]] = []
        # How permission requests are answered; the default fails the test loudly.
        self.answer_permission: PermissionAnswer = self._unexpected_permission
        self._waiters: list[tuple[Callable[[dict], bool], asyncio.Future]] = []
        # Through the workspace's shared daemon (`dshd acp`) instead of `dshd acp --stdio`:
        # set ``shared_env`` to the variables that name its private runtime folder.
        self.shared_env: dict[str, str] | None = None

    def agent_command(self) -> list[str]:
        return dshd_acp_command(shared=self.shared_env is not None)

    def agent_env(self) -> dict[str, str]:
        return {**agent_env(), **(self.shared_env or {})}

    @staticmethod
    def _unexpected_permission(params: dict) -> dict:
        raise AssertionError(f"unexpected permission request: {params}")

    # ---- what the agent sends us ---------------------------------------------------------

    def _on_update(self, params: dict) -> None:
        self.updates.append(params)
        self.wire.append(("update", params))
        for pred, future in list(self._waiters):
            if not future.done() and pred(params):
                future.set_result(params)

    async def _on_permission(self, params: dict) -> dict:
        self.permission_requests.append(params)
        self.wire.append(("permission", params))
        answer = self.answer_permission(params)
        if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
            answer = await answer
        return answer

    def wait_update(self, pred: Callable[[dict], bool], timeout: float = 30, *, since: int = 0) -> "asyncio.Future[dict]":
        """The first update (from index ``since`` on: received already or still to
        come) that ``pred`` accepts."""
        future = asyncio.get_running_loop().create_future()
        for update in self.updates[since:]:
            if pred(update):
                future.set_result(update)
                break
        else:
            self._waiters.append((pred, future))
        return asyncio.ensure_future(asyncio.wait_for(future, timeout))

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u["update"]["sessionUpdate"] for u in self.updates if session_id in (None, u["sessionId"])]

    def of_kind(self, kind: str, session_id: str | None = None) -> list[dict]:
        return [
            u["update"]
            for u in self.updates
            if u["update"]["sessionUpdate"] == kind and session_id in (None, u["sessionId"])
        ]

    def tool_calls(self, session_id: str | None = None) -> list[dict]:
        """Each tool call as a client shows it after all its updates (the ``tool_call``,
        then every ``tool_call_update`` merged in, later fields winning), in the order
        the calls began."""
        calls: dict[str, dict] = {}
        for update in self.of_kind_any(("tool_call", "tool_call_update"), session_id):
            calls.setdefault(update["toolCallId"], {}).update({k: v for k, v in update.items() if k != "sessionUpdate"})
        return list(calls.values())

    def call_updates(self, call_id: str) -> list[dict]:
        return [u for u in self.of_kind_any(("tool_call", "tool_call_update")) if u["toolCallId"] == call_id]

    def of_kind_any(self, kinds: tuple[str, ...], session_id: str | None = None) -> list[dict]:
        return [
            u["update"]
            for u in self.updates
            if u["update"]["sessionUpdate"] in kinds and session_id in (None, u["sessionId"])
        ]

    def agent_text(self, session_id: str | None = None) -> str:
        return "".join(u["content"]["text"] for u in self.of_kind("agent_message_chunk", session_id))

    # ---- calls (subclasses) ----------------------------------------------------------------

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def initialize(self) -> dict: ...
    async def new_session(self, cwd: str | None = None, mcp_servers: list | None = None) -> dict: ...
    async def load_session(self, session_id: str, cwd: str | None = None, mcp_servers: list | None = None) -> dict: ...
    async def list_sessions(self, cwd: str | None = None) -> dict: ...
    async def prompt(self, session_id: str, prompt: str | list[dict]) -> dict: ...
    async def cancel(self, session_id: str) -> None: ...
    async def set_mode(self, session_id: str, mode_id: str) -> dict: ...
    async def set_config_option(self, session_id: str, config_id: str, value: str) -> dict: ...
    async def goal(self, params: dict) -> dict: ...

    @property
    def cwd(self) -> str:
        return str(self.workspace)


# ---- the Python SDK ----------------------------------------------------------------------


class PythonSdkClient(AcpTestClient):
    name = "python-sdk"

    async def start(self) -> None:
        import acp

        owner = self

        class Client:
            async def session_update(self, session_id, update, **kwargs):
                owner._on_update({"sessionId": session_id, "update": _dump(update)})

            async def request_permission(self, options, session_id, tool_call, **kwargs):
                params = {
                    "sessionId": session_id,
                    "toolCall": _dump(tool_call),
                    "options": [_dump(o) for o in options],
                }
                return acp.RequestPermissionResponse.model_validate(await owner._on_permission(params))

        self._stderr = open(self.stderr_path, "ab")
        command = self.agent_command()
        self._context = acp.spawn_agent_process(
            Client(),
            command[0],
            *command[1:],
            cwd=self.workspace,
            env=self.agent_env(),
            transport_kwargs={"stderr": self._stderr.fileno()},
        )
        self.conn, self.process = await self._context.__aenter__()

    async def close(self) -> None:
        try:
            await self._context.__aexit__(None, None, None)
        finally:
            self._stderr.close()

    async def _call(self, coroutine) -> dict:
        import acp

        try:
            result = await asyncio.wait_for(coroutine, 60)
        except acp.RequestError as exc:
            raise AcpError(exc.code, str(exc), exc.data) from None
        return {} if result is None else (result if isinstance(result, dict) else _dump(result))

    async def initialize(self) -> dict:
        import acp
        from acp.schema import ClientCapabilities, Implementation

        return await self._call(
            self.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="dshd-tests", version="1"),
            )
        )

    async def new_session(self, cwd=None, mcp_servers=None) -> dict:
        return await self._call(self.conn.new_session(cwd=cwd or self.cwd, mcp_servers=mcp_servers or []))

    async def load_session(self, session_id, cwd=None, mcp_servers=None) -> dict:
        return await self._call(self.conn.load_session(cwd=cwd or self.cwd, session_id=session_id, mcp_servers=mcp_servers or []))

    async def list_sessions(self, cwd=None) -> dict:
        return await self._call(self.conn.list_sessions(cwd=cwd))

    async def prompt(self, session_id, prompt) -> dict:
        from acp.schema import PromptRequest

        blocks = PromptRequest.model_validate({"sessionId": session_id, "prompt": text_blocks(prompt)}).prompt
        return await self._call(self.conn.prompt(session_id=session_id, prompt=blocks))

    async def cancel(self, session_id) -> None:
        await self.conn.cancel(session_id=session_id)

    async def set_mode(self, session_id, mode_id) -> dict:
        return await self._call(self.conn.set_session_mode(session_id=session_id, mode_id=mode_id))

    async def set_config_option(self, session_id, config_id, value) -> dict:
        return await self._call(self.conn.set_config_option(session_id=session_id, config_id=config_id, value=value))

    async def goal(self, params) -> dict:
        return await self._call(self.conn.ext_method("session/goal", params))


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(model, "model_dump") else model


# ---- the TypeScript SDK -------------------------------------------------------------------


class TsSdkClient(AcpTestClient):
    name = "ts-sdk"

    async def start(self) -> None:
        if not NODE.exists() or not TS_SDK.exists():
            raise RuntimeError(f"the TypeScript ACP client is not installed ({NODE}, {TS_SDK}): run ./run setup")
        self._stderr = open(self.stderr_path, "ab")
        env = {
            **self.agent_env(),
            "ACP_SDK_ENTRY": (TS_SDK / "dist" / "v1" / "stable" / "acp.js").as_uri(),
            "ACP_AGENT_COMMAND": json.dumps(self.agent_command()),
            "ACP_AGENT_CWD": str(self.workspace),
        }
        self.process = await asyncio.create_subprocess_exec(
            str(NODE),
            str(TS_DRIVER),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr.fileno(),
            env=env,
            limit=64 * 1024 * 1024,
        )
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            event = message.get("event")
            if event == "update":
                self._on_update(message["params"])
            elif event == "permission":
                asyncio.ensure_future(self._answer_permission(message["rid"], message["params"]))
            elif "id" in message:
                future = self._pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the TypeScript client exited"))

    async def _answer_permission(self, rid: int, params: dict) -> None:
        try:
            result = await self._on_permission(params)
        except Exception as exc:  # the test's answerer failed: tell the agent so, and the test
            self._send({"op": "permission", "rid": rid, "error": str(exc)})
            raise
        self._send({"op": "permission", "rid": rid, "result": result})

    def _send(self, command: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command).encode() + b"\n")

    async def _op(self, op: str, method: str, params: Any) -> dict:
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        self._send({"id": self._next_id, "op": op, "method": method, "params": params})
        message = await asyncio.wait_for(future, 60)
        if "error" in message:
            error = message["error"]
            raise AcpError(error.get("code"), error.get("message"), error.get("data"))
        return message.get("result") or {}

    async def request(self, method: str, params: Any) -> dict:
        """Any method, any params: what the SDK sends as it is."""
        return await self._op("request", method, params)

    async def close(self) -> None:
        try:
            if self.process.returncode is None:
                self._send({"op": "close"})
                try:
                    await asyncio.wait_for(self.process.wait(), 15)
                except asyncio.TimeoutError:
                    self.process.kill()
                    await self.process.wait()
            await asyncio.wait_for(self._reader, 5)
        finally:
            self._stderr.close()

    async def initialize(self) -> dict:
        return await self.request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "dshd-tests", "version": "1"}}
        )

    async def new_session(self, cwd=None, mcp_servers=None) -> dict:
        return await self.request("session/new", {"cwd": cwd or self.cwd, "mcpServers": mcp_servers or []})

    async def load_session(self, session_id, cwd=None, mcp_servers=None) -> dict:
        return await self.request("session/load", {"sessionId": session_id, "cwd": cwd or self.cwd, "mcpServers": mcp_servers or []})

    async def list_sessions(self, cwd=None) -> dict:
        return await self.request("session/list", {} if cwd is None else {"cwd": cwd})

    async def prompt(self, session_id, prompt) -> dict:
        return await self.request("session/prompt", {"sessionId": session_id, "prompt": text_blocks(prompt)})

    async def cancel(self, session_id) -> None:
        await self._op("notify", "session/cancel", {"sessionId": session_id})

    async def set_mode(self, session_id, mode_id) -> dict:
        return await self.request("session/set_mode", {"sessionId": session_id, "modeId": mode_id})

    async def set_config_option(self, session_id, config_id, value) -> dict:
        return await self.request(
            "session/set_config_option", {"sessionId": session_id, "configId": config_id, "value": value}
        )

    async def goal(self, params) -> dict:
        return await self.request("_session/goal", params)


CLIENTS = {"python-sdk": PythonSdkClient, "ts-sdk": TsSdkClient}
