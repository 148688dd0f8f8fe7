"""A client of the daemon over stdio, built on pygls's client (used by `dshd demo` and
the end-to-end tests).

``RawDshMessages`` keeps ``dsh/*`` params and results as plain JSON values (pygls would
turn them into namedtuples); LSP messages keep their lsprotocol types.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

from dshd_protocol import METHODS

DSH_PREFIX = "dsh/"
NOTIFICATIONS = [method for method, spec in METHODS.items() if spec.kind == "notification"]


class RawDshMessages:
    """Protocol mixin: dsh/* requests, notifications and their replies stay raw."""

    _raw_reply_ids: set

    def send_request(self, method, params=None, callback=None, msg_id=None):
        future = super().send_request(method, params, callback, msg_id)  # type: ignore[misc]
        if method.startswith(DSH_PREFIX):
            for key, fut in self._request_futures.items():  # type: ignore[attr-defined]
                if fut is future:
                    self.__dict__.setdefault("_raw_reply_ids", set()).add(key)
                    self._result_types.pop(key, None)  # type: ignore[attr-defined]
                    break
        return future

    def structure_message(self, data: dict[str, Any]):
        method = data.get("method")
        if isinstance(method, str) and method.startswith(DSH_PREFIX):
            if "id" in data:
                return JsonRPCRequestMessage(id=data["id"], method=method, jsonrpc=data["jsonrpc"], params=data.get("params"))
            return JsonRPCNotification(method=method, jsonrpc=data["jsonrpc"], params=data.get("params"))
        raw_ids = self.__dict__.get("_raw_reply_ids", set())
        if method is None and data.get("id") in raw_ids and "error" not in data:
            raw_ids.discard(data["id"])
            return JsonRPCResponseMessage(id=data["id"], jsonrpc=data["jsonrpc"], result=data.get("result"))
        return super().structure_message(data)  # type: ignore[misc]


class DshClientProtocol(RawDshMessages, LanguageServerProtocol):
    pass


def dshd_command() -> list[str]:
    """How to start the daemon: the `dshd` script beside this Python, else `-m dshd`."""
    exe = Path(sys.executable).with_name("dshd")
    if exe.exists():
        return [str(exe), "serve"]
    return [sys.executable, "-m", "dshd", "serve"]


async def _answer(answerer: Callable[[dict], Any] | None, params: Any, without: dict) -> Any:
    """An answerer's reply (it may be a coroutine function), or ``without`` when there is none."""
    if answerer is None:
        return without
    result = answerer(params)
    if asyncio.iscoroutine(result):
        result = await result
    return result


class DshClient:
    """A thin async client: request(), notifications by method, a questions answerer and
    a permissions answerer (``answer_permissions(params) -> {"outcome", "feedback"?}``)."""

    def __init__(
        self,
        answer_questions: Callable[[dict], Any] | None = None,
        lsp_factory: Callable[[], LanguageClient] | None = None,
        answer_permissions: Callable[[dict], Any] | None = None,
    ) -> None:
        self.lsp = lsp_factory() if lsp_factory else LanguageClient("dshd-client", "0.1", protocol_cls=DshClientProtocol)
        self.notifications: list[dict] = []
        self.listeners: list[Callable[[dict], None]] = []  # called with every dsh/* notification
        self._waiters: list[tuple[Callable[[dict], bool], asyncio.Future]] = []
        self.answer_questions = answer_questions
        self.answer_permissions = answer_permissions
        for method in NOTIFICATIONS:
            self.lsp.feature(method)(self._make_collector(method))

        @self.lsp.feature("dsh/questions/ask")
        async def _ask(params):
            return await _answer(self.answer_questions, params, {"answers": []})

        @self.lsp.feature("dsh/permission/ask")
        async def _permission(params):
            return await _answer(self.answer_permissions, params, {"outcome": "reject", "feedback": "this client cannot decide"})

        # pytest-lsp's client registers its own window/logMessage handler already.
        if "window/logMessage" not in self.lsp.protocol.fm.features:

            @self.lsp.feature("window/logMessage")
            def _log(params):
                pass

    def _make_collector(self, method: str):
        def collect(params):
            note = {"method": method, "params": params}
            self.notifications.append(note)
            for listener in self.listeners:
                listener(note)
            for pred, fut in list(self._waiters):
                if not fut.done() and pred(note):
                    fut.set_result(note)

        return collect

    async def start(
        self,
        workspace: Path,
        *,
        config: dict | None = None,
        questions: bool = True,
        env=None,
        init_options: dict | None = None,
        permissions: bool | None = None,
        command: list[str] | None = None,
    ) -> dict:
        """``permissions`` (default: whether a permissions answerer was given) declares
        that this client answers dsh/permission/ask. ``command`` starts something
        other than this venv's ``dshd serve`` (a probe around it, another build)."""
        cmd = command or dshd_command()
        await self.lsp.start_io(cmd[0], *cmd[1:], cwd=str(workspace), env=env)
        if permissions is None:
            permissions = self.answer_permissions is not None
        dsh_caps = {"questions": True} if questions else {}
        if permissions:
            dsh_caps["permissions"] = True
        caps = types.ClientCapabilities(experimental={"dsh": dsh_caps} if dsh_caps else None)
        if hasattr(self.lsp, "capabilities"):
            self.lsp.capabilities = caps  # pytest-lsp's client checks messages against them
        options = dict(init_options or {})
        if config is not None:
            options["config"] = config
        init = types.InitializeParams(
            capabilities=caps,
            process_id=None,
            root_uri=workspace.resolve().as_uri(),
            initialization_options=options or None,
        )
        result = await self.lsp.protocol.send_request_async("initialize", init)
        self.lsp.protocol.notify("initialized", types.InitializedParams())
        return result

    async def request(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        return await asyncio.wait_for(self.lsp.protocol.send_request_async(method, params), timeout)

    def wait_for(self, pred: Callable[[dict], bool], timeout: float = 30) -> "asyncio.Future":
        """A future for the first notification (from now on) that ``pred`` accepts."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        return asyncio.ensure_future(asyncio.wait_for(fut, timeout))

    async def stop(self) -> int | None:
        try:
            await asyncio.wait_for(self.lsp.protocol.send_request_async("shutdown", None), 10)
        except Exception:
            pass  # refused (never initialized) or no answer: exit all the same
        try:
            self.lsp.protocol.notify("exit", None)
        except Exception:
            pass
        server = self.lsp._server
        code = None
        if server is not None:
            try:
                code = await asyncio.wait_for(server.wait(), 10)
            except asyncio.TimeoutError:
                server.kill()
                code = await server.wait()
        await self.lsp.stop()
        return code
