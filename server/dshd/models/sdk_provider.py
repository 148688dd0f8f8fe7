"""What the two SDK-backed providers share: the key read per call, one SDK client per
key, our retries around each attempt, the SDK stream closed on every way out (a cancel
drops the HTTP connection at once), and errors mapped with the key redacted.

A provider subclass says how to make its client, open a stream, turn the stream's items
into ModelEvents, and map its SDK's exceptions. A reply whose usage the server did not
report gets characters/4 in its place, marked estimated (:mod:`dshd.models.usage`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dshd.models import errors
from dshd.models.interface import ModelError, ModelEvent, ModelRequest
from dshd.models.retry import RetryPolicy, retrying
from dshd.models.usage import with_estimate

if TYPE_CHECKING:
    from dshd.models.config import ModelConfig

# Sent to a keyless server on this machine (ollama, llama.cpp): the SDKs need some key.
NO_KEY = "no-key"


class SdkProvider:
    label: str  # how messages name the server
    key_label: str  # "OpenAI": "set it to your OpenAI API key"
    default_base_url: str
    default_key_env: str

    def __init__(self, options: "ModelConfig") -> None:
        self.options = options
        self.model = options.model or ""
        self.base_url = options.baseUrl or self.default_base_url
        self.key_env = options.apiKeyEnv or self.default_key_env
        self.policy = RetryPolicy(options.maxRetries)
        self._client: Any = None
        self._client_key: str | None = None

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return retrying(lambda: self._attempt(request), self.policy)

    # ---- what a provider says ----

    def _new_client(self, key: str) -> Any:
        raise NotImplementedError

    async def _open(self, client: Any, request: ModelRequest) -> Any:
        """The SDK's stream object (async-iterable, with ``close()``)."""
        raise NotImplementedError

    def _convert(self, items: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
        raise NotImplementedError

    def _error(self, exc: Exception, key: str | None, *, mid_stream: bool = False) -> ModelError:
        raise NotImplementedError

    # ---- shared ----

    def _client_for(self, key: str) -> Any:
        if self._client is None or key != self._client_key:
            self._client = self._new_client(key)
            self._client_key = key
        return self._client

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = errors.api_key(self.key_env, self.options.baseUrl, self.key_label)
        client = self._client_for(key or NO_KEY)
        try:
            stream = await self._open(client, request)
        except Exception as exc:
            raise self._error(exc, key) from None
        try:
            # A server that reports no usage gets an estimate (a goal's token budget holds).
            async for event in with_estimate(self._convert(self._items(stream, key)), request):
                yield event
        except ModelError as exc:
            raise errors.redacted(exc, key) from None
        finally:
            await stream.close()

    async def _items(self, stream: Any, key: str | None) -> AsyncIterator[Any]:
        try:
            async for item in stream:
                yield item
        except Exception as exc:
            raise self._error(exc, key, mid_stream=True) from None
